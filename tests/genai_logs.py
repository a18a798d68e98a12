"""LLM spans and their GenAI log records, made by the real OpenTelemetry SDK.

A tracer provider and a logger provider export to memory; :meth:`Telemetry.payloads`
encodes both with the real OTLP protobuf encoder, which is what the collector's kafka
exporter puts on ``otlp_spans`` and ``otlp_logs``.  The event helpers emit the record
shapes of ``opentelemetry-instrumentation-openai-v2`` (checked against the real
instrumentation in ``tests/unit/test_log_join_instrumented.py``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Span, SpanKind

DETAILS = "gen_ai.client.inference.operation.details"
MODEL = "gpt-4o-mini"
SYSTEM = "Answer from the context only. Context: the Eiffel Tower was completed in 1889."
QUESTION = "When was the Eiffel Tower completed?"
ANSWER = "It was completed in 1889."


class Telemetry:
    """A tracer and a logger of one service, both recording to memory."""

    def __init__(self, service: str = "chat-app") -> None:
        resource = Resource.create({"service.name": service})
        self._spans = InMemorySpanExporter()
        self._logs = InMemoryLogRecordExporter()
        self._tracer_provider = TracerProvider(resource=resource)
        self._tracer_provider.add_span_processor(SimpleSpanProcessor(self._spans))
        self._logger_provider = LoggerProvider(resource=resource)
        self._logger_provider.add_log_record_processor(SimpleLogRecordProcessor(self._logs))
        self.tracer = self._tracer_provider.get_tracer("opentelemetry.instrumentation.openai_v2")
        self.logger = self._logger_provider.get_logger("opentelemetry.instrumentation.openai_v2")

    @contextmanager
    def chat_span(self, **attributes: Any) -> Iterator[Span]:
        """A content-free ``chat`` span as openai-v2 records it; records logged inside join it."""
        with self.tracer.start_as_current_span(f"chat {MODEL}", kind=SpanKind.CLIENT) as span:
            span.set_attributes(
                {
                    "gen_ai.operation.name": "chat",
                    "gen_ai.system": "openai",
                    "gen_ai.request.model": MODEL,
                    "gen_ai.response.model": MODEL,
                    "gen_ai.response.finish_reasons": ["stop"],
                    **attributes,
                }
            )
            yield span

    def event(self, name: str, body: Any = None, **attributes: Any) -> None:
        """Emit one event log record in the current span's context."""
        self.logger.emit(event_name=name, body=body, attributes={"gen_ai.system": "openai", **attributes})

    def payloads(self) -> tuple[bytes, bytes]:
        """(``ExportTraceServiceRequest``, ``ExportLogsServiceRequest``) bytes of everything recorded."""
        spans = encode_spans(self._spans.get_finished_spans()).SerializeToString()
        logs = encode_logs(self._logs.get_finished_logs()).SerializeToString()
        return spans, logs


def deprecated_events(telemetry: Telemetry, answer: str = ANSWER) -> None:
    """The per-message events of openai-v2's default mode: system, user, one choice."""
    telemetry.event("gen_ai.system.message", {"content": SYSTEM})
    telemetry.event("gen_ai.user.message", {"content": QUESTION})
    telemetry.event(
        "gen_ai.choice", {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": answer}}
    )


def details_event(telemetry: Telemetry, as_json: bool = False, answer: str = ANSWER) -> None:
    """One ``gen_ai.client.inference.operation.details`` record (structured, or JSON strings)."""
    inputs: Sequence[Any] = [{"role": "user", "parts": [{"type": "text", "content": QUESTION}]}]
    outputs: Sequence[Any] = [
        {"role": "assistant", "parts": [{"type": "text", "content": answer}], "finish_reason": "stop"}
    ]
    instructions: Sequence[Any] = [{"type": "text", "content": SYSTEM}]
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.input.messages": inputs,
        "gen_ai.output.messages": outputs,
        "gen_ai.system_instructions": instructions,
    }
    if as_json:
        attributes = {key: value if isinstance(value, str) else json.dumps(value) for key, value in attributes.items()}
    telemetry.logger.emit(event_name=DETAILS, attributes=attributes)
