"""normalize_span on spans built with the real SDK and OTLP encoder, one per convention."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from opentelemetry.trace import Tracer

from detectors.llm_call import LLMCall, Source, TokenLogprob, ToolCall, TopLogprob, Usage
from pipeline.ingest import normalize
from pipeline.ingest.normalize import MalformedLLMSpan, normalize_span
from pipeline.ingest.otlp_traces import SpanContext
from tests.unit.conftest import Capture

Event = tuple[str, Mapping[str, Any]]
PARIS_TOP = [{"token": "Paris", "logprob": -0.01}, {"token": "Lyon", "logprob": -4.6}]
TOKENS = [
    {"token": "Paris", "logprob": -0.01, "top_logprobs": PARIS_TOP},
    {"token": ".", "logprob": -0.2, "top_logprobs": []},
]
EXPECTED_TOKENS = (
    TokenLogprob("Paris", -0.01, (TopLogprob("Paris", -0.01), TopLogprob("Lyon", -4.6))),
    TokenLogprob(".", -0.2),
)
PARIS = {"city": "Paris"}
WEATHER_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def emit(
    capture: Capture,
    name: str,
    attributes: Mapping[str, Any],
    events: Sequence[Event] = (),
    resource: dict[str, str] | None = None,
) -> SpanContext:
    def run(tracer: Tracer) -> None:
        with tracer.start_as_current_span("request"), tracer.start_as_current_span(name) as span:
            span.set_attributes(attributes)
            for event_name, event_attributes in events:
                span.add_event(event_name, event_attributes)

    root, child = sorted(capture(run, resource), key=lambda ctx: ctx.span.name == name)
    assert child.span.name == name and root.span.name == "request"
    return child


def llm_call(capture: Capture, name: str, attributes: Mapping[str, Any], events: Sequence[Event] = ()) -> LLMCall:
    call = normalize_span(emit(capture, name, attributes, events))
    assert call is not None
    return call


def test_gen_ai_current_attributes(capture: Capture) -> None:
    input_messages = [
        {"role": "user", "parts": [{"type": "text", "content": "Weather in Paris?"}]},
        {"role": "assistant", "parts": [{"type": "tool_call", "id": "c1", "name": "get_weather", "arguments": PARIS}]},
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1", "response": {"temp_c": 18}}]},
    ]  # fmt: skip
    output_messages = [
        {
            "role": "assistant",
            "parts": [{"type": "reasoning", "content": "think"}, {"type": "text", "content": "It is 18 C."}],
            "finish_reason": "stop",
        }
    ]
    tools = [{"type": "function", "name": "get_weather", "description": "Weather.", "parameters": WEATHER_SCHEMA}]
    call = llm_call(
        capture,
        "chat gpt-4o",
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": "gpt-4o",
            "gen_ai.response.model": "gpt-4o-2024-08-06",
            "gen_ai.system_instructions": json.dumps([{"type": "text", "content": "Be brief."}]),
            "gen_ai.input.messages": json.dumps(input_messages),
            "gen_ai.output.messages": json.dumps(output_messages),
            "gen_ai.tool.definitions": json.dumps(tools),
            "gen_ai.usage.input_tokens": 120,
            "gen_ai.usage.output_tokens": 9,
            "risk.domain": "travel",
        },
    )
    assert (call.convention, call.operation, call.provider, call.model) == (
        "gen_ai",
        "chat",
        "openai",
        "gpt-4o-2024-08-06",
    )
    assert call.system_instructions == "Be brief."
    assert [m.role for m in call.input_messages] == ["user", "assistant", "tool"]
    assert call.prompt == "Weather in Paris?"
    assert call.input_messages[1].tool_calls == (ToolCall("get_weather", '{"city": "Paris"}', "c1"),)
    assert call.input_messages[2].tool_call_id == "c1"
    assert call.answer == "It is 18 C."  # reasoning is not part of the answer
    assert call.finish_reason == "stop"
    assert call.sources == (Source("c1", '{"temp_c": 18}'),)
    assert call.tool_definitions[0].name == "get_weather"
    assert call.tool_definitions[0].parameters == WEATHER_SCHEMA
    assert call.usage == Usage(120, 9)
    assert call.attributes["risk.domain"] == "travel"
    assert call.attributes["service.name"] == "shop"
    assert not any("messages" in key or "definitions" in key for key in call.attributes)


def test_gen_ai_structured_values(capture: Capture) -> None:
    """Complex attribute values (OTLP kvlist/array) work like their JSON-string form."""
    call = llm_call(
        capture,
        "chat",
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.input.messages": [{"role": "user", "parts": [{"type": "text", "content": "Hi"}]}],
            "gen_ai.output.messages": [
                {
                    "role": "assistant",
                    "parts": [{"type": "tool_call", "id": "c9", "name": "lookup", "arguments": {"q": "x"}}],
                    "finish_reason": "tool_call",
                }
            ],
            "gen_ai.tool.definitions": [{"type": "function", "name": "lookup", "parameters": WEATHER_SCHEMA}],
        },
    )
    assert call.prompt == "Hi"
    assert call.output_tool_calls == (ToolCall("lookup", '{"q": "x"}', "c9"),)
    assert call.finish_reason == "tool_calls"
    assert call.tool_definitions[0].parameters == WEATHER_SCHEMA


def test_gen_ai_deprecated_span_events(capture: Capture) -> None:
    tool_calls = [{"id": "c1", "type": "function", "function": {"name": "search_docs", "arguments": '{"q": "tower"}'}}]
    call = llm_call(
        capture,
        "chat gpt-4o-mini",
        {
            "gen_ai.system": "openai",
            "gen_ai.request.model": "gpt-4o-mini",
            "gen_ai.response.finish_reasons": ["length"],
        },
        [
            ("gen_ai.system.message", {"content": "Use the documents."}),
            ("gen_ai.user.message", {"content": "When was the tower built?"}),
            ("gen_ai.assistant.message", {"tool_calls": json.dumps(tool_calls)}),
            ("gen_ai.tool.message", {"id": "c1", "content": "Built 1887-1889."}),
            ("gen_ai.choice", {"index": 0, "message": json.dumps({"content": "In 1950."})}),
            ("exception", {"exception.message": "ignored"}),
        ],
    )
    assert (call.provider, call.model, call.operation) == ("openai", "gpt-4o-mini", "")
    assert [(m.role, m.text) for m in call.input_messages] == [
        ("system", "Use the documents."),
        ("user", "When was the tower built?"),
        ("assistant", ""),
        ("tool", "Built 1887-1889."),
    ]
    assert call.input_messages[2].tool_calls == (ToolCall("search_docs", '{"q": "tower"}', "c1"),)
    assert call.sources == (Source("c1", "Built 1887-1889."),)
    assert call.answer == "In 1950."
    assert call.finish_reason == "length"  # from the span when the choice has none


def test_gen_ai_choice_event_with_own_finish_reason_and_order(capture: Capture) -> None:
    call = llm_call(
        capture,
        "chat",
        {"gen_ai.operation.name": "chat"},
        [
            ("gen_ai.choice", {"index": 1, "finish_reason": "length", "message": json.dumps({"content": "B"})}),
            ("gen_ai.choice", {"index": 0, "finish_reason": "stop", "message": json.dumps({"content": "A"})}),
        ],
    )
    assert [(m.text, m.finish_reason) for m in call.output_messages] == [("A", "stop"), ("B", "length")]


def test_gen_ai_operation_details_event(capture: Capture) -> None:
    call = llm_call(
        capture,
        "chat",
        {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"},
        [
            (
                "gen_ai.client.inference.operation.details",
                {
                    "gen_ai.input.messages": json.dumps(
                        [{"role": "user", "parts": [{"type": "text", "content": "Q"}]}]
                    ),
                    "gen_ai.output.messages": json.dumps(
                        [{"role": "assistant", "parts": [{"type": "text", "content": "A"}], "finish_reason": "stop"}]
                    ),
                },
            )
        ],
    )
    assert (call.prompt, call.answer, call.finish_reason, call.model) == ("Q", "A", "stop", "m")


def test_gen_ai_deprecated_prompt_and_completion_attributes(capture: Capture) -> None:
    call = llm_call(
        capture,
        "chat",
        {
            "gen_ai.system": "openai",
            "gen_ai.prompt": json.dumps([{"role": "system", "content": "Ctx"}, {"role": "user", "content": "Q?"}]),
            "gen_ai.completion": "Plain answer.",
        },
    )
    assert [m.role for m in call.input_messages] == ["system", "user"]
    assert call.prompt == "Q?"
    assert call.output_messages[0].role == "assistant"
    assert call.answer == "Plain answer."


@pytest.mark.parametrize(
    "attributes",
    [
        {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_weather"},
        {"gen_ai.operation.name": "embeddings", "gen_ai.request.model": "text-embedding-3-small"},
        {"openinference.span.kind": "RETRIEVER", "retrieval.documents.0.document.content": "doc"},
        {"traceloop.span.kind": "workflow", "traceloop.entity.name": "answer"},
        {"http.request.method": "GET", "url.full": "https://shop/api"},
    ],
    ids=["execute_tool", "embeddings", "openinference_retriever", "traceloop_workflow", "http"],
)
def test_not_llm_spans(capture: Capture, attributes: dict[str, Any]) -> None:
    assert normalize_span(emit(capture, "other", attributes)) is None


def test_non_llm_span_values_are_never_converted(capture: Capture, monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = emit(capture, "GET /api", {"http.request.method": "GET", "http.response.body": "x" * 10_000})

    def fail(values: Any) -> Any:
        raise AssertionError("converted a non-LLM span")

    monkeypatch.setattr(normalize, "attributes", fail)
    assert normalize_span(ctx) is None


def test_openllmetry_flat_layout(capture: Capture) -> None:
    call = llm_call(
        capture,
        "openai.chat",
        {
            "llm.request.type": "chat",
            "gen_ai.system": "OpenAI",
            "gen_ai.request.model": "gpt-4o",
            "gen_ai.prompt.0.role": "system",
            "gen_ai.prompt.0.content": "Context: built 1887-1889.",
            "gen_ai.prompt.1.role": "user",
            "gen_ai.prompt.1.content": json.dumps([{"type": "text", "text": "When?"}]),
            "gen_ai.prompt.2.role": "tool",
            "gen_ai.prompt.2.tool_call_id": "t0",
            "gen_ai.prompt.2.content": "tower facts",
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.finish_reason": "tool_call",
            "gen_ai.completion.0.tool_calls.0.id": "t1",
            "gen_ai.completion.0.tool_calls.0.name": "search_docs",
            "gen_ai.completion.0.tool_calls.0.arguments": '{"q": "tower"}',
            "gen_ai.completion.0.tool_calls.1.name": "get_time",
            "llm.request.functions.0.name": "search_docs",
            "llm.request.functions.0.description": "Search.",
            "llm.request.functions.0.parameters": json.dumps(WEATHER_SCHEMA),
            "gen_ai.usage.prompt_tokens": 30,
            "gen_ai.usage.completion_tokens": 4,
        },
    )
    assert (call.convention, call.operation, call.provider, call.model) == ("openllmetry", "chat", "OpenAI", "gpt-4o")
    assert [m.role for m in call.input_messages] == ["system", "user", "tool"]
    assert call.prompt == "When?"
    assert call.sources == (Source("t0", "tower facts"),)
    assert call.output_tool_calls == (ToolCall("search_docs", '{"q": "tower"}', "t1"), ToolCall("get_time"))
    assert call.finish_reason == "tool_calls"
    assert call.tool_definitions[0].description == "Search."
    assert call.tool_definitions[0].parameters == WEATHER_SCHEMA
    assert call.usage == Usage(30, 4)
    assert "gen_ai.prompt.0.content" not in call.attributes


def test_openinference_llm_span_with_documents(capture: Capture) -> None:
    tool = {"type": "function", "function": {"name": "search_docs", "parameters": WEATHER_SCHEMA}}
    call = llm_call(
        capture,
        "ChatCompletion",
        {
            "openinference.span.kind": "LLM",
            "llm.provider": "azure",
            "llm.system": "openai",
            "llm.invocation_parameters": json.dumps({"model": "gpt-4o", "temperature": 0}),
            "llm.input_messages.0.message.role": "user",
            "llm.input_messages.0.message.contents.0.message_content.type": "text",
            "llm.input_messages.0.message.contents.0.message_content.text": "Part one.",
            "llm.input_messages.0.message.contents.1.message_content.text": "Part two?",
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.content": "Answer [2].",
            "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "search_docs",
            "llm.finish_reason": "STOP",
            "llm.tools.0.tool.json_schema": json.dumps(tool),
            "retrieval.documents.0.document.id": "doc-a",
            "retrieval.documents.0.document.content": "First source.",
            "retrieval.documents.0.document.score": 0.91,
            "retrieval.documents.1.document.content": "Second source.",
            "llm.token_count.prompt": 11,
            "llm.token_count.completion": 3,
            "output.value": json.dumps({"choices": [{"logprobs": {"content": TOKENS}}]}),
        },
    )
    assert (call.convention, call.provider, call.model) == ("openinference", "azure", "gpt-4o")
    assert call.prompt == "Part one.\nPart two?"
    assert call.answer == "Answer [2]."
    assert call.output_tool_calls == (ToolCall("search_docs"),)
    assert call.finish_reason == "stop"
    assert call.sources == (Source("doc-a", "First source.", 0.91), Source("2", "Second source."))
    assert call.tool_definitions[0].name == "search_docs"
    assert call.logprobs == EXPECTED_TOKENS
    assert call.usage == Usage(11, 3)
    assert "output.value" not in call.attributes


def test_seed_convention(capture: Capture) -> None:
    call = llm_call(
        capture,
        "llm.answer",
        {
            "llm.operation": "answer_with_citations",
            "llm.model": "gpt-4o-mini",
            "llm.prompt": "When was it built?",
            "llm.response.content": "Built in 1889 [1].",
            "rag.sources_json": json.dumps({"1": "Built 1887-1889.", "2": "330 m tall.", "3": 7}),
            "llm.response.tokens_json": json.dumps(TOKENS),
        },
    )
    assert (call.convention, call.operation, call.model) == ("seed", "answer_with_citations", "gpt-4o-mini")
    assert call.prompt == "When was it built?"
    assert call.answer == "Built in 1889 [1]."
    assert call.sources == (Source("1", "Built 1887-1889."), Source("2", "330 m tall."))
    assert call.logprobs == EXPECTED_TOKENS


def test_seed_detector_result_span_is_not_an_llm_call(capture: Capture) -> None:
    assert normalize_span(emit(capture, "llm.detector.result", {"grounding.min_sim": 0.2})) is None


def test_halluwatch_logprobs_attribute(capture: Capture) -> None:
    call = llm_call(
        capture,
        "chat",
        {"gen_ai.operation.name": "chat", "halluwatch.response.logprobs": json.dumps(TOKENS)},
    )
    assert call.logprobs == EXPECTED_TOKENS


def test_ids_service_and_routing_attributes(capture: Capture) -> None:
    ctx = emit(
        capture,
        "chat",
        {
            "gen_ai.operation.name": "chat",
            "app.tenant": "acme",
            "app.long": "y" * 300,
            "app.user_prompt_hash": "short but content-named",
            "app.flags": ["a", "b"],
        },
        resource={"deployment.environment": "prod", "service.instance.id": "i-1"},
    )
    call = normalize_span(ctx)
    assert call is not None
    assert call.trace_id == ctx.span.trace_id.hex() and len(call.trace_id) == 32
    assert call.span_id == ctx.span.span_id.hex() and len(call.span_id) == 16
    assert call.parent_span_id == ctx.span.parent_span_id.hex() and call.parent_span_id
    sdk_default = ctx.resource["service.name"]  # the SDK's own default, named after the executable
    assert sdk_default.startswith("unknown_service:")
    assert call.service == sdk_default
    assert call.start_time_unix_nano <= call.end_time_unix_nano
    assert call.attributes == {
        "service.name": sdk_default,
        "deployment.environment": "prod",
        "gen_ai.operation.name": "chat",
        "app.tenant": "acme",
        "otel.scope.name": "test",  # the tracer's name: which instrumentation made the span
    }


def test_root_span_has_no_parent(capture: Capture) -> None:
    def run(tracer: Tracer) -> None:
        with tracer.start_as_current_span("chat", attributes={"gen_ai.operation.name": "chat"}):
            pass

    (ctx,) = capture(run)
    call = normalize_span(ctx)
    assert call is not None and call.parent_span_id is None and call.service == "shop"


def test_bad_attribute_types_are_skipped(capture: Capture) -> None:
    call = llm_call(
        capture,
        "chat",
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": 5,
            "gen_ai.provider.name": ["openai", 1],
            "gen_ai.input.messages": "not json {",
            "gen_ai.output.messages": json.dumps([1, "x", {"role": 3, "parts": "bad"}, {"parts": [{"type": "text"}]}]),
            "gen_ai.tool.definitions": json.dumps({"name": "not a list"}),
            "gen_ai.system_instructions": json.dumps({"deep": [[[[1]]]]}),
            "gen_ai.usage.input_tokens": "12",
            "gen_ai.usage.output_tokens": "many",
            "gen_ai.response.finish_reasons": [1, 2],
            "halluwatch.response.logprobs": json.dumps([{"token": 1}, {"token": "ok", "logprob": "x"}, "junk"]),
        },
    )
    assert (call.model, call.provider, call.input_messages, call.tool_definitions) == ("", "", (), ())
    assert [(m.role, m.text) for m in call.output_messages] == [("assistant", ""), ("assistant", "")]
    assert call.usage == Usage(12, None)
    assert call.logprobs == ()


def test_bad_types_in_flat_layouts(capture: Capture) -> None:
    call = llm_call(
        capture,
        "ChatCompletion",
        {
            "openinference.span.kind": "llm",
            "llm.input_messages.0.message.content": 7,
            "llm.input_messages.1.message.role": "user",
            "llm.input_messages.1.message.content": "ok",
            "llm.tools.0.tool.json_schema": "{broken",
            "retrieval.documents.0.document.score": "high",
            "llm.token_count.prompt": True,
            "output.value": '{"top_logprobs": oops',
        },
    )
    assert [(m.role, m.text) for m in call.input_messages] == [("user", "ok")]  # message 0 had nothing usable
    assert (call.tool_definitions, call.sources, call.logprobs, call.usage) == ((), (), (), Usage())


def test_resource_without_service_name() -> None:
    span = Span(name="chat", trace_id=b"\x01" * 16, span_id=b"\x02" * 8)
    span.attributes.add(key="gen_ai.operation.name").value.string_value = "chat"
    call = normalize_span(SpanContext(span, {"service.name": 3}, "scope"))
    assert call is not None and call.service == "unknown_service" and call.parent_span_id is None


def test_span_without_valid_ids_is_malformed() -> None:
    span = Span(name="chat", trace_id=b"\x01", span_id=b"\x02" * 8)
    span.attributes.add(key="gen_ai.operation.name").value.string_value = "chat"
    with pytest.raises(MalformedLLMSpan, match="invalid ids"):
        normalize_span(SpanContext(span, {}, "scope"))


def test_unexpected_converter_failure_is_malformed(capture: Capture, monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = emit(capture, "chat", {"gen_ai.operation.name": "chat"})

    def broken(draft: Any) -> Any:
        raise RuntimeError("bug")

    monkeypatch.setattr(normalize, "build", broken)
    with pytest.raises(MalformedLLMSpan, match="bug") as raised:
        normalize_span(ctx)
    assert isinstance(raised.value, ValueError) and "gen_ai" in raised.value.reason


def test_anthropic_content_blocks_are_tool_calls_and_results(capture: Capture) -> None:
    """Anthropic's request format copied into ``gen_ai.input.messages`` (``tool_use``/``tool_result`` blocks)."""
    blocks = [
        {"role": "user", "content": "Book a table for two at 19:30."},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "book_table", "input": {"people": 2}}],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "no seats left", "is_error": True},
                {"type": "tool_result", "tool_use_id": "t2", "content": [{"type": "text", "text": "menu: soup"}]},
            ],
        },
    ]

    def run(tracer: Tracer) -> None:
        attributes = {"gen_ai.operation.name": "chat", "gen_ai.input.messages": json.dumps(blocks)}
        tracer.start_span("chat", attributes=attributes).end()

    (ctx,) = capture(run)
    call = normalize_span(ctx)
    assert call is not None
    assert [m.role for m in call.input_messages] == ["user", "assistant", "tool", "tool"]
    assert call.input_messages[1].tool_calls == (ToolCall("book_table", '{"people": 2}', "t1"),)
    assert [(m.tool_call_id, m.text) for m in call.input_messages[2:]] == [
        ("t1", "Error: no seats left"),
        ("t2", "menu: soup"),
    ]


def test_vercel_ai_sdk_provider_calls_are_read_and_its_wrapper_span_is_not(capture: Capture) -> None:
    """AI SDK 4's layout (``args``, ``result``/``isError``, ``parameters``) on a ``streamText`` call."""
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "Book a table."}]},
        {
            "role": "assistant",
            "content": [{"type": "tool-call", "toolCallId": "c1", "toolName": "book", "args": {"n": 2}}],
        },
        {
            "role": "tool",
            "content": [
                {"type": "tool-result", "toolCallId": "c1", "toolName": "book", "result": "full", "isError": True}
            ],
        },
    ]
    tool = {"type": "function", "name": "book", "parameters": {"type": "object"}}

    def run(tracer: Tracer) -> None:
        with tracer.start_as_current_span("ai.streamText", attributes={"ai.operationId": "ai.streamText"}) as outer:
            outer.set_attribute("ai.response.text", "Sorry, it is full.")  # the wrapper repeats the answer
            inner = {
                "ai.operationId": "ai.streamText.doStream",
                "gen_ai.system": "anthropic.messages",
                "gen_ai.request.model": "claude-sonnet-4-5",
                "ai.prompt.messages": json.dumps(messages),
                "ai.prompt.tools": [json.dumps(tool)],
                "ai.response.text": "Sorry, it is full.",
                "ai.response.finishReason": "stop",
                "ai.usage.promptTokens": 12,
                "ai.usage.completionTokens": 5,
            }
            tracer.start_span("ai.streamText.doStream", attributes=inner).end()

    calls = [call for ctx in capture(run) if (call := normalize_span(ctx)) is not None]
    (call,) = calls
    assert (call.convention, call.operation, call.provider, call.model) == (
        "vercel_ai",
        "chat",
        "anthropic",
        "claude-sonnet-4-5",
    )
    assert [m.role for m in call.input_messages] == ["user", "assistant", "tool"]
    assert call.input_messages[1].tool_calls == (ToolCall("book", '{"n": 2}', "c1"),)
    assert (call.input_messages[2].tool_call_id, call.input_messages[2].text) == ("c1", "Error: full")
    assert [(t.name, t.parameters) for t in call.tool_definitions] == [("book", {"type": "object"})]
    assert (call.answer, call.finish_reason, call.usage) == ("Sorry, it is full.", "stop", Usage(12, 5))


def test_openllmetry_flat_anthropic_content_lists_hold_tool_calls_and_results(capture: Capture) -> None:
    """OpenLLMetry <= 0.52 around the anthropic client: each message's content list as JSON."""
    tool_use = [{"type": "tool_use", "id": "t1", "name": "book_table", "input": {"people": 2}}]
    tool_result = [{"type": "tool_result", "tool_use_id": "t1", "content": '{"error": "no seats left"}'}]

    def run(tracer: Tracer) -> None:
        attributes = {
            "llm.request.type": "chat",
            "gen_ai.system": "Anthropic",
            "gen_ai.prompt.0.role": "user",
            "gen_ai.prompt.0.content": "Book a table for two.",
            "gen_ai.prompt.1.role": "assistant",
            "gen_ai.prompt.1.content": json.dumps(tool_use),
            "gen_ai.prompt.2.role": "user",
            "gen_ai.prompt.2.content": json.dumps(tool_result),
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.content": "Your table is booked.",
        }
        tracer.start_span("anthropic.chat", attributes=attributes).end()

    (ctx,) = capture(run)
    call = normalize_span(ctx)
    assert call is not None and call.convention == "openllmetry"
    assert [m.role for m in call.input_messages] == ["user", "assistant", "tool"]
    assert call.input_messages[1].tool_calls == (ToolCall("book_table", '{"people": 2}', "t1"),)
    assert (call.input_messages[2].tool_call_id, call.input_messages[2].text) == ("t1", '{"error": "no seats left"}')
    assert call.prompt == "Book a table for two." and call.answer == "Your table is booked."
