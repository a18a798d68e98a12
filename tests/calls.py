"""Building LLMCall records in tests without repeating the envelope fields; the demo's calls; quotes of them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from detectors.llm_call import LLMCall, Message, Source
from detectors.suite import DetectorSuite
from pipeline.spans.processor import InboundMessage, SpanBatchProcessor
from pipeline.tools.example_traces import example_traces


def make_llm_call(answer: str = "", prompt: str = "", sources: Sequence[Source] = (), **fields: Any) -> LLMCall:
    """A call with a user prompt (when given), one assistant answer and ``sources``; ``fields`` override."""
    envelope: dict[str, Any] = {
        "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736",
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


def demo_call(marker: str) -> LLMCall:
    """The demo's example call whose answer holds ``marker``, as the worker reads it from its trace."""
    messages = [InboundMessage(None, trace.SerializeToString()) for trace in example_traces()]
    calls = SpanBatchProcessor(DetectorSuite([]), "v-test").normalize(messages).llm_calls
    (call,) = [call for call in calls if marker in call.answer]
    return call


def whole_words(quoted: str, source: str) -> bool:
    """Whether each piece of ``quoted`` between ellipses is in ``source`` and starts and ends on a word boundary."""
    for piece in filter(None, (part.strip() for part in quoted.split("…"))):
        start = source.find(piece)
        end = start + len(piece)
        if start < 0 or (start and source[start - 1].isalnum()) or (end < len(source) and source[end].isalnum()):
            return False
    return True
