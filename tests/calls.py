"""Building LLMCall records in tests without repeating the envelope fields."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from detectors.llm_call import LLMCall, Message, Source


def make_llm_call(answer: str = "", prompt: str = "", sources: Sequence[Source] = (), **fields: Any) -> LLMCall:
    """A call with a user prompt (when given), one assistant answer and ``sources``; ``fields`` override."""
    envelope: dict[str, Any] = {
        "trace_id": "0" * 32,
        "span_id": "1" * 16,
        "parent_span_id": None,
        "service": "svc",
        "span_name": "chat",
        "start_time_unix_nano": 0,
        "end_time_unix_nano": 1,
        "convention": "gen_ai",
        "input_messages": (Message("user", prompt),) if prompt else (),
        "output_messages": (Message("assistant", answer),),
        "sources": tuple(sources),
    }
    return LLMCall(**{**envelope, **fields})
