"""The chat-model interface of the sampled detectors (self-consistency, claims).

Detectors depend on this protocol only; :mod:`pipeline.sampled.llm_client` implements it with
the ``openai`` library against any OpenAI-compatible endpoint.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

ChatMessage = Mapping[str, str]  # {"role": ..., "content": ...}
USAGE_KEY = "llm_usage"  # evidence key of a sampled detector's request and token counts


def estimate_tokens(text: str) -> int:
    """A rough token count (four characters a token), for budget reservations before a request."""
    return len(text) // 4 + 1


@dataclass(frozen=True, slots=True)
class Completion:
    """One answer of the endpoint, the tokens it cost, and why it ended (the API's ``finish_reason``)."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str | None = "stop"
    usage_reported: bool = True  # False: the endpoint sent no usage, the token counts are estimates

    @property
    def tokens(self) -> int:
        """Prompt and completion tokens together."""
        return self.prompt_tokens + self.completion_tokens

    @property
    def cut_off(self) -> bool:
        """Whether the answer stopped mid-way: at ``max_tokens``, or when the endpoint's context window was full."""
        return self.finish_reason == "length"

    def out_of_room(self, max_tokens: int) -> bool:
        """Cut off short of ``max_tokens``: the prompt left the context window too little room for an answer.

        Only reported usage tells this from a cut at ``max_tokens``.
        """
        return self.cut_off and self.usage_reported and self.completion_tokens < max_tokens


def usage_evidence(completions: Sequence[Completion]) -> dict[str, int]:
    """What a detector's requests cost, for its evidence (under :data:`USAGE_KEY`)."""
    return {
        "requests": len(completions),
        "prompt_tokens": sum(c.prompt_tokens for c in completions),
        "completion_tokens": sum(c.completion_tokens for c in completions),
        "tokens": sum(c.tokens for c in completions),
    }


class ChatModel(Protocol):
    """What the sampled detectors need of an endpoint."""

    async def complete(
        self, messages: Sequence[ChatMessage], *, model: str, temperature: float, max_tokens: int, json_mode: bool
    ) -> Completion:
        """One chat completion of ``messages`` for the traced call's ``model``; raises when the endpoint fails.

        ``json_mode`` asks for a JSON object (``response_format``), for endpoints that support it.
        """
        ...
