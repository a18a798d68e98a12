"""Run the real ``openai`` client under one real instrumentation library; write OTLP bytes.

Usage: ``python -m tests.instrumented.run_instrumented LIBRARY OUTPUT_PATH`` with LIBRARY
``openinference`` or ``openllmetry``.  Each library runs in its own process because
instrumentors patch the same client methods and cannot be cleanly uninstalled.  The
output file holds one serialized ``ExportTraceServiceRequest`` (what the collector writes
to Kafka).  Four calls are made, in this order: a tool-result conversation, a call
offering a tool (answered with a tool call), a call asking for logprobs, and an agent turn
whose booking tool failed (answered with a claim that it succeeded).

``opentelemetry-instrumentation-openai-v2`` 2.4b0 is left out: it does not import against
the installed ``opentelemetry-util-genai`` 1.3b0 (nor without ``httpx``, which openai 3.x
replaced with ``httpx2``).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from tests.instrumented import fake_openai

# Typed Any: the openai client wants its TypedDict params; these are plain JSON.
WEATHER_TOOL: Any = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius"]}},
            "required": ["city"],
        },
    },
}
TOOL_RESULT = "Paris: 18 degrees, light rain."
CONVERSATION: Any = [
    {"role": "system", "content": "Answer from the tool results only."},
    {"role": "user", "content": "What is the weather in Paris?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_prev1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_prev1", "content": TOOL_RESULT},
]
FAILED_BOOKING = '{"error": {"code": "no_availability", "message": "No table free at 19:30"}}'
BOOKING: Any = [
    {"role": "user", "content": "Book a table for two at 19:30 tonight."},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_book1",
                "type": "function",
                "function": {"name": "book_table", "arguments": '{"people": 2, "time": "19:30"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_book1", "content": FAILED_BOOKING},
]
QUESTION: Any = [{"role": "user", "content": "When was the Eiffel Tower built?"}]


def _instrument(library: str) -> None:
    if library == "openinference":
        from openinference.instrumentation.openai import OpenAIInstrumentor as Instrumentor
    elif library == "openllmetry":
        from opentelemetry.instrumentation.openai import OpenAIInstrumentor as Instrumentor
    else:
        raise SystemExit(f"unknown library {library!r}")
    Instrumentor().instrument()


def main(library: str, output: Path) -> None:
    """Instrument, make the four calls against the fake server, write the encoded spans."""
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": f"app-{library}"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    _instrument(library)

    import openai

    server = fake_openai.start()
    host, port = server.server_address[:2]
    client = openai.OpenAI(base_url=f"http://{host!s}:{port}/v1", api_key="test-key", max_retries=0)
    client.chat.completions.create(model="gpt-4o-mini", messages=CONVERSATION, temperature=0.2)
    client.chat.completions.create(model="gpt-4o-mini", messages=QUESTION, tools=[WEATHER_TOOL])
    client.chat.completions.create(model="gpt-4o-mini", messages=QUESTION, logprobs=True, top_logprobs=2)
    client.chat.completions.create(model="gpt-4o-mini", messages=BOOKING)
    server.shutdown()
    provider.force_flush()
    output.write_bytes(encode_spans(exporter.get_finished_spans()).SerializeToString())


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))
