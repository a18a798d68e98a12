"""An application under the official OpenTelemetry openai instrumentation, exporting to a collector over OTLP/gRPC.

Usage: ``python -m tests.stack.instrumented_app COLLECTOR_GRPC LLM_BASE_URL CALLS SENT_FILE``. It
makes ``CALLS`` pairs of chat calls with the real ``openai`` client against ``LLM_BASE_URL``
(the tool-result conversation, then a call answered with a tool call), content captured as
log records (``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``, set by the caller), and
writes the spans it exported to ``SENT_FILE`` (an ``ExportTraceServiceRequest``). A process of
its own: the instrumentor patches the client for good.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tests.instrumented.run_instrumented import CONVERSATION, QUESTION, WEATHER_TOOL


def main(collector: str, llm_base_url: str, calls: int, sent: Path) -> None:
    import openai
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    resource = Resource.create({"service.name": "app-openai-v2"})
    kept = InMemorySpanExporter()
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=collector, insecure=True)))
    tracer_provider.add_span_processor(SimpleSpanProcessor(kept))
    logger_provider = LoggerProvider(resource=resource)
    log_exporter = OTLPLogExporter(endpoint=collector, insecure=True)
    logger_provider.add_log_record_processor(BatchLogRecordProcessor(log_exporter))
    OpenAIInstrumentor().instrument(tracer_provider=tracer_provider, logger_provider=logger_provider)
    client = openai.OpenAI(base_url=llm_base_url, api_key="test-key", max_retries=0)
    tracer = tracer_provider.get_tracer("app")
    for _ in range(calls):
        with tracer.start_as_current_span("POST /chat", kind=trace.SpanKind.SERVER):  # the app's own, not an LLM span
            client.chat.completions.create(model="gpt-4o-mini", messages=CONVERSATION, temperature=0.2)
            client.chat.completions.create(model="gpt-4o-mini", messages=QUESTION, tools=[WEATHER_TOOL])
    tracer_provider.shutdown()
    logger_provider.shutdown()
    sent.write_bytes(encode_spans(kept.get_finished_spans()).SerializeToString())


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), Path(sys.argv[4]))
