"""Recording with the real OpenTelemetry SDK and encoding with its OTLP encoders.

What comes out is exactly what a collector would put on Kafka, so the demo, the tests and
the benchmarks parse the same bytes production does.
"""

from __future__ import annotations

from collections.abc import Callable

from opentelemetry import trace
from opentelemetry._logs import Logger
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.logs.v1.logs_pb2 import LogsData
from opentelemetry.proto.trace.v1.trace_pb2 import TracesData
from opentelemetry.sdk._logs import LoggerProvider, LogRecordProcessor
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode

from pipeline.tools.example_traces.writers import SpanSpec

MS = 1_000_000  # nanoseconds per millisecond


class Recorder:
    """Records traces and logs with private SDK pipelines (the global providers are never set).

    ``forward`` makes a span and a log processor per service that also get everything, as an
    application's SDK would export it (to a collector over OTLP, say); :meth:`flush` flushes them.
    """

    def __init__(self, forward: Callable[[], tuple[SpanProcessor, LogRecordProcessor]] | None = None) -> None:
        self._exporter = InMemorySpanExporter()
        self._log_exporter = InMemoryLogRecordExporter()  # type: ignore[no-untyped-call]
        self._forward = forward
        self._providers: dict[str, tuple[TracerProvider, LoggerProvider]] = {}

    def _providers_of(self, service: str) -> tuple[TracerProvider, LoggerProvider]:
        if service not in self._providers:
            resource = Resource.create(
                {"service.name": service, "service.version": "1.4.2", "deployment.environment.name": "demo"}
            )
            tracer_provider = TracerProvider(resource=resource, shutdown_on_exit=False)
            tracer_provider.add_span_processor(SimpleSpanProcessor(self._exporter))
            logger_provider = LoggerProvider(resource=resource, shutdown_on_exit=False)
            logger_provider.add_log_record_processor(SimpleLogRecordProcessor(self._log_exporter))
            if self._forward is not None:
                span_processor, log_processor = self._forward()
                tracer_provider.add_span_processor(span_processor)
                logger_provider.add_log_record_processor(log_processor)
            self._providers[service] = (tracer_provider, logger_provider)
        return self._providers[service]

    def flush(self) -> None:
        """Export what the forwarding processors hold, and shut them down."""
        for tracer_provider, logger_provider in self._providers.values():
            tracer_provider.shutdown()
            logger_provider.shutdown()

    def tracer(self, service: str, scope: str) -> trace.Tracer:
        """Return a tracer of ``scope`` whose spans carry ``service`` as their resource."""
        return self._providers_of(service)[0].get_tracer(scope)

    def logger(self, service: str, scope: str) -> Logger:
        """Return a logger of ``scope`` whose records carry ``service`` as their resource."""
        return self._providers_of(service)[1].get_logger(scope)

    def collect_logs(self) -> LogsData:
        """Every log record since the last call, as one OTLP ``LogsData``."""
        request = encode_logs(self._log_exporter.get_finished_logs())
        self._log_exporter.clear()
        # ExportLogsServiceRequest and LogsData are wire-identical (field 1, ResourceLogs).
        logs = LogsData()
        logs.ParseFromString(request.SerializeToString())
        return logs

    def collect(self) -> TracesData:
        """Everything recorded since the last call, as one OTLP ``TracesData``."""
        request = encode_spans(self._exporter.get_finished_spans())
        self._exporter.clear()
        # ExportTraceServiceRequest and TracesData are wire-identical (field 1, ResourceSpans).
        traces = TracesData()
        traces.ParseFromString(request.SerializeToString())
        return traces


def record_span(
    tracer: trace.Tracer, spec: SpanSpec, parent: trace.Span | None, start_ns: int, duration_ns: int
) -> trace.Span:
    """Record the finished span ``spec`` under ``parent`` (a root when ``None``)."""
    context = trace.set_span_in_context(parent) if parent is not None else None
    span = tracer.start_span(
        spec.name, context=context, kind=spec.kind, attributes=spec.attributes, start_time=start_ns
    )
    if spec.error is not None:
        span.set_status(Status(StatusCode.ERROR, spec.error))
    span.end(end_time=start_ns + duration_ns)
    return span
