"""A local OpenAI-compatible chat-completions server for tests and benchmarks.

Built on :class:`tests.servers.ScriptedServer`, driven through the real ``openai`` library::

    with OpenAIServer(default_answer="Paris is the capital of France.") as server:
        config = LLMEndpointConfig(base_url=server.base_url, api_key=SecretStr("test"), ...)
        server.answer("one", "two", "three", "four")           # divergent: the next four answers, in order
        server.answer("not json at all")                        # malformed judge output
        server.answer("late", delay=2.0)                        # slow: a client timeout
        server.answer('{"claims": ["a', finish_reason="length")  # cut off at max_tokens
        server.script(CHAT_PATH, rate_limited())                # 429 with Retry-After
        requests = server.wait_for(4, path_prefix=CHAT_PATH)

Requests without a queued answer get ``default_answer`` (consistent answers), or what it
returns for the request when it is a function, after ``delay`` seconds (an LLM's latency).
Usage is reported as four characters a token of the request's messages and of the answer,
unless ``report_usage`` is set False (some endpoints send none).
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from tests.servers import Reply, Request, ScriptedServer

CHAT_PATH = "/v1/chat/completions"


def rate_limited(retry_after_ms: int = 20) -> Reply:
    """A 429 as OpenAI sends it, with the ``retry-after-ms`` header the openai library honours."""
    error = {"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}}
    return Reply(429, {"retry-after-ms": str(retry_after_ms)}, error)


def _tokens(text: str) -> int:
    return len(text) // 4 + 1


class OpenAIServer(ScriptedServer):
    """``POST /v1/chat/completions`` answering queued texts, then ``default_answer``."""

    def __init__(
        self, default_answer: str | Callable[[Request], str] = "The answer is 42.", delay: float = 0.0
    ) -> None:
        super().__init__(self._chat)
        self.default_answer = default_answer
        self.delay = delay
        self.report_usage = True
        self._answers: deque[tuple[str, float, str]] = deque()  # text, delay, finish_reason
        self._lock_answers = threading.Lock()
        self._ids = itertools.count(1)

    def __enter__(self) -> OpenAIServer:
        super().__enter__()
        return self

    @property
    def base_url(self) -> str:
        """For ``LLMEndpointConfig.base_url`` (the openai library appends ``/chat/completions``)."""
        return self.url + "/v1"

    def answer(self, *texts: str, delay: float = 0.0, finish_reason: str = "stop") -> None:
        """Queue answers for the next chat requests, one each in order, each after ``delay`` seconds."""
        with self._lock_answers:
            self._answers.extend((text, delay, finish_reason) for text in texts)

    def _chat(self, request: Request) -> Reply:
        if request.path != CHAT_PATH or not isinstance(request.body, dict):
            return Reply(404, body={"error": {"message": f"no route {request.method} {request.path}"}})
        with self._lock_answers:
            queued = self._answers.popleft() if self._answers else None
        if queued is not None:
            text, delay, finish_reason = queued
        else:
            default = self.default_answer
            text, delay, finish_reason = (default if isinstance(default, str) else default(request)), self.delay, "stop"
        prompt = sum(_tokens(str(m.get("content", ""))) for m in request.body.get("messages", []))
        body: dict[str, Any] = {
            "id": f"chatcmpl-{next(self._ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.body.get("model", ""),
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish_reason}
            ],
        }
        if self.report_usage:
            body["usage"] = {
                "prompt_tokens": prompt,
                "completion_tokens": _tokens(text),
                "total_tokens": prompt + _tokens(text),
            }
        return Reply(200, body=body, delay=delay)
