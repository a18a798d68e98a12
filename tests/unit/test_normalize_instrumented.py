"""normalize_span on spans recorded by real instrumentation libraries around the real openai client.

Each library runs in its own subprocess (``tests/instrumented/run_instrumented.py``)
against a local fake OpenAI server; both run in parallel to keep the suite fast.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from detectors.llm_call import LLMCall, Source, TokenLogprob, ToolCall, TopLogprob, Usage
from detectors.tool_outcome import ToolOutcomeConfig
from detectors.tool_outcome.detector import ToolOutcomeDetector
from pipeline.ingest.normalize import normalize_span
from tests.instrumented import fake_openai
from tests.instrumented.run_instrumented import FAILED_BOOKING, TOOL_RESULT
from tests.unit.conftest import decode

LIBRARIES = ("openinference", "openllmetry")
REPO_ROOT = Path(__file__).resolve().parents[2]
WEATHER_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius"]}},
    "required": ["city"],
}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[LLMCall]]:
    """The four calls of the helper script, normalized, per library."""
    out = tmp_path_factory.mktemp("instrumented")
    runs = {
        library: subprocess.Popen(
            [sys.executable, "-m", "tests.instrumented.run_instrumented", library, str(out / library)],
            cwd=REPO_ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        for library in LIBRARIES
    }
    calls: dict[str, list[LLMCall]] = {}
    for library, run in runs.items():
        output, _ = run.communicate(timeout=60)
        assert run.returncode == 0, output.decode()
        spans = decode((out / library).read_bytes())
        normalized = [normalize_span(ctx) for ctx in sorted(spans, key=lambda ctx: ctx.span.start_time_unix_nano)]
        calls[library] = [call for call in normalized if call is not None]
    return calls


@pytest.mark.parametrize("library", LIBRARIES)
def test_every_call_is_normalized(recorded: dict[str, list[LLMCall]], library: str) -> None:
    calls = recorded[library]
    assert len(calls) == 4
    assert {call.convention for call in calls} == {library}
    assert {call.model for call in calls} == {fake_openai.MODEL}  # the response model
    assert {call.provider for call in calls} == {"openai"}
    assert {call.service for call in calls} == {f"app-{library}"}
    assert {call.usage for call in calls} == {Usage(42, 7)}


@pytest.mark.parametrize("library", LIBRARIES)
def test_conversation_with_tool_result(recorded: dict[str, list[LLMCall]], library: str) -> None:
    call = recorded[library][0]
    assert [m.role for m in call.input_messages] == ["system", "user", "assistant", "tool"]
    assert call.input_messages[0].text == "Answer from the tool results only."
    assert call.prompt == "What is the weather in Paris?"
    assert call.input_messages[2].tool_calls == (ToolCall("get_weather", '{"city": "Paris"}', "call_prev1"),)
    assert call.input_messages[3].tool_call_id == "call_prev1"
    assert call.sources == (Source("call_prev1", TOOL_RESULT),)
    assert call.answer == fake_openai.ANSWER
    assert call.finish_reason == "stop"
    assert "gen_ai.input.messages" not in call.attributes and "input.value" not in call.attributes


@pytest.mark.parametrize("library", LIBRARIES)
def test_tool_call_answer_and_tool_definitions(recorded: dict[str, list[LLMCall]], library: str) -> None:
    call = recorded[library][1]
    assert call.output_tool_calls == (ToolCall("get_weather", fake_openai.TOOL_ARGUMENTS, fake_openai.TOOL_CALL_ID),)
    assert call.answer == ""
    assert call.finish_reason == "tool_calls"  # OpenLLMetry records "tool_call"
    (tool,) = call.tool_definitions
    assert (tool.name, tool.description, tool.parameters) == (
        "get_weather",
        "Current weather for a city.",
        WEATHER_SCHEMA,
    )


def test_openinference_logprobs_from_raw_response(recorded: dict[str, list[LLMCall]]) -> None:
    call = recorded["openinference"][2]
    assert call.answer == "Paris."
    assert call.logprobs == (
        TokenLogprob("Paris", -0.01, (TopLogprob("Paris", -0.01), TopLogprob("Lyon", -4.6))),
        TokenLogprob(".", -0.2, (TopLogprob(".", -0.2), TopLogprob("!", -1.7))),
    )


def test_openllmetry_records_no_logprobs(recorded: dict[str, list[LLMCall]]) -> None:
    call = recorded["openllmetry"][2]
    assert (call.answer, call.logprobs, call.operation) == ("Paris.", (), "chat")


@pytest.mark.parametrize("library", LIBRARIES)
def test_an_agent_claiming_a_failed_tool_succeeded_is_caught_from_the_recorded_span(
    recorded: dict[str, list[LLMCall]], library: str
) -> None:
    call = recorded[library][3]
    assert call.answer == fake_openai.CLAIMED_SUCCESS
    assert call.sources == (Source("call_book1", FAILED_BOOKING),)
    (result,) = ToolOutcomeDetector(ToolOutcomeConfig(), threshold=0.5).detect_batch([call])
    assert result.flagged and result.severity == 4
    assert result.summary == "answer claims book_table succeeded; the tool returned error: No table free at 19:30"
