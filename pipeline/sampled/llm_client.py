"""The sampled detectors' way to an OpenAI-compatible endpoint, and the budget they spend.

The ``openai`` library does the HTTP and its retries (429 honouring ``Retry-After``, 5xx,
connection errors, timeouts, with backoff).  :class:`Budget` caps what one worker spends:
requests in a sliding minute and tokens per UTC day, reserved *before* the requests are
made (an estimate) and corrected with the usage the endpoint reports.  Retries the library
makes inside one request are not counted again.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from enum import StrEnum
from typing import Any

from openai import AsyncOpenAI

from detectors.models.chat import ChatMessage, Completion, estimate_tokens
from pipeline import metrics
from pipeline.config.sampled import LLMEndpointConfig

_WINDOW_SECONDS = 60.0
_DAY_SECONDS = 86_400


class LLMClient:
    """Chat completions from an OpenAI-compatible endpoint through the ``openai`` library (a ``ChatModel``)."""

    def __init__(self, config: LLMEndpointConfig) -> None:
        self._model = config.model
        self._client = AsyncOpenAI(
            api_key=config.api_key.get_secret_value() if config.api_key is not None else None,
            base_url=config.base_url or None,
            timeout=config.timeout_seconds,
            max_retries=config.max_retries,
        )

    async def complete(
        self, messages: Sequence[ChatMessage], *, model: str, temperature: float, max_tokens: int, json_mode: bool
    ) -> Completion:
        """One completion; ``model`` (the traced call's) is used unless the config names one."""
        chosen = self._model or model
        if not chosen:
            raise ValueError("no model: the call names none and consistency.llm.model is empty")
        extra: dict[str, Any] = {"response_format": {"type": "json_object"}} if json_mode else {}
        try:
            response = await self._client.chat.completions.create(
                model=chosen,
                messages=[dict(m) for m in messages],  # type: ignore[misc]  # role/content dicts, as the API takes
                temperature=temperature,
                max_tokens=max_tokens,
                **extra,
            )
        except Exception:
            metrics.LLM_REQUESTS.labels("error").inc()
            raise
        metrics.LLM_REQUESTS.labels("ok").inc()
        choice = response.choices[0] if response.choices else None
        text = (choice.message.content or "") if choice else ""
        usage = response.usage
        completion = Completion(
            text,
            usage.prompt_tokens if usage else sum(estimate_tokens(m.get("content", "")) for m in messages),
            usage.completion_tokens if usage else estimate_tokens(text),
            choice.finish_reason if choice else None,
            usage_reported=usage is not None,
        )
        metrics.LLM_TOKENS.labels("prompt").inc(completion.prompt_tokens)
        metrics.LLM_TOKENS.labels("completion").inc(completion.completion_tokens)
        return completion

    async def close(self) -> None:
        """Close the HTTP connections."""
        await self._client.close()


class Limit(StrEnum):
    """The budget limit that refused a reservation."""

    REQUESTS_PER_MINUTE = "requests_per_minute"
    TOKENS_PER_DAY = "tokens_per_day"


class Budget:
    """Requests per sliding minute and tokens per UTC day; not thread-safe (one event loop uses it).

    ``clock`` returns unix seconds; tests pass their own.
    """

    def __init__(
        self, max_requests_per_minute: int, max_tokens_per_day: int, clock: Callable[[], float] = time.time
    ) -> None:
        self.max_requests_per_minute = max_requests_per_minute
        self.max_tokens_per_day = max_tokens_per_day
        self._clock = clock
        self._requests: deque[float] = deque()  # when each request of the last minute was reserved
        self._day = int(clock() // _DAY_SECONDS)
        self._tokens = 0

    @property
    def tokens_today(self) -> int:
        """Tokens reserved or used since the UTC day began."""
        self._roll(self._clock())
        return self._tokens

    def refusal(self, requests: int, tokens: int) -> Limit | None:
        """The limit that ``requests`` requests costing ``tokens`` tokens would break now, if any.

        The daily limit is named first: it will not clear within a minute.
        """
        self._roll(self._clock())
        if self._tokens + tokens > self.max_tokens_per_day:
            return Limit.TOKENS_PER_DAY
        if len(self._requests) + requests > self.max_requests_per_minute:
            return Limit.REQUESTS_PER_MINUTE
        return None

    def reserve(self, requests: int, tokens: int) -> Limit | None:
        """Reserve ``requests`` and ``tokens`` when they fit (None); else the limit in the way, reserving nothing."""
        refused = self.refusal(requests, tokens)
        if refused is None:
            self._requests.extend([self._clock()] * requests)
            self._tokens += tokens
        return refused

    def settle(self, reserved_tokens: int, used_tokens: int) -> None:
        """Replace a reservation's token estimate with what the requests really used."""
        self._roll(self._clock())
        self._tokens = max(0, self._tokens + used_tokens - reserved_tokens)

    def seconds_until_room(self, requests: int) -> float:
        """How long until ``requests`` more fit in the minute window (0 when they fit now)."""
        now = self._clock()
        self._roll(now)
        excess = len(self._requests) + requests - self.max_requests_per_minute
        if excess <= 0:
            return 0.0
        if requests > self.max_requests_per_minute:
            raise ValueError(f"{requests} requests never fit in {self.max_requests_per_minute} per minute")
        return max(0.0, self._requests[excess - 1] + _WINDOW_SECONDS - now)

    def _roll(self, now: float) -> None:
        while self._requests and self._requests[0] <= now - _WINDOW_SECONDS:
            self._requests.popleft()
        day = int(now // _DAY_SECONDS)
        if day != self._day:
            self._day, self._tokens = day, 0
