"""Applications' telemetry through the real OpenTelemetry SDK, exported over OTLP/gRPC or OTLP/HTTP.

The example traces are recorded with the SDK (pipeline/tools/example_traces) and forwarded by
its batch processors and OTLP exporters; the official openai instrumentation runs in an
application process of its own (tests/stack/instrumented_app.py).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Sequence
from enum import StrEnum
from pathlib import Path

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter as GrpcLogExporter
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter as HttpLogExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
from opentelemetry.proto.trace.v1.trace_pb2 import TracesData
from opentelemetry.sdk._logs import LogRecordProcessor
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor, LogExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from pipeline.tools.example_traces.examples import Example
from pipeline.tools.example_traces.recorder import MS, Recorder
from pipeline.tools.example_traces.recording import recorded

REPO = Path(__file__).resolve().parents[2]


class Protocol(StrEnum):
    GRPC = "grpc"
    HTTP = "http"


class TimedExporter(SpanExporter):
    """An exporter that notes when each trace's spans first went out (wall clock, ``time.time()``, by hex trace id).

    Wall clock, so that it compares with Kafka's record timestamps.
    """

    def __init__(self, inner: SpanExporter, exported: dict[str, float]) -> None:
        self.inner, self.exported = inner, exported

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        now = time.time()
        for span in spans:
            self.exported.setdefault(format(span.context.trace_id, "032x"), now)
        return self.inner.export(spans)

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


def _processors(
    protocol: Protocol, host_port: str, exported: dict[str, float] | None
) -> tuple[SpanProcessor, LogRecordProcessor]:
    spans: SpanExporter
    logs: LogExporter
    if protocol is Protocol.GRPC:
        spans = GrpcSpanExporter(endpoint=host_port, insecure=True)
        logs = GrpcLogExporter(endpoint=host_port, insecure=True)
    else:
        url = f"http://{host_port}"
        spans, logs = HttpSpanExporter(endpoint=f"{url}/v1/traces"), HttpLogExporter(endpoint=f"{url}/v1/logs")
    if exported is not None:
        spans = TimedExporter(spans, exported)
    return BatchSpanProcessor(spans), BatchLogRecordProcessor(logs)


def send_examples(
    examples: Sequence[Example], protocol: Protocol, host_port: str, exported: dict[str, float] | None = None
) -> list[TracesData]:
    """Record ``examples`` (fresh trace ids each time), export them to ``host_port``; what was sent.

    ``exported``, if given, gets when each trace left the SDK (:class:`TimedExporter`).
    """
    recorder = Recorder(forward=lambda: _processors(protocol, host_port, exported))
    traces = recorded(examples, time.time_ns() - len(examples) * 1_000 * MS, recorder)
    recorder.flush()
    return traces


def run_instrumented_app(grpc_host_port: str, llm_base_url: str, pairs: int, tmp: Path) -> TracesData:
    """The openai-instrumented application's ``2 * pairs`` calls; the spans it exported."""
    sent = tmp / "instrumented-spans.bin"
    env = {**os.environ, "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"}
    app = [sys.executable, "-m", "tests.stack.instrumented_app"]
    command = [*app, grpc_host_port, llm_base_url, str(pairs), str(sent)]
    result = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    return TracesData.FromString(sent.read_bytes())


def span_count(traces: Sequence[TracesData]) -> int:
    return sum(len(scope.spans) for trace in traces for rs in trace.resource_spans for scope in rs.scope_spans)


_SUBJECTS = ("The tower", "The bridge", "The cathedral", "The museum", "The harbour", "The observatory")
_CLAIMS = (
    "was built between {a} and {b} by a company of {n} workers",
    "is {n} m tall and was the tallest structure of the region until {b}",
    "was restored in {a}, when {n} tonnes of paint were applied",
    "received {n} visitors in {a}, more than in any year before {b}",
)


def passages(chars: int, rng: random.Random) -> str:
    """About ``chars`` characters of distinct factual-sounding sentences (numbers drawn from ``rng``)."""
    sentences: list[str] = []
    size = 0
    while size < chars:
        claim = rng.choice(_CLAIMS).format(a=rng.randint(1700, 2000), b=rng.randint(1700, 2000), n=rng.randint(2, 999))
        sentences.append(f"{rng.choice(_SUBJECTS)} {claim}.")
        size += len(sentences[-1]) + 1
    return " ".join(sentences)[:chars]


def _chat(sources: str, answer: str) -> dict[str, str]:
    """A GenAI chat span's attributes: the sources in the user's message, and the answer."""
    question = f"Context:\n{sources}\n\nQuestion: How tall is the tower, and when was it built?"
    return {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-4o-mini",
        "gen_ai.input.messages": json.dumps([{"role": "user", "parts": [{"type": "text", "content": question}]}]),
        "gen_ai.output.messages": json.dumps(
            [{"role": "assistant", "parts": [{"type": "text", "content": answer}], "finish_reason": "stop"}]
        ),
    }


def send_long_calls(http_host_port: str, traces: int, calls: int, chars: int, seed: int) -> list[TracesData]:
    """``traces`` traces of ``calls`` RAG calls each, every prompt ``chars`` characters of its own sources.

    The answer invents its facts, so grounding and contradiction both flag it. Exported over
    OTLP/HTTP by the SDK in one request per trace; returns what was sent.
    """
    rng = random.Random(seed)
    exporter = HttpSpanExporter(endpoint=f"http://{http_host_port}/v1/traces", timeout=60)
    kept = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "archive-assistant"}))
    provider.add_span_processor(SimpleSpanProcessor(kept))
    provider.add_span_processor(BatchSpanProcessor(exporter, max_export_batch_size=calls + 1))
    answer = "The tower was completed in 2023 by a robot crew of 5 and is 9000 m tall, taller than Mount Everest."
    tracer = provider.get_tracer("long-calls")
    for _ in range(traces):
        with tracer.start_as_current_span("POST /ask"):
            for _ in range(calls):
                with tracer.start_as_current_span("chat gpt-4o-mini") as span:
                    span.set_attributes(_chat(passages(chars, rng), answer))
        provider.force_flush()
    provider.shutdown()
    return [encode_spans(kept.get_finished_spans())]
