"""One record per model call: content-free spans recorded inside another instrumentation's span are dropped."""

from __future__ import annotations

from dataclasses import replace

from detectors.llm_call import LLMCall, Message
from pipeline.ingest.nested_calls import without_shadows

CALL = LLMCall(
    trace_id="a" * 32,
    span_id="1" * 16,
    parent_span_id="0" * 16,
    service="concierge",
    span_name="messages.create",
    start_time_unix_nano=100,
    end_time_unix_nano=900,
    convention="openinference",
    input_messages=(Message("user", "Book a table."),),
    output_messages=(Message("assistant", "Booked."),),
)
# The anthropic SDK's own span: no content, same call.
SHADOW = replace(
    CALL,
    span_id="2" * 16,
    span_name="anthropic.messages.create",
    convention="gen_ai",
    input_messages=(),
    output_messages=(),
    start_time_unix_nano=200,
    end_time_unix_nano=800,
)


def test_a_content_free_child_or_sibling_inside_a_call_with_content_is_dropped() -> None:
    child = replace(SHADOW, parent_span_id=CALL.span_id)
    sibling = replace(SHADOW, parent_span_id=CALL.parent_span_id)
    assert without_shadows([CALL, child]) == [CALL]
    assert without_shadows([sibling, CALL]) == [CALL]


def test_content_free_calls_of_their_own_are_kept() -> None:
    elsewhere = replace(SHADOW, parent_span_id="9" * 16)  # neither child nor sibling
    outlasting = replace(SHADOW, parent_span_id=CALL.span_id, end_time_unix_nano=950)  # not inside the call
    other_trace = replace(SHADOW, parent_span_id=CALL.span_id, trace_id="b" * 32)
    alone = [SHADOW]  # its content may still come in log records
    for calls in ([CALL, elsewhere], [CALL, outlasting], [CALL, other_trace], alone):
        assert without_shadows(calls) == calls
