"""Trace-level facts: retriever documents and tool runs from sibling spans, made by the real OTel SDK."""

from __future__ import annotations

import json
from collections.abc import Callable

from opentelemetry.trace import Status, StatusCode, Tracer

from detectors.llm_call import LLMCall
from detectors.suite import DetectorSuite
from pipeline.ingest.normalize import normalize_span
from pipeline.ingest.otlp_traces import SpanContext
from pipeline.ingest.trace_facts import (
    MAX_DOCUMENT_CHARS,
    MAX_DOCUMENTS,
    Retrieval,
    ToolExecution,
    attach_trace_facts,
    span_fact,
)
from pipeline.spans.processor import InboundMessage, SpanBatchProcessor
from pipeline.tools.example_traces import EXAMPLES, example_traces
from tests.unit.conftest import Capture

MS = 1_000_000
DOCUMENTS = [{"id": "menu-1", "content": "Casa Lisboa opens at 18:00.", "score": 0.8}]


def llm_span(tracer: Tracer, start: int, **attributes: object) -> None:
    span = tracer.start_span(
        "chat gpt-4o-mini",
        start_time=start,
        attributes={
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "gpt-4o-mini",
            "gen_ai.input.messages": json.dumps([{"role": "user", "parts": [{"type": "text", "content": "When?"}]}]),
            "gen_ai.output.messages": json.dumps(
                [{"role": "assistant", "parts": [{"type": "text", "content": "At 18:00."}], "finish_reason": "stop"}]
            ),
            **attributes,
        },
    )
    span.end(end_time=start + 300 * MS)


def retriever(tracer: Tracer, start: int, documents: list[dict[str, object]], name: str = "retrieval kb") -> None:
    attributes = {"gen_ai.operation.name": "retrieval", "gen_ai.retrieval.documents": json.dumps(documents)}
    tracer.start_span(name, start_time=start, attributes=attributes).end(end_time=start + 30 * MS)


def facts_and_calls(spans: list[SpanContext]) -> tuple[list[LLMCall], list[Retrieval | ToolExecution]]:
    calls = [call for ctx in spans if (call := normalize_span(ctx)) is not None]
    return calls, [fact for ctx in spans if (fact := span_fact(ctx)) is not None]


def under_root(emit: Callable[[Tracer], None]) -> Callable[[Tracer], None]:
    """Run ``emit`` inside a request's root span, so its spans are siblings."""

    def run(tracer: Tracer) -> None:
        with tracer.start_as_current_span("POST /v1/ask", start_time=0):
            emit(tracer)

    return run


def test_a_call_without_sources_gets_the_documents_of_the_retriever_before_it(capture: Capture) -> None:
    def emit(tracer: Tracer) -> None:
        retriever(tracer, 10 * MS, DOCUMENTS)
        llm_span(tracer, 50 * MS)
        retriever(tracer, 400 * MS, [{"id": "late", "content": "After the call."}])  # after: not its evidence

    calls, facts = facts_and_calls(capture(under_root(emit)))
    (call,) = attach_trace_facts(calls, facts)
    assert [(s.id, s.text, s.score) for s in call.sources] == [
        ("menu-1", "Casa Lisboa opens at 18:00.", 0.8),
        ("prompt", "When?", None),  # what the model was given stays evidence beside the documents
    ]
    (early,) = [f for f in facts if isinstance(f, Retrieval) and f.documents[0].id == "menu-1"]
    assert call.retriever_span_ids == (early.span_id,)
    assert call.sources_from == "trace"
    assert call.grounding_text == "Casa Lisboa opens at 18:00.\n\nWhen?"


def test_siblings_of_the_call_win_over_retrievals_elsewhere_in_the_trace(capture: Capture) -> None:
    def emit(tracer: Tracer) -> None:
        with tracer.start_as_current_span("other chain", start_time=1 * MS):
            retriever(tracer, 2 * MS, [{"id": "elsewhere", "content": "Unrelated."}])
        with tracer.start_as_current_span("answer chain", start_time=5 * MS):
            retriever(tracer, 10 * MS, DOCUMENTS)
            llm_span(tracer, 50 * MS)

    (call,) = attach_trace_facts(*facts_and_calls(capture(under_root(emit))))
    assert [s.id for s in call.sources] == ["menu-1", "prompt"]


def test_a_span_with_its_own_sources_keeps_them(capture: Capture) -> None:
    def emit(tracer: Tracer) -> None:
        retriever(tracer, 10 * MS, DOCUMENTS)
        tracer.start_span(
            "ChatCompletion",
            start_time=50 * MS,
            attributes={
                "openinference.span.kind": "LLM",
                "llm.input_messages.0.message.role": "user",
                "llm.input_messages.0.message.content": "When?",
                "llm.output_messages.0.message.role": "assistant",
                "llm.output_messages.0.message.content": "At 18:00.",
                "retrieval.documents.0.document.id": "own",
                "retrieval.documents.0.document.content": "Opens at 18:00.",
            },
        ).end(end_time=90 * MS)

    (call,) = attach_trace_facts(*facts_and_calls(capture(under_root(emit))))
    assert [s.id for s in call.sources] == ["own"] and call.sources_from == "span"


def test_documents_are_capped_in_number_and_length(capture: Capture) -> None:
    long = [{"id": f"d{i}", "content": "x" * (MAX_DOCUMENT_CHARS + 10)} for i in range(MAX_DOCUMENTS + 3)]
    (fact,) = [
        f for ctx in capture(under_root(lambda tracer: retriever(tracer, 10 * MS, long))) if (f := span_fact(ctx))
    ]
    assert isinstance(fact, Retrieval) and len(fact.documents) == MAX_DOCUMENTS
    assert {len(document.text) for document in fact.documents} == {MAX_DOCUMENT_CHARS}


def test_openinference_retriever_documents_and_the_document_cap(capture: Capture) -> None:
    def emit(tracer: Tracer) -> None:
        attributes: dict[str, object] = {"openinference.span.kind": "RETRIEVER", "input.value": "opening hours"}
        for i in range(MAX_DOCUMENTS + 5):
            attributes |= {
                f"retrieval.documents.{i}.document.id": f"d{i}",
                f"retrieval.documents.{i}.document.content": f"Doc {i}.",
            }
        tracer.start_span("retrieve", start_time=10 * MS, attributes=attributes).end(end_time=20 * MS)
        llm_span(tracer, 50 * MS)

    (call,) = attach_trace_facts(*facts_and_calls(capture(under_root(emit))))
    assert [s.id for s in call.sources] == [*(f"d{i}" for i in range(MAX_DOCUMENTS)), "prompt"]


def test_tool_execution_spans_become_summaries_with_their_error(capture: Capture) -> None:
    def emit(tracer: Tracer) -> None:
        failing = tracer.start_span(
            "execute_tool book_table",
            start_time=10 * MS,
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "book_table",
                "gen_ai.tool.call.id": "call_1",
                "gen_ai.tool.call.result": "secret result text",
            },
        )
        failing.record_exception(TimeoutError("reservation service timed out"))
        failing.set_status(Status(StatusCode.ERROR))
        failing.end(end_time=20 * MS)
        tool = {"openinference.span.kind": "TOOL", "tool.name": "lookup_menu", "output.value": "{}"}
        tracer.start_span("lookup_menu", start_time=21 * MS, attributes=tool).end(end_time=25 * MS)
        llm_span(tracer, 50 * MS)

    (call,) = attach_trace_facts(*facts_and_calls(capture(under_root(emit))))
    failed, ok = call.tool_spans
    assert (failed.name, failed.call_id, failed.failed, failed.error) == (
        "book_table",
        "call_1",
        True,
        "reservation service timed out",
    )
    assert (ok.name, ok.failed, ok.error) == ("lookup_menu", False, "")
    assert "secret result text" not in repr(call.tool_spans)  # summaries, never the result
    assert LLMCall.from_dict(json.loads(json.dumps(call.to_dict()))) == call  # survives the join table


def test_the_processor_attaches_facts_from_the_same_message() -> None:
    names = [example.name for example in EXAMPLES]
    traces = example_traces()
    picked = {
        name: traces[names.index(name)] for name in ("genai_rag_invented_facts", "genai_agent_claims_failed_booking")
    }
    processor = SpanBatchProcessor(DetectorSuite([]), "v-test")
    messages = [
        InboundMessage(
            trace.resource_spans[0].scope_spans[0].spans[0].trace_id.hex().encode(), trace.SerializeToString()
        )
        for trace in picked.values()
    ]
    rag, agent = processor.normalize(messages).llm_calls
    assert rag.sources_from == "trace" and [s.id for s in rag.sources] == ["eiffel-1", "eiffel-2", "prompt"]
    (booking,) = agent.tool_spans
    assert booking.name == "book_table" and booking.failed
    assert "No table free" in booking.error


def test_a_tool_that_returned_an_error_fails_its_span_whatever_its_status(capture: Capture) -> None:
    def emit(tracer: Tracer) -> None:
        results = {
            "book_table": '{"error": "no seats left at 19:30"}',  # GenAI, JSON
            "lookup_menu": "{'error': 'menu service down'}",  # a Python literal (LlamaIndex's repr)
            "check_hours": '{"blocks": [], "raw_output": {"opens": "18:00"}, "is_error": false}',  # LlamaIndex, fine
        }
        for offset, (name, result) in enumerate(results.items()):
            attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name}
            attributes["gen_ai.tool.call.result"] = result
            tracer.start_span(name, start_time=(10 + offset) * MS, attributes=attributes).end(
                end_time=(11 + offset) * MS
            )
        llm_span(tracer, 50 * MS)

    (call,) = attach_trace_facts(*facts_and_calls(capture(under_root(emit))))
    assert [(tool.name, tool.failed, tool.error) for tool in call.tool_spans] == [
        ("book_table", True, "error: no seats left at 19:30"),
        ("lookup_menu", True, "error: menu service down"),
        ("check_hours", False, ""),
    ]


def test_tools_run_inside_a_call_count_and_their_results_are_its_sources(capture: Capture) -> None:
    """Google GenAI's automatic function calling: the tool loop runs inside one model call's span."""

    def emit(tracer: Tracer) -> None:
        with tracer.start_as_current_span("generate_content", start_time=0, end_on_exit=False) as call_span:
            call_span.set_attributes(
                {
                    "gen_ai.operation.name": "generate_content",
                    "gen_ai.input.messages": json.dumps(
                        [{"role": "user", "parts": [{"type": "text", "content": "Book"}]}]
                    ),
                    "gen_ai.output.messages": json.dumps(
                        [{"role": "assistant", "parts": [{"type": "text", "content": "Booked."}]}]
                    ),
                }
            )
            attributes = {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "book_table",
                "gen_ai.tool.call.result": '{"error": "no seats left"}',
            }
            tracer.start_span("execute_tool", start_time=10 * MS, attributes=attributes).end(end_time=20 * MS)
        call_span.end(end_time=100 * MS)
        # A tool that ran after the call is none of its business.
        later = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "send_email"}
        tracer.start_span("execute_tool", start_time=200 * MS, attributes=later).end(end_time=210 * MS)

    (call,) = attach_trace_facts(*facts_and_calls(capture(emit)))
    (tool,) = call.tool_spans
    assert tool.name == "book_table" and tool.failed
    assert [source.text for source in call.sources] == ['{"error": "no seats left"}']  # no prompt beside it
    assert call.sources_from == "trace" and call.retriever_span_ids == (tool.span_id,)
