"""Real SDK spans -> OTLP encoder -> Tansu -> `halluwatch worker` -> embedded ClickHouse."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from pipeline.sinks.finding import Finding
from pipeline.tools.demo_broker import TansuBroker
from tests.integration.support import (
    WorkerProcess,
    committed_total,
    consume_all,
    consume_distinct,
    consume_findings,
    produce,
    wait_until_committed,
)

# Worker and demo processes load the embedding model from the session's export cache.
pytestmark = pytest.mark.usefixtures("exported_model")

# Every call gets a finding from each span detector the default settings turn on.
DEFAULT_SPAN_DETECTORS = {
    "schema_violation", "tool_facts", "tool_outcome", "sentinel", "contradiction", "confidence", "grounding",
    "unsupported_spans", "coverage",
}  # fmt: skip

TOOLS = [
    {
        "type": "function",
        "name": "search_docs",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
    }
]


def _record_traces() -> tuple[list[bytes], dict[str, str]]:
    """Three traces from the real SDK; returns one encoded payload per trace and trace ids by role."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "checkout-assistant"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("e2e")
    roles: dict[str, str] = {}
    payloads = []
    for role in ("bad_tool_call", "grounded_answer", "no_llm"):
        with tracer.start_as_current_span("POST /ask", kind=SpanKind.SERVER) as root:
            roles[role] = format(root.get_span_context().trace_id, "032x")
            with tracer.start_as_current_span("SELECT orders") as db:
                db.set_attribute("db.system", "postgresql")
            if role == "bad_tool_call":
                with tracer.start_as_current_span("chat gpt-4o-mini", kind=SpanKind.CLIENT) as llm:
                    llm.set_attributes(
                        {
                            "gen_ai.operation.name": "chat",
                            "gen_ai.provider.name": "openai",
                            "gen_ai.request.model": "gpt-4o-mini",
                            "gen_ai.usage.input_tokens": 42,
                            "gen_ai.usage.output_tokens": 7,
                            "gen_ai.tool.definitions": json.dumps(TOOLS),
                            "gen_ai.input.messages": json.dumps(
                                [{"role": "user", "parts": [{"type": "text", "content": "Find the refund policy"}]}]
                            ),
                            "gen_ai.output.messages": json.dumps(
                                [
                                    {
                                        "role": "assistant",
                                        "finish_reason": "tool_calls",
                                        "parts": [
                                            {
                                                "type": "tool_call",
                                                "id": "c1",
                                                "name": "search_documents",
                                                "arguments": {"query": "refund policy"},
                                            }
                                        ],
                                    }
                                ]
                            ),
                        }
                    )
            elif role == "grounded_answer":
                with tracer.start_as_current_span("ChatCompletion") as llm:
                    llm.set_attributes(
                        {
                            "openinference.span.kind": "LLM",
                            "llm.model_name": "gpt-4o-2024-08-06",
                            "llm.input_messages.0.message.role": "user",
                            "llm.input_messages.0.message.content": "When was the Eiffel tower built?",
                            "llm.output_messages.0.message.role": "assistant",
                            "llm.output_messages.0.message.content": "It was built from 1887 to 1889.",
                            "retrieval.documents.0.document.id": "doc-7",
                            "retrieval.documents.0.document.content": "The tower was built 1887-1889.",
                        }
                    )
        payloads.append(encode_spans(exporter.get_finished_spans()).SerializeToString())
        exporter.clear()
    return payloads, roles


def test_spans_flow_to_clickhouse_findings_topic_and_dlq(tansu: TansuBroker, topic_prefix: str, tmp_path: Path):
    payloads, roles = _record_traces()
    worker = WorkerProcess(tansu.bootstrap, topic_prefix, tmp_path / "worker").start()
    try:
        keyed = [(roles[role].encode(), payload) for role, payload in zip(roles, payloads, strict=True)]
        # The same three traces again, as one unkeyed mixed batch: must be re-keyed by trace id.
        mixed = payloads[0] + payloads[1] + payloads[2]  # concatenated protobuf = merged TracesData
        garbage = [(None, b"\x08\x96\x01 definitely not OTLP \xff"), (b"k", b"{not json")]
        sent = produce(tansu.bootstrap, worker.input_topic, [*keyed, (None, mixed), *garbage])
        # 3 keyed + 1 mixed + 2 garbage, then the mixed batch comes back as 3 re-keyed messages.
        worker.wait_for("halluwatch_messages_done_total", sent + 3)
        dead = consume_distinct(tansu.bootstrap, worker.dlq_topic, expected=2)  # a redelivery repeats one
        # 2 LLM calls x the default span detectors (each also delivered again from the re-keyed batch,
        # and maybe redelivered)
        expected = 2 * len(DEFAULT_SPAN_DETECTORS)
        _, findings = consume_findings(tansu.bootstrap, worker.findings_topic, expected, identity=_finding_identity)
        rekeyed = consume_distinct(tansu.bootstrap, worker.rekeyed_topic, expected=3)  # one per trace
        # A redelivered mixed batch is re-keyed again: the worker must get through every copy.
        wait_until_committed(tansu.bootstrap, worker.group, worker.rekeyed_topic, _copies(tansu, worker.rekeyed_topic))
    finally:
        assert worker.stop() == 0, worker.log()

    assert sorted(m.value() for m in dead) == sorted(value for _, value in garbage)
    assert {m.key() for m in dead} == {dict(m.headers())["halluwatch.source"] for m in dead}  # identity: where from
    assert [dict(m.headers()).get("halluwatch.original_key") for m in dead if m.value() == garbage[1][1]] == [b"k"]
    reasons = {dict(m.headers())["halluwatch.reason_kind"] for m in dead}
    assert reasons == {b"undecodable"}
    assert sorted(m.key().decode() for m in rekeyed) == sorted(roles.values())
    by_trace: dict[str, set[str]] = {}
    for finding in findings:
        by_trace.setdefault(finding.trace_id, set()).add(finding.detector)
    assert by_trace == dict.fromkeys((roles["bad_tool_call"], roles["grounded_answer"]), DEFAULT_SPAN_DETECTORS)

    calls = worker.query(
        "SELECT trace_id, service, convention, model, operation, finish_reason, input_tokens, "
        "tool_calls, tool_definitions, sources, answer FROM halluwatch.llm_calls FINAL ORDER BY convention"
    )
    assert calls == [
        (roles["bad_tool_call"], "checkout-assistant", "gen_ai", "gpt-4o-mini", "chat", "tool_calls", 42, 1, 1, 0, ""),
        (
            roles["grounded_answer"],
            "checkout-assistant",
            "openinference",
            "gpt-4o-2024-08-06",
            "",
            "",
            None,
            0,
            0,
            1,
            "It was built from 1887 to 1889.",
        ),
    ]
    rows = worker.query(
        "SELECT trace_id, detector, status, flagged, severity, evidence FROM halluwatch.findings FINAL "
        "WHERE detector = 'schema_violation'"
    )
    by_trace = {row[0]: row for row in rows}
    assert len(rows) == 2
    bad = by_trace[roles["bad_tool_call"]]
    assert bad[1:5] == ("schema_violation", "ok", True, 4)
    violation = json.loads(bad[5])["violations"][0]
    assert violation["kind"] == "unknown_tool" and violation["suggestion"] == "search_docs"
    assert by_trace[roles["grounded_answer"]][2:4] == ("skipped", False)
    grounded = worker.query(
        "SELECT detector, status, flagged FROM halluwatch.findings FINAL "
        f"WHERE trace_id = '{roles['grounded_answer']}' AND detector IN ('grounding', 'contradiction') "
        "ORDER BY detector"
    )
    assert grounded == [("contradiction", "ok", False), ("grounding", "ok", False)]
    # Everything is committed: a restarted worker would not see these messages again.
    assert committed_total(tansu.bootstrap, worker.group, worker.input_topic) == sent
    assert committed_total(tansu.bootstrap, worker.group, worker.rekeyed_topic) == _copies(tansu, worker.rekeyed_topic)


def _copies(tansu: TansuBroker, topic: str) -> int:
    """How many messages ``topic`` holds, repeats included (all that can be read in 5 s)."""
    return len(consume_all(tansu.bootstrap, topic, expected=10_000, timeout_seconds=5))


def _finding_identity(finding: Finding) -> tuple[str, str]:
    """A findings record's trace and detector: what a repeat delivery shares."""
    return finding.trace_id, finding.detector
