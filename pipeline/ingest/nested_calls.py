"""One model call, one record: a content-free span recorded inside another instrumentation's span is dropped.

Two instrumentations can record the same model call: the ``anthropic`` SDK (2.x) makes a
content-free GenAI ``chat`` span of its own for every request, nested in (OpenInference) or
beside (OpenLLMetry) the span of the instrumentation that records the messages.  Read as is,
every call would give one record with content and one empty one.

A call is such a shadow when it has no messages at all, and another call of the same message
*with* messages, in the same trace, is its parent or its sibling (same parent span) and
lasted at least as long around it.  Only spans that travel in the same message are compared:
exporters batch by time, so a call's spans nearly always do; a shadow that arrives alone is
kept (a content-free record, as before).
"""

from __future__ import annotations

from collections.abc import Sequence

from detectors.llm_call import LLMCall


def without_shadows(calls: Sequence[LLMCall]) -> list[LLMCall]:
    """``calls`` less the content-free ones that shadow a call with content (module docstring)."""
    with_content = [call for call in calls if _has_content(call)]
    if len(with_content) == len(calls) or not with_content:
        return list(calls)
    return [call for call in calls if _has_content(call) or not any(_shadows(call, other) for other in with_content)]


def _has_content(call: LLMCall) -> bool:
    return bool(call.input_messages or call.output_messages)


def _shadows(shadow: LLMCall, call: LLMCall) -> bool:
    related = shadow.parent_span_id in (call.span_id, call.parent_span_id)
    around = (
        call.start_time_unix_nano <= shadow.start_time_unix_nano <= shadow.end_time_unix_nano <= call.end_time_unix_nano
    )
    return shadow.trace_id == call.trace_id and related and around
