"""Normalizing GenAI log records (SDK-made) into the content of the span's LLMCall."""

from __future__ import annotations

import random

import pytest

from detectors.llm_call import ContentSource, LLMCall, Message, Source, ToolCall
from pipeline.ingest.conventions.log_events import is_complete, log_content, merge_log_content
from pipeline.ingest.normalize import normalize_span
from pipeline.ingest.otlp_logs import GenAIRecord, decode_logs, genai_records
from pipeline.ingest.otlp_traces import decode_traces, iter_spans
from tests.genai_logs import ANSWER, QUESTION, SYSTEM, Telemetry, deprecated_events, details_event

WEATHER_CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
}


def _one_call(telemetry: Telemetry) -> tuple[LLMCall, list[GenAIRecord]]:
    spans_payload, logs_payload = telemetry.payloads()
    (ctx,) = iter_spans(decode_traces(spans_payload))
    call = normalize_span(ctx)
    assert call is not None and not call.has_content
    records = genai_records(decode_logs(logs_payload)).get((call.trace_id, call.span_id), [])
    return call, records


def test_deprecated_events_become_messages_and_choice() -> None:
    telemetry = Telemetry()
    with telemetry.chat_span():
        deprecated_events(telemetry)
    call, records = _one_call(telemetry)
    merged = merge_log_content(call, records)
    assert merged.content_source is ContentSource.LOGS
    assert [(m.role, m.text) for m in merged.input_messages] == [("system", SYSTEM), ("user", QUESTION)]
    assert (merged.prompt, merged.answer, merged.finish_reason) == (QUESTION, ANSWER, "stop")
    # Everything else is the span's.
    assert (merged.trace_id, merged.span_id, merged.model, merged.service) == (
        call.trace_id,
        call.span_id,
        call.model,
        call.service,
    )


def test_tool_conversation_and_tool_call_choice() -> None:
    telemetry = Telemetry()
    with telemetry.chat_span():
        telemetry.event("gen_ai.user.message", {"content": "Weather in Paris?"})
        telemetry.event("gen_ai.assistant.message", {"tool_calls": [WEATHER_CALL]})
        telemetry.event("gen_ai.tool.message", {"content": "18 degrees", "id": "call_1"})
        telemetry.event(
            "gen_ai.choice",
            {"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "tool_calls": [WEATHER_CALL]}},
        )
    merged = merge_log_content(*_one_call(telemetry))
    assert [m.role for m in merged.input_messages] == ["user", "assistant", "tool"]
    assert merged.input_messages[1].tool_calls == (ToolCall("get_weather", '{"city": "Paris"}', "call_1"),)
    assert merged.input_messages[2].tool_call_id == "call_1"
    assert merged.sources == (Source("call_1", "18 degrees"),)  # tool results ground the answer
    assert merged.output_tool_calls == (ToolCall("get_weather", '{"city": "Paris"}', "call_1"),)
    assert merged.finish_reason == "tool_calls"


def test_records_arriving_shuffled_keep_emission_order() -> None:
    telemetry = Telemetry()
    with telemetry.chat_span():
        for turn in range(6):
            telemetry.event("gen_ai.user.message", {"content": f"turn {turn}"})
        for index in (1, 0):
            body = {"index": index, "finish_reason": "stop", "message": {"content": f"choice {index}"}}
            telemetry.event("gen_ai.choice", body)
    _, records = _one_call(telemetry)
    random.Random(7).shuffle(records)
    content = log_content(records)
    assert [m.text for m in content["input_messages"]] == [f"turn {turn}" for turn in range(6)]
    assert [m.text for m in content["output_messages"]] == ["choice 0", "choice 1"]  # by index


@pytest.mark.parametrize("as_json", [False, True], ids=["structured", "json-strings"])
def test_operation_details_record(as_json: bool) -> None:
    telemetry = Telemetry()
    with telemetry.chat_span():
        details_event(telemetry, as_json=as_json)
    call, records = _one_call(telemetry)
    assert is_complete(records)
    merged = merge_log_content(call, records)
    assert merged.system_instructions == SYSTEM
    assert merged.input_messages == (Message("user", QUESTION),)
    assert merged.output_messages == (Message("assistant", ANSWER, finish_reason="stop"),)
    assert merged.content_source is ContentSource.LOGS


def test_deprecated_events_are_never_complete() -> None:
    telemetry = Telemetry()
    with telemetry.chat_span():
        deprecated_events(telemetry)
    assert not is_complete(_one_call(telemetry)[1])


def test_bare_string_and_json_string_bodies() -> None:
    telemetry = Telemetry()
    with telemetry.chat_span():
        telemetry.event("gen_ai.user.message", QUESTION)
        telemetry.event("gen_ai.choice", '{"index": 0, "message": {"content": "1889."}}')
    merged = merge_log_content(*_one_call(telemetry))
    assert (merged.prompt, merged.answer) == (QUESTION, "1889.")


def test_records_without_content_leave_the_call_absent() -> None:
    """With content capture off, openai-v2 still logs the events, empty."""
    telemetry = Telemetry()
    with telemetry.chat_span():
        telemetry.event("gen_ai.user.message", {})
        telemetry.event("gen_ai.choice", {"index": 0, "finish_reason": "stop", "message": {"role": "assistant"}})
    merged = merge_log_content(*_one_call(telemetry))
    assert merged.content_source is ContentSource.ABSENT
    assert merged.finish_reason == "stop"  # what little the records said is kept


def test_span_fields_win_over_log_fields() -> None:
    telemetry = Telemetry()
    with telemetry.chat_span(**{"gen_ai.system_instructions": "from the span"}):
        deprecated_events(telemetry)
    spans_payload, logs_payload = telemetry.payloads()
    (ctx,) = iter_spans(decode_traces(spans_payload))
    call = normalize_span(ctx)
    assert call is not None and call.has_content
    (records,) = genai_records(decode_logs(logs_payload)).values()
    merged = merge_log_content(call, records)
    assert merged.system_instructions == "from the span"
    assert merged.answer == ANSWER
