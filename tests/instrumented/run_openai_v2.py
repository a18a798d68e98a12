"""Run the real ``openai`` client under ``opentelemetry-instrumentation-openai-v2``; write spans and logs.

Usage: ``python -m tests.instrumented.run_openai_v2 OUTPUT_DIR``, with the instrumentation's
own environment variables choosing its mode (the caller sets them, in a process of its own,
since the instrumentor patches the client for good): content capture ``true`` logs the
deprecated per-message events; ``OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental``
with ``event_only`` logs one ``gen_ai.client.inference.operation.details`` record per call.
``OUTPUT_DIR`` gets ``spans.bin`` (``ExportTraceServiceRequest``) and ``logs.bin``
(``ExportLogsServiceRequest``), what the collector writes to ``otlp_spans``/``otlp_logs``.
The calls are those of :mod:`tests.instrumented.run_instrumented`: a tool-result
conversation, then a call answered with a tool call.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tests.instrumented import fake_openai
from tests.instrumented.run_instrumented import CONVERSATION, QUESTION, WEATHER_TOOL
from tests.servers import Reply, Request, ScriptedServer


class ChatCompletionsServer(ScriptedServer):
    """An OpenAI-compatible chat-completions endpoint answering as :func:`fake_openai.completion`."""

    def __init__(self) -> None:
        super().__init__(lambda request: Reply(200, body=fake_openai.completion(_body(request))))

    def __enter__(self) -> ChatCompletionsServer:
        super().__enter__()
        return self


def _body(request: Request) -> dict[str, object]:
    return request.body if isinstance(request.body, dict) else {}


def main(output: Path) -> None:
    """Instrument, make the two calls against the local server, write the encoded spans and logs."""
    from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    resource = Resource.create({"service.name": "app-openai-v2"})
    span_exporter, log_exporter = InMemorySpanExporter(), InMemoryLogRecordExporter()
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(SimpleSpanProcessor(span_exporter))
    logger_provider = LoggerProvider(resource=resource)
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(log_exporter))
    OpenAIInstrumentor().instrument(tracer_provider=tracer_provider, logger_provider=logger_provider)

    import openai

    with ChatCompletionsServer() as server:
        client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="test-key", max_retries=0)
        client.chat.completions.create(model="gpt-4o-mini", messages=CONVERSATION, temperature=0.2)
        client.chat.completions.create(model="gpt-4o-mini", messages=QUESTION, tools=[WEATHER_TOOL])
    output.mkdir(parents=True, exist_ok=True)
    (output / "spans.bin").write_bytes(encode_spans(span_exporter.get_finished_spans()).SerializeToString())
    (output / "logs.bin").write_bytes(encode_logs(log_exporter.get_finished_logs()).SerializeToString())


if __name__ == "__main__":
    main(Path(sys.argv[1]))
