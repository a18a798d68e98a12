"""An agent turn made with LangChain under OpenInference's LangChain instrumentation; writes OTLP bytes.

Usage: ``python -m tests.instrumented.run_langchain OUTPUT_PATH``.  A LangChain chat model
offered a ``book_table`` tool (the real ``langchain-openai`` client against the local fake
OpenAI server) asks for it; the tool runs and returns the booking API's error; the model is
asked again with the whole turn and claims the table is booked.  The instrumentation records
both LLM calls and the tool run as spans of one trace; the output file holds them as one
serialized ``ExportTraceServiceRequest``.  Own process: the instrumentor patches LangChain
for good.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tests.instrumented import fake_openai

BOOKING_ERROR = '{"error": {"code": "no_availability", "message": "No table free at 19:30"}}'


def main(output: Path) -> None:
    """Run the turn against the fake server and write the encoded spans."""
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "langchain-concierge"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    from openinference.instrumentation.langchain import LangChainInstrumentor

    LangChainInstrumentor().instrument()

    from langchain_core.messages import BaseMessage, HumanMessage
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI

    @tool
    def book_table(people: int, time: str) -> str:
        """Reserve a table at the restaurant."""
        return BOOKING_ERROR  # the booking API's answer, passed on as the tool result

    server = fake_openai.start()
    host, port = server.server_address[:2]
    model = ChatOpenAI(model="gpt-4o-mini", base_url=f"http://{host!s}:{port}/v1", api_key="test-key", max_retries=0)
    tracer = trace.get_tracer("concierge")
    with tracer.start_as_current_span("POST /concierge"):  # the app's request: one trace for the turn
        messages: list[BaseMessage] = [HumanMessage("Book a table for two at 19:30 tonight.")]
        asked = model.bind_tools([book_table]).invoke(messages)
        messages.append(asked)
        messages += [book_table.invoke(call) for call in asked.tool_calls]
        model.invoke(messages)
    server.shutdown()
    provider.force_flush()
    output.write_bytes(encode_spans(exporter.get_finished_spans()).SerializeToString())


if __name__ == "__main__":
    main(Path(sys.argv[1]))
