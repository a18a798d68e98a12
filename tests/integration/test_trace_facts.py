"""Trace facts across messages on real engines: a worker gives a call the documents of a retriever
span of its trace that came in another message -- before it, after it, and across a restart."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from detectors.thresholds import load_thresholds
from pipeline.config.settings import load_settings
from pipeline.spans.suite import suite_from_settings
from pipeline.tools.demo_broker import TansuBroker
from tests.integration.support import WorkerProcess, produce

# Worker processes load the embedding model from the session's export cache.
pytestmark = pytest.mark.usefixtures("exported_model")

MS = 1_000_000
DETECTORS = len(suite_from_settings(load_settings(), load_thresholds()).detectors)  # a finding row each per call
DOCUMENTS = [{"id": "hours-1", "content": "Casa Lisboa opens at 18:00 and closes at 23:00.", "score": 0.9}]


def rag_trace(name: str) -> tuple[str, ReadableSpan, ReadableSpan, ReadableSpan]:
    """(trace id, retriever span, LLM span, root span) of one RAG request, made by the real SDK."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": f"rag-{name}"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("app")
    now = time.time_ns()  # a request of today: the tables' retention drops rows stamped long ago
    with tracer.start_as_current_span(f"POST /ask/{name}", start_time=now) as root:
        retrieval = {"gen_ai.operation.name": "retrieval", "gen_ai.retrieval.documents": json.dumps(DOCUMENTS)}
        tracer.start_span("retrieval hours", start_time=now + 10 * MS, attributes=retrieval).end(end_time=now + 40 * MS)
        chat = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "gpt-4o-mini",
            "gen_ai.input.messages": json.dumps(
                [{"role": "user", "parts": [{"type": "text", "content": "When does Casa Lisboa open?"}]}]
            ),
            "gen_ai.output.messages": json.dumps(
                [
                    {
                        "role": "assistant",
                        "parts": [{"type": "text", "content": "It opens at 18:00."}],
                        "finish_reason": "stop",
                    }
                ]
            ),
        }
        tracer.start_span("chat gpt-4o-mini", start_time=now + 50 * MS, attributes=chat).end(end_time=now + 400 * MS)
        trace_id = format(root.get_span_context().trace_id, "032x")
    retriever, llm, root_span = exporter.get_finished_spans()
    return trace_id, retriever, llm, root_span


def message(trace_id: str, spans: Sequence[ReadableSpan]) -> tuple[bytes, bytes]:
    """The spans as one collector message, keyed by trace id."""
    return trace_id.encode(), encode_spans(spans).SerializeToString()


def sources_from(worker: WorkerProcess) -> dict[str, str]:
    return {str(t): str(s) for t, s in worker.query("SELECT trace_id, sources_from FROM halluwatch.llm_calls FINAL")}


def test_documents_from_a_retriever_span_in_another_message_before_or_after_the_call(
    tansu: TansuBroker, topic_prefix: str, tmp_path: Path
) -> None:
    before, after, alone = rag_trace("before"), rag_trace("after"), rag_trace("alone")
    # A window longer than a loaded machine takes between two produces: the call waits for its facts
    # however slow the test is (it is released the moment they come, so the test does not wait it out).
    worker = WorkerProcess(tansu.bootstrap, topic_prefix, tmp_path / "worker", trace_facts_window_seconds="60").start()
    # Facts first: the retriever ended first and went out in an earlier export batch.
    produce(tansu.bootstrap, worker.input_topic, [message(before[0], [before[1]])])
    worker.wait_for("halluwatch_messages_done_total", 1)
    produce(tansu.bootstrap, worker.input_topic, [message(before[0], [before[2], before[3]])])
    # Facts later: another service exported its retriever span after the call's (no root with the call).
    produce(tansu.bootstrap, worker.input_topic, [message(after[0], [after[2]])])
    worker.wait_for("halluwatch_messages_done_total", 3)
    produce(tansu.bootstrap, worker.input_topic, [message(after[0], [after[1], after[3]])])
    # The whole trace in one message, without its retriever: nothing to wait for.
    produce(tansu.bootstrap, worker.input_topic, [message(alone[0], [alone[2], alone[3]])])
    worker.wait_for("halluwatch_messages_done_total", 5)
    worker.wait_for("halluwatch_trace_facts_total", 2)  # both traces' facts stored by the join
    worker.wait_for("halluwatch_rows_written_total", 3 * (1 + DETECTORS))  # three calls and their findings
    assert worker.stop() == 0, worker.log()
    assert sources_from(worker) == {before[0]: "trace", after[0]: "trace", alone[0]: "prompt"}
    grounding = worker.query(f"SELECT grounding FROM halluwatch.llm_calls FINAL WHERE trace_id = '{after[0]}'")
    assert grounding == [(f"{DOCUMENTS[0]['content']}\n\nWhen does Casa Lisboa open?",)]  # documents, then the prompt


def test_a_call_waiting_for_its_facts_survives_a_restart(tansu: TansuBroker, topic_prefix: str, tmp_path: Path) -> None:
    trace_id, retriever, llm, root = rag_trace("restart")
    settings = {"trace_facts_window_seconds": "120"}  # longer than the restart takes
    first = WorkerProcess(tansu.bootstrap, topic_prefix, tmp_path / "worker", **settings).start()
    produce(tansu.bootstrap, first.input_topic, [message(trace_id, [llm])])
    first.wait_for("halluwatch_messages_done_total", 1)
    assert first.stop(signal.SIGTERM) == 0, first.log()
    assert first.query("SELECT count() FROM halluwatch.llm_calls") == [(0,)]  # still waiting in the join

    second = WorkerProcess(tansu.bootstrap, topic_prefix, tmp_path / "worker", **settings).start()
    produce(tansu.bootstrap, second.input_topic, [message(trace_id, [retriever, root])])
    second.wait_for("halluwatch_messages_done_total", 1)
    second.wait_for("halluwatch_log_join_spans_total", 1)  # released from the recovered table
    assert second.stop() == 0, second.log()
    assert sources_from(second) == {trace_id: "trace"}
