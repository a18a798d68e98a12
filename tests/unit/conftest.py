"""Spans made by the real OpenTelemetry SDK, through the real OTLP protobuf encoder."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Tracer

from pipeline.ingest.otlp_traces import Encoding, SpanContext, decode_traces, iter_spans

Capture = Callable[..., list[SpanContext]]


def decode(payload: bytes) -> list[SpanContext]:
    """Decode collector bytes the way the worker does."""
    return list(iter_spans(decode_traces(payload, Encoding.OTLP_PROTO)))


@pytest.fixture
def capture() -> Capture:
    """Run ``emit(tracer)`` under a fresh provider; return its spans as the worker sees them."""

    def run(emit: Callable[[Tracer], None], resource: dict[str, str] | None = None) -> list[SpanContext]:
        exporter = InMemorySpanExporter()
        provider = TracerProvider(resource=Resource.create(resource or {"service.name": "shop"}))
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        emit(provider.get_tracer("test"))
        provider.shutdown()
        return decode(encode_spans(exporter.get_finished_spans()).SerializeToString())

    return run
