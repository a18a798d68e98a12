"""Sampled self-consistency end to end: `halluwatch worker` processes on Tansu, the real openai library
against a local OpenAI-compatible server, OTLP spans from the OTel SDK.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from pipeline.sampled.sampling import trace_sampled
from pipeline.tools.demo_broker import TansuBroker
from tests.integration.support import WorkerProcess, consume_all, consume_distinct, produce
from tests.openai_server import CHAT_PATH, OpenAIServer
from tests.servers import ScriptedServer
from tests.unit.test_finding_export import LOGS_PATH, attributes_of, log_records, otlp_ok

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("exported_model"), pytest.mark.timeout(120)]

LEAFLET = (
    "Adults may take 200 to 400 mg of ibuprofen every 4 to 6 hours. "
    "Do not take more than 1200 mg in 24 hours without medical advice."
)
QUESTION = "How much ibuprofen can I take for a headache?"
# Grounding alone flags this answer (similarity ~0.55 to the leaflet); no other span detector does.
WEAKLY_GROUNDED = "Ibuprofen works best when you drink plenty of water and rest in a quiet, dark room for a while."
DIVERGENT = [
    "Take 400 mg every 4 to 6 hours, at most 1200 mg a day.",
    "Bananas are rich in potassium and grow in tropical climates.",
    "I cannot help with questions about train timetables.",
    "Quantum computers use qubits that can be in superposition.",
]


def clinic_trace(domain: str, answer: str = WEAKLY_GROUNDED) -> tuple[str, bytes]:
    """One trace with one GenAI chat span of ``app.domain`` ``domain``, as the collector writes it: (id, bytes)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "clinic-assistant"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-4o-mini",
        "app.domain": domain,
        "gen_ai.system_instructions": json.dumps([{"type": "text", "content": f"Answer from the leaflet:\n{LEAFLET}"}]),
        "gen_ai.input.messages": json.dumps([{"role": "user", "parts": [{"type": "text", "content": QUESTION}]}]),
        "gen_ai.output.messages": json.dumps(
            [{"role": "assistant", "parts": [{"type": "text", "content": answer}], "finish_reason": "stop"}]
        ),
    }
    with provider.get_tracer("opentelemetry.instrumentation.openai_v2").start_as_current_span(
        "chat gpt-4o-mini", attributes=attributes
    ) as span:
        trace_id = format(span.get_span_context().trace_id, "032x")
    provider.shutdown()
    return trace_id, encode_spans(exporter.get_finished_spans()).SerializeToString()


def consistency_settings(server: OpenAIServer, topic: str, rate: float) -> dict[str, str]:
    return {
        "consistency__enabled": "true",
        "consistency__topic": topic,
        "consistency__sample_rate": str(rate),
        "consistency__llm__base_url": server.base_url,
        "consistency__llm__api_key": "sk-integration",
        "consistency__llm__max_requests_per_minute": "10000",
    }


def test_every_worker_samples_the_same_traces(tansu: TansuBroker, topic_prefix: str, tmp_path: Path) -> None:
    traces = [clinic_trace("medical") for _ in range(24)] + [clinic_trace("gaming") for _ in range(8)]
    expected = {trace_id for trace_id, _ in traces[:24] if trace_sampled(trace_id, 0.5)}
    assert 0 < len(expected) < 24  # else the draw tests nothing (odds ~1e-7)
    shared_input = f"{topic_prefix}-shared-spans"
    consistency_topics = [f"{topic_prefix}-{run}-consistency" for run in ("first", "second")]
    with OpenAIServer("Up to 1200 mg a day.") as server:
        workers = [
            WorkerProcess(
                tansu.bootstrap,
                topic.removesuffix("-consistency"),
                tmp_path / topic,
                kafka_input_topic=shared_input,
                **consistency_settings(server, topic, 0.5),
            )
            for topic in consistency_topics
        ]
        produce(tansu.bootstrap, shared_input, [(trace_id.encode(), value) for trace_id, value in traces])
        for worker in workers:
            worker.start()
        try:
            for worker in workers:
                worker.wait_for("halluwatch_messages_done_total", len(traces))
                worker.wait_for("halluwatch_consistency_done_total", len(expected))
            sampled = [int(worker.metric("halluwatch_consistency_sampled_total")) for worker in workers]
        finally:
            for worker in workers:
                worker.stop()
        assert len(server.requests(CHAT_PATH)) == 2 * 4 * len(expected)

    assert sampled == [len(expected), len(expected)]
    for worker, topic in zip(workers, consistency_topics, strict=True):
        on_topic = consume_distinct(tansu.bootstrap, topic, len(expected))  # at least once: repeats keep their key
        assert {m.key().decode() for m in on_topic} == expected
        rows = worker.query(
            "SELECT trace_id, status, flagged FROM halluwatch.findings FINAL WHERE detector = 'self_consistency'"
        )
        assert {row[0] for row in rows} == expected
        assert {(row[1], row[2]) for row in rows} == {("ok", False)}  # the server answers the same every time


def test_a_divergent_sampled_trace_and_grounding_make_one_alert(
    tansu: TansuBroker, topic_prefix: str, tmp_path: Path
) -> None:
    sampled_id, sampled = clinic_trace("medical")
    # grounding and unsupported_spans flag it too, but they read one signal: alone, no alert
    unsampled_id, unsampled = clinic_trace("gaming")
    with OpenAIServer() as server, ScriptedServer(otlp_ok) as collector:
        server.answer(*DIVERGENT)
        worker = WorkerProcess(
            tansu.bootstrap,
            topic_prefix,
            tmp_path / "worker",
            findings_otlp_endpoint=collector.url + LOGS_PATH,  # the sampled stage's findings go there too
            **consistency_settings(server, f"{topic_prefix}-consistency", 1.0),
        )
        produce(
            tansu.bootstrap, worker.input_topic, [(sampled_id.encode(), sampled), (unsampled_id.encode(), unsampled)]
        )
        worker.start()
        try:
            worker.wait_for("halluwatch_consistency_done_total", 1)
            worker.wait_for("halluwatch_alerts_total", 1)
            time.sleep(2)  # time for any second (wrong) alert
            alerts = int(worker.metric("halluwatch_alerts_total"))
        finally:
            worker.stop()  # sends what the exporter still queues
        exported = {
            (record.trace_id.hex(), attributes_of(record.attributes)["gen_ai.evaluation.name"])
            for _, record in log_records(collector.requests(LOGS_PATH))
        }
        assert len(server.requests(CHAT_PATH)) == 4

    assert alerts == 1
    assert {(sampled_id, "grounding"), (sampled_id, "self_consistency")} <= exported
    (message,) = consume_all(tansu.bootstrap, worker.alerts_topic, 1)
    alert = json.loads(message.value())
    assert alert["trace_id"] == sampled_id and alert["rule"] == "two-detectors"
    agreeing = {d["detector"] for d in alert["detectors"]}
    assert {"grounding", "self_consistency"} <= agreeing <= {"grounding", "unsupported_spans", "self_consistency"}
    consistency = next(d for d in alert["detectors"] if d["detector"] == "self_consistency")
    assert consistency["evidence"]["most_divergent"]["similarity"] < 0.3
    rows = worker.query(
        "SELECT trace_id, detector, flagged FROM halluwatch.findings FINAL "
        "WHERE detector IN ('grounding', 'self_consistency') ORDER BY trace_id, detector"
    )
    assert sorted(rows) == sorted(
        [(sampled_id, "grounding", True), (sampled_id, "self_consistency", True), (unsampled_id, "grounding", True)]
    )
