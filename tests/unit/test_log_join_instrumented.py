"""The real openai-v2 instrumentation logs content; decode + normalize + join puts it back on the call.

``opentelemetry-instrumentation-openai-v2`` wraps the real ``openai`` client, which calls a
local OpenAI-compatible server; each mode runs in its own process
(``tests/instrumented/run_openai_v2.py``), both in parallel.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from detectors.llm_call import ContentSource, LLMCall, Source, ToolCall
from pipeline.config.stream import JoinConfig
from pipeline.ingest.normalize import normalize_span
from pipeline.ingest.otlp_logs import decode_logs, encode_logs_json, genai_records
from pipeline.ingest.otlp_traces import decode_traces, iter_spans
from pipeline.log_join.join import LogJoin, Outcome, Release
from tests.instrumented import fake_openai
from tests.instrumented.run_instrumented import TOOL_RESULT

REPO_ROOT = Path(__file__).resolve().parents[2]
MODES = {
    # The default (v1.30 conventions) mode: one deprecated event per message, content in the body.
    "events": {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"},
    # The latest experimental conventions: one operation-details record per call.
    "details": {
        "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "event_only",
    },
}
T0 = 1_800_000_000.0
WINDOW = 5.0


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[bytes, bytes]]:
    """(spans payload, logs payload) per mode."""
    out = tmp_path_factory.mktemp("openai_v2")
    runs = {
        mode: subprocess.Popen(
            [sys.executable, "-m", "tests.instrumented.run_openai_v2", str(out / mode)],
            cwd=REPO_ROOT,
            env={**os.environ, **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        for mode, env in MODES.items()
    }
    payloads = {}
    for mode, run in runs.items():
        output, _ = run.communicate(timeout=120)
        assert run.returncode == 0, output.decode()
        payloads[mode] = ((out / mode / "spans.bin").read_bytes(), (out / mode / "logs.bin").read_bytes())
    return payloads


def _join(spans_payload: bytes, logs_payload: bytes, spans_first: bool) -> list[Release]:
    """Feed everything through the join as the stage would; return the releases in call order."""
    calls = [normalize_span(ctx) for ctx in iter_spans(decode_traces(spans_payload))]
    records = genai_records(decode_logs(logs_payload))
    join = LogJoin(JoinConfig(window_seconds=WINDOW))
    released: list[Release] = []

    def offer_spans() -> None:
        for call in calls:
            assert call is not None and not call.has_content  # nothing on the span itself
            released.extend(join.offer_span(call, T0))

    def offer_records() -> None:
        for (trace_id, span_id), span_records in records.items():
            released.extend(join.offer_records(trace_id, span_id, span_records, T0))

    for offer in (offer_spans, offer_records) if spans_first else (offer_records, offer_spans):
        offer()
    released += join.due(T0 + WINDOW)
    return sorted(released, key=lambda release: release.call.start_time_unix_nano if release.call else 0)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("spans_first", [True, False], ids=["spans-first", "logs-first"])
def test_join_restores_prompt_answer_and_tool_calls(
    recorded: dict[str, tuple[bytes, bytes]], mode: str, spans_first: bool
) -> None:
    conversation, tool_call = _join(*recorded[mode], spans_first=spans_first)
    for release in (conversation, tool_call):
        assert release.outcome is Outcome.LOGS
    calls: list[LLMCall] = [release.call for release in (conversation, tool_call) if release.call]
    assert {(call.content_source, call.service, call.model) for call in calls} == {
        (ContentSource.LOGS, "app-openai-v2", fake_openai.MODEL)
    }
    first, second = calls
    assert [m.role for m in first.input_messages] == ["system", "user", "assistant", "tool"]
    assert first.input_messages[0].text == "Answer from the tool results only."
    assert first.prompt == "What is the weather in Paris?"
    assert first.input_messages[2].tool_calls[0].name == "get_weather"
    assert first.sources == (Source("call_prev1", TOOL_RESULT),)
    assert (first.answer, first.finish_reason) == (fake_openai.ANSWER, "stop")
    assert second.prompt == "When was the Eiffel Tower built?"
    (answer_call,) = second.output_tool_calls
    assert (answer_call.name, answer_call.id) == ("get_weather", fake_openai.TOOL_CALL_ID)
    assert second.finish_reason == "tool_calls"


def test_default_mode_arguments_are_raw_json(recorded: dict[str, tuple[bytes, bytes]]) -> None:
    _, tool_call = _join(*recorded["events"], spans_first=True)
    assert tool_call.call is not None
    assert tool_call.call.output_tool_calls == (
        ToolCall("get_weather", fake_openai.TOOL_ARGUMENTS, fake_openai.TOOL_CALL_ID),
    )


def test_details_mode_needs_no_window(recorded: dict[str, tuple[bytes, bytes]]) -> None:
    spans_payload, logs_payload = recorded["details"]
    join = LogJoin(JoinConfig(window_seconds=WINDOW))
    for call in (normalize_span(ctx) for ctx in iter_spans(decode_traces(spans_payload))):
        assert call is not None
        assert join.offer_span(call, T0) == []
    released = [
        release
        for (trace_id, span_id), records in genai_records(decode_logs(logs_payload)).items()
        for release in join.offer_records(trace_id, span_id, records, T0)
    ]
    assert [release.outcome for release in released] == [Outcome.LOGS, Outcome.LOGS]


def test_logs_as_otlp_json(recorded: dict[str, tuple[bytes, bytes]]) -> None:
    _, logs_payload = recorded["events"]
    as_json = encode_logs_json(decode_logs(logs_payload))
    assert genai_records(decode_logs(as_json)) == genai_records(decode_logs(logs_payload))
