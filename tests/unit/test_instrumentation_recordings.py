"""Nine agent frameworks and provider SDKs, recorded under their own instrumentation, read whole.

The recordings (``tests/instrumented/recordings``, made by ``make record-instrumentations``)
hold the five scenarios of :mod:`tests.instrumented.scripted_model` per setup.  They go through
the worker's processor (decode, normalize, trace facts); the content-only detectors then judge
them: the failed booking claimed done is a tool_outcome fact, the undefined tool and the
wrongly typed argument are schema violations wherever the library lets the call through.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest

from detectors.llm_call import ContentSource, LLMCall
from detectors.schema_violation import SchemaViolationConfig
from detectors.schema_violation.detector import SchemaViolationDetector
from detectors.suite import DetectorSuite
from detectors.tool_outcome import ToolOutcomeConfig
from detectors.tool_outcome.detector import ToolOutcomeDetector
from pipeline.config.stream import JoinConfig
from pipeline.ingest.normalize import normalize_span
from pipeline.ingest.otlp_logs import decode_logs, genai_records
from pipeline.log_join.join import LogJoin
from pipeline.spans.processor import InboundMessage, SpanBatchProcessor
from tests.instrumented.recorded import EXPECTED_CALLS, RECORDINGS, SETUPS
from tests.instrumented.scripted_model import (
    BOOKING_ERROR,
    CLAIMED_SUCCESS,
    CONTRADICTED_ANSWER,
    FAITHFUL_ANSWER,
    QUESTIONS,
    TOOL_REQUESTS,
    scenario,
)
from tests.unit.conftest import decode

# Where the tool loop runs inside one model call, the requested calls are never on a span.
TOOL_CALLS_HIDDEN = {"google_genai_auto"}


def replay(setup: str) -> list[LLMCall]:
    """A recording through the worker's processor, as one keyed message, calls in start order."""
    payload = (RECORDINGS / setup / "spans.bin").read_bytes()
    result = SpanBatchProcessor(DetectorSuite([]), "v-test").normalize([InboundMessage(b"recording", payload)])
    assert not result.dead_letters
    return sorted(result.llm_calls, key=lambda call: call.start_time_unix_nano)


@pytest.fixture(scope="module")
def recorded() -> dict[str, list[LLMCall]]:
    return {setup: replay(setup) for setup in SETUPS}


def by_scenario(calls: Sequence[LLMCall]) -> dict[str, list[LLMCall]]:
    found: dict[str, list[LLMCall]] = {}
    for call in calls:
        found.setdefault(scenario(" ".join(m.text for m in call.input_messages)), []).append(call)
    return found


def test_every_setup_has_its_recording_and_versions() -> None:
    for setup in SETUPS:
        versions = json.loads((RECORDINGS / setup / "versions.json").read_text())
        assert versions["setup"] == setup and all(versions["versions"].values())


@pytest.mark.parametrize("setup", SETUPS)
def test_each_model_call_is_read_once_with_its_content_model_and_usage(
    recorded: dict[str, list[LLMCall]], setup: str
) -> None:
    scenarios = by_scenario(recorded[setup])
    expected = {"faithful": 1, "contradicted": 1, **EXPECTED_CALLS[setup]}
    assert {name: len(calls) for name, calls in scenarios.items()} == expected
    assert len({call.span_id for call in recorded[setup]}) == sum(expected.values())
    for call in recorded[setup]:
        assert call.model and call.provider, call
        assert call.prompt in QUESTIONS.values() or QUESTIONS[scenario(call.prompt)] in call.prompt
    answered = [call for call in recorded[setup] if call.answer or call.output_tool_calls]
    # Google's automatic function calling raised on the undefined tool: that call has no output.
    assert len(answered) == sum(expected.values()) - (setup == "google_genai_auto")
    assert {call.usage.input_tokens for call in answered} == {42}


@pytest.mark.parametrize("setup", SETUPS)
def test_rag_answers_keep_their_context(recorded: dict[str, list[LLMCall]], setup: str) -> None:
    scenarios = by_scenario(recorded[setup])
    ((faithful,), (contradicted,)) = scenarios["faithful"], scenarios["contradicted"]
    assert faithful.answer == FAITHFUL_ANSWER and contradicted.answer == CONTRADICTED_ANSWER
    for call in (faithful, contradicted):
        assert "330 metres tall" in call.grounding_text  # the system prompt, or LlamaIndex's retrieved node


@pytest.mark.parametrize("setup", sorted(set(SETUPS) - TOOL_CALLS_HIDDEN))
def test_every_tool_call_and_result_is_read_in_order(recorded: dict[str, list[LLMCall]], setup: str) -> None:
    scenarios = by_scenario(recorded[setup])
    for name, (tool, arguments) in TOOL_REQUESTS.items():
        asked = scenarios[name][0]
        (call,) = asked.output_tool_calls
        assert (call.name, json.loads(call.arguments or "")) == (tool, arguments)
        assert asked.finish_reason in ("tool_calls", "stop"), asked.finish_reason  # Gemini says STOP
        assert [definition.name for definition in asked.tool_definitions] == ["book_table"]
        assert asked.tool_definitions[0].parameters is not None
    answered = scenarios["failed_tool"][1]
    assert [message.role for message in answered.input_messages if message.role != "system"] == [
        "user",
        "assistant",
        "tool",
    ]
    assert answered.input_messages[-1].tool_call_id  # paired with its request
    assert BOOKING_ERROR in answered.input_messages[-1].text
    assert any(BOOKING_ERROR in source.text for source in answered.sources)


@pytest.mark.parametrize("setup", SETUPS)
def test_a_failed_tool_claimed_done_is_flagged(recorded: dict[str, list[LLMCall]], setup: str) -> None:
    final = by_scenario(recorded[setup])["failed_tool"][-1]
    assert final.answer == CLAIMED_SUCCESS
    (finding,) = ToolOutcomeDetector(ToolOutcomeConfig(), threshold=0.5).detect_batch([final])
    assert finding.flagged and finding.severity == 4, finding
    assert finding.summary.startswith("answer claims book_table succeeded; the tool returned error")
    assert BOOKING_ERROR in finding.summary
    assert any(BOOKING_ERROR in source.text for source in final.sources)  # the tool's result is its context


@pytest.mark.parametrize("setup", SETUPS)
def test_answers_without_a_failed_tool_are_not_flagged_by_tool_outcome(
    recorded: dict[str, list[LLMCall]], setup: str
) -> None:
    scenarios = by_scenario(recorded[setup])
    finals = [scenarios[name][-1] for name in ("faithful", "contradicted", "wrong_type") if scenarios[name][-1].answer]
    results = ToolOutcomeDetector(ToolOutcomeConfig(), threshold=0.5).detect_batch(finals)
    assert not any(result.flagged for result in results), results


@pytest.mark.parametrize("setup", sorted(set(SETUPS) - TOOL_CALLS_HIDDEN))
def test_undefined_tools_and_wrong_argument_types_are_schema_violations(
    recorded: dict[str, list[LLMCall]], setup: str
) -> None:
    scenarios = by_scenario(recorded[setup])
    detector = SchemaViolationDetector(SchemaViolationConfig(), threshold=0.5)
    undefined, wrong_type, faithful = detector.detect_batch(
        [scenarios["undefined_tool"][0], scenarios["wrong_type"][0], scenarios["failed_tool"][0]]
    )
    assert undefined.flagged and [v["kind"] for v in undefined.evidence["violations"]] == ["unknown_tool"]
    assert wrong_type.flagged and "people" in json.dumps(wrong_type.evidence["violations"])
    assert not faithful.flagged  # the well-formed booking request


def test_google_genai_content_sent_only_as_log_records_is_joined_back() -> None:
    """Content capture ``EVENT_ONLY``: content-free spans, one log record per call with the content."""
    folder = RECORDINGS / "google_genai_events"
    calls = [call for ctx in decode((folder / "spans.bin").read_bytes()) if (call := normalize_span(ctx))]
    assert len(calls) == 8 and not any(call.has_content for call in calls)
    join = LogJoin(JoinConfig(window_seconds=5.0))
    for call in calls:
        assert join.offer_span(call, 0.0) == []  # held for its log record
    released = [
        release.call
        for (trace_id, span_id), records in genai_records(decode_logs((folder / "logs.bin").read_bytes())).items()
        for release in join.offer_records(trace_id, span_id, records, 0.0)
        if release.call is not None
    ]
    assert len(released) == 8 and {call.content_source for call in released} == {ContentSource.LOGS}
    final = by_scenario(sorted(released, key=lambda call: call.start_time_unix_nano))["failed_tool"][-1]
    assert [m.role for m in final.input_messages] == ["user", "assistant", "tool"]
    (finding,) = ToolOutcomeDetector(ToolOutcomeConfig(), threshold=0.5).detect_batch([final])
    assert finding.flagged and finding.severity == 4
