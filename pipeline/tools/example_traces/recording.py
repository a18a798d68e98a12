"""The example requests as traces: an HTTP server root, the retrieval or tool runs before the LLM call, the call.

The agent then runs the tools the call asked for: their spans follow it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from opentelemetry import trace
from opentelemetry.proto.logs.v1.logs_pb2 import LogsData
from opentelemetry.proto.trace.v1.trace_pb2 import TracesData
from opentelemetry.trace import SpanKind

from pipeline.tools.example_traces.content import app, usage
from pipeline.tools.example_traces.examples import EXAMPLES, LOG_EVENT_EXAMPLES, ConventionName, Example
from pipeline.tools.example_traces.recorder import MS, Recorder, record_span
from pipeline.tools.example_traces.writers import (
    LLM_WRITERS,
    SCOPES,
    log_events,
    retrieval,
    tool_call_executions,
    tool_executions,
)


def _record_example(recorder: Recorder, example: Example, start_ns: int) -> None:
    """Record one request: HTTP root, the retrieval when there are sources, tool runs, the call, its tools' runs."""
    web = recorder.tracer(example.service, "opentelemetry.instrumentation.fastapi")
    llm = recorder.tracer(example.service, SCOPES[example.convention])
    llm_ms = 300 + 25 * usage(example)[1]
    # Retrieval, then the agent's tool runs (20 ms each), come before the LLM call.
    retrieval_ms = (35 if example.sources else 0) + 20 * len(example.tool_results)
    route = app(example).route
    root = web.start_span(
        f"POST {route}",
        kind=SpanKind.SERVER,
        start_time=start_ns,
        attributes={
            "http.request.method": "POST",
            "http.route": route,
            "url.path": route,
            "url.scheme": "https",
            "server.address": f"{example.service}.example.com",
            "http.response.status_code": 200,
        },
    )
    if example.sources:
        # GenAI and OpenInference retrievals come from the LLM framework's instrumentation,
        # the others are plain database queries.
        if example.convention in (ConventionName.GENAI, ConventionName.OPENINFERENCE):
            retriever = llm
        else:
            retriever = recorder.tracer(example.service, "opentelemetry.instrumentation.psycopg")
        record_span(retriever, retrieval(example), root, start_ns + 5 * MS, 30 * MS)
    tools_start_ns = start_ns + (40 if example.sources else 5) * MS
    for i, execution in enumerate(tool_executions(example)):
        record_span(llm, execution, root, tools_start_ns + i * 20 * MS, 15 * MS)
    llm_start_ns = start_ns + (10 + retrieval_ms) * MS
    spec = LLM_WRITERS[example.convention](example)
    if example.user:  # who the app acts for, as apps record it for access checks
        spec = spec._replace(
            attributes=spec.attributes | {"enduser.id": example.user[0], "enduser.role": example.user[1]}
        )
    llm_span = record_span(llm, spec, root, llm_start_ns, llm_ms * MS)
    if example.convention is ConventionName.GENAI_EVENTS:
        logger = recorder.logger(example.service, SCOPES[example.convention])
        in_call = trace.set_span_in_context(llm_span)
        for name, body in log_events(example):
            logger.emit(timestamp=llm_start_ns, context=in_call, event_name=name, body=body)
    # The agent runs the tools the model asked for once its answer is in (20 ms each).
    answers_start_ns = llm_start_ns + (llm_ms + 2) * MS
    runs = tool_call_executions(example)
    for i, execution in enumerate(runs):
        record_span(llm, execution, root, answers_start_ns + i * 20 * MS, 15 * MS)
    root.end(end_time=start_ns + (20 + retrieval_ms + llm_ms + 20 * len(runs)) * MS)


def recorded(examples: Sequence[Example], start_ns: int, recorder: Recorder | None = None) -> list[TracesData]:
    """One ``TracesData`` per example, a second apart from ``start_ns``."""
    recorder = recorder or Recorder()
    traces = []
    for i, example in enumerate(examples):
        _record_example(recorder, example, start_ns + i * 1_000 * MS)
        traces.append(recorder.collect())
    return traces


def example_traces() -> list[TracesData]:
    """Record the demo set: one ``TracesData`` per row of :data:`EXAMPLES`, a second apart, ending now."""
    return recorded(EXAMPLES, time.time_ns() - len(EXAMPLES) * 1_000 * MS)


def example_log_event_telemetry() -> tuple[list[TracesData], LogsData]:
    """Record :data:`LOG_EVENT_EXAMPLES`, ending now: one ``TracesData`` per row, and all their log records."""
    recorder = Recorder()
    traces = recorded(LOG_EVENT_EXAMPLES, time.time_ns() - len(LOG_EVENT_EXAMPLES) * 1_000 * MS, recorder)
    return traces, recorder.collect_logs()
