"""What the model did on a call, as the pages tell it: from the stored transcript and the trace's tool runs."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime

from pydantic import SecretStr

from detectors.llm_call import Message, Source, ToolCall, ToolDefinition, ToolSpan
from detectors.settings import DetectorSettings
from pipeline.config.content_policy import ContentPolicy
from pipeline.ingest.trace_facts import PROMPT_SOURCE_ID
from pipeline.sinks.transcript import transcript_json
from pipeline.ui.call_terms import CallTerms, Contracts
from pipeline.ui.queries import CallView, ToolRunView
from pipeline.ui.story import call_story, fold
from tests.calls import make_llm_call

STORE = ContentPolicy("store")
ORDER_SCHEMA = {"type": "object", "properties": {"sku": {"type": "string"}}, "required": ["sku", "ship_to"]}
WEATHER = ToolDefinition("get_weather", "Current weather", {"type": "object", "required": ["city"]})


def _view(transcript: str, answer: str = "") -> CallView:
    return CallView(
        "t" * 32,
        "s" * 16,
        "svc",
        "chat",
        "m",
        datetime.now(UTC),
        "store",
        "span",
        "",
        "",
        answer,
        transcript=transcript,
    )


def _run(call_id: str, result: str, failed: bool = False) -> ToolRunView:
    return ToolRunView("r" * 16, "get_weather", call_id, "{}", result, failed, "", datetime.now(UTC))


def test_a_call_that_only_called_a_tool_shows_the_call_its_definition_and_the_run_that_answered_it():
    call = make_llm_call(
        prompt="Weather in Oslo, in kelvin please.",
        system_instructions="You are a support assistant.",
        output_messages=(
            Message("assistant", tool_calls=(ToolCall("get_weather", '{"city": "Oslo", "unit": "kelvin"}', "call_0"),)),
            Message("assistant", tool_calls=(ToolCall("get_forecast", "{}", "call_1"),)),
        ),
        tool_definitions=(WEATHER,),
    )
    story = call_story(
        _view(transcript_json(call, STORE)), [_run("call_0", "unit must be celsius or fahrenheit", failed=True)]
    )
    assert story.instructions == "You are a support assistant."
    assert story.question == "Weather in Oslo, in kelvin please."
    assert story.judged == "tool calls" and story.answer == ""
    weather, forecast = story.tool_uses
    assert weather.name == "get_weather" and json.loads(weather.arguments) == {"city": "Oslo", "unit": "kelvin"}
    assert "\n" in weather.arguments  # indented for reading
    assert weather.definition is not None and weather.definition.startswith("Current weather\n")
    assert (weather.ran, weather.failed, weather.result) == (True, True, "unit must be celsius or fahrenheit")
    # A tool the model was not offered, whose run the trace does not hold; the tools it was offered are named.
    assert forecast.definition is None and not forecast.ran
    assert story.offered == ("get_weather",)
    assert call_story(_view(transcript_json(replace(call, tool_definitions=()), STORE))).offered == ()
    assert call_story(_view(json.dumps({"outputs": []}))).offered is None  # a transcript from before the record


def test_sources_are_numbered_apart_from_the_question_that_pasted_them_and_the_prompt_is_not_one_of_them():
    first, second = "The tower is 330 m tall including its antennas.", "It was built between 1887 and 1889."
    call = make_llm_call(
        answer="It is 330 m tall [1].",
        prompt=f"Context:\n[1] {first}\n[2] {second}\n\nQuestion: How tall is it?",
        sources=(Source("eiffel-1", first), Source("eiffel-2", second), Source(PROMPT_SOURCE_ID, "the whole prompt")),
    )
    story = call_story(_view(transcript_json(call, STORE), call.answer))
    assert [(p.number, p.id, p.text) for p in story.sources] == [(1, "eiffel-1", first), (2, "eiffel-2", second)]
    assert story.question == "Context:\n[1] (source 1, below)\n[2] (source 2, below)\n\nQuestion: How tall is it?"
    assert story.judged == "answer" and story.tool_uses == ()


def test_sources_pasted_into_the_question_are_numbered_as_there_when_the_call_carries_none():
    first, second = "Customers can return unused items within 30 days.", "Refunds take 5 business days\nto arrive."
    prompt = f"Context:\n[1] {first}\n[2] {second}\n\nQuestion: Can I return it?"
    call = make_llm_call(answer="Yes, within 30 days [1].", prompt=prompt)
    story = call_story(_view(transcript_json(call, STORE), call.answer))
    assert [(p.number, p.id, p.text, p.in_question) for p in story.sources] == [
        (1, "", first, True),
        (2, "", second, True),
    ]
    assert story.question == "Context:\n[1] (source 1, below)\n[2] (source 2, below)\n\nQuestion: Can I return it?"
    # A row stored before transcripts, grounded on its prompt, reads the same.
    old = CallView("t" * 32, "s" * 16, "svc", "chat", "m", datetime.now(UTC), "store", "prompt", prompt, prompt, "A.")
    assert [p.text for p in call_story(old).sources] == [first, second]


def test_bracketed_numbers_that_do_not_count_up_from_one_are_not_taken_for_sources():
    for prompt in ("[2] is what the manual says, isn't it?", "Compare:\n[1] the first plan\n[3] the third plan"):
        call = make_llm_call(answer="A.", prompt=prompt)
        story = call_story(_view(transcript_json(call, STORE), call.answer))
        assert story.sources == () and story.question == prompt


def test_the_terms_the_call_is_held_to_come_from_the_detectors_settings():
    detectors = DetectorSettings.model_validate(
        {
            "tool_facts": {"permissions": {"file": "permissions.yaml", "role_attribute": "app.role"}},
            "schema_violation": {"output_schemas": {"extract_order": ORDER_SCHEMA}},
        }
    )
    contracts = Contracts.configured(detectors)
    order = replace(_view(""), operation="chat", span_name="extract_order", attributes={"app.role": "viewer"})
    terms = contracts.of(order)
    assert terms.identity == (("app.role", "viewer"),) and terms.unrecorded == ("enduser.id",)
    assert (terms.schema_of, terms.required) == ("extract_order", ("sku", "ship_to"))
    assert json.loads(terms.output_schema) == ORDER_SCHEMA
    assert contracts.of(_view("")) == CallTerms((), ("enduser.id", "app.role"))
    assert Contracts.configured(DetectorSettings()).of(order) == CallTerms()


def test_tool_calls_and_results_the_request_carried_are_told_before_the_answer():
    call = make_llm_call(
        answer="Your table is booked.",
        input_messages=(
            Message("user", "Book a table."),
            Message("assistant", tool_calls=(ToolCall("book_table", '{"people": 2}', "c1"),)),
            Message("tool", "No table free at 19:30", tool_call_id="c1"),
        ),
        tool_spans=(ToolSpan("b" * 16, "book_table", "c1", failed=True, error="No table free at 19:30"),),
    )
    (earlier,) = call_story(_view(transcript_json(call, STORE), call.answer)).earlier_tool_uses
    assert (earlier.name, earlier.ran, earlier.failed, earlier.result) == (
        "book_table",
        True,
        True,
        "No table free at 19:30",
    )
    assert earlier.definition is None


def test_a_redacted_transcript_masks_content_and_hashed_or_dropped_ones_keep_none():
    call = make_llm_call(answer="Mail jane.doe@example.com", prompt="Who is it?")
    redacted = json.loads(transcript_json(call, ContentPolicy("redact")))
    assert "jane.doe@example.com" not in json.dumps(redacted) and redacted["outputs"][0]["text"].startswith("Mail ")
    assert transcript_json(call, ContentPolicy("hash", SecretStr("k" * 32))) == ""
    assert transcript_json(call, ContentPolicy("drop")) == ""


def test_a_row_stored_before_transcripts_shows_its_prompt_context_and_answer():
    view = CallView(
        "t" * 32, "s" * 16, "svc", "chat", "m", datetime.now(UTC), "store", "span", "Q?", "the context", "A."
    )
    story = call_story(view)
    assert (story.question, story.answer, [p.text for p in story.sources]) == ("Q?", "A.", ["the context"])


def test_long_values_fold_between_words_and_short_ones_do_not():
    text = " ".join(f"word{i}" for i in range(300))
    head, rest = fold(text, 100)
    assert head + rest == text and len(head) <= 100
    assert head.endswith(tuple(f"word{i}" for i in range(300))) and rest.startswith(" word")
    assert fold("short", 100) == ("short", "")
    token = "x" * 150 + " tail"
    assert fold(token, 100) == ("x" * 150, " tail")  # one long token is never cut inside
