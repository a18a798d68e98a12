"""With content modes hash and drop, no prompt or answer text reaches any sink.

A real `halluwatch worker` on a Tansu broker gets the example traces with a canary word
written into every prompt, answer and source. Then every output is searched for it:
ClickHouse's llm_calls, findings and alerts rows, the findings, alerts and dead-letter
topics, the worker's log (alerts on the "page" route are logged in full), and every
request the local Slack server received.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from opentelemetry.proto.trace.v1.trace_pb2 import TracesData

from pipeline.tools.demo_broker import TansuBroker
from pipeline.tools.example_traces import EXAMPLE_OUTPUT_SCHEMAS, example_traces
from tests.integration.support import WorkerProcess, consume_all, consume_dead_letters, produce
from tests.servers import AlertingServer

pytestmark = pytest.mark.usefixtures("exported_model")

CANARY = "qzcanary"  # no detector, model or library emits this on its own
EMAIL = "canary.person@example.org"


def _with_canaries(trace: TracesData) -> TracesData:
    """Write the canary into every string attribute of the trace's LLM spans (JSON stays valid)."""
    for resource in trace.resource_spans:
        for scope in resource.scope_spans:
            for span in scope.spans:
                for attribute in span.attributes:
                    text = attribute.value.string_value
                    if attribute.key.startswith(("gen_ai.", "llm.", "input.", "output.", "rag.", "retrieval.")):
                        text = text.replace("the ", f"the {CANARY} ").replace("The ", f"The {CANARY} {EMAIL} ")
                        attribute.value.string_value = text
    return trace


def _keyed(traces: list[TracesData]) -> list[tuple[bytes, bytes]]:
    return [
        (t.resource_spans[0].scope_spans[0].spans[0].trace_id.hex().encode(), t.SerializeToString()) for t in traces
    ]


def _config(path: Path, server: AlertingServer) -> Path:
    config = {
        # Per table: nothing of the calls, keyed hashes in findings and alerts.
        "content_mode": "hash",
        "content_modes": {"llm_calls": "drop"},
        "detectors": {"schema_violation": {"output_schemas": EXAMPLE_OUTPUT_SCHEMAS}},
        "alerting": {
            "slack_base_url": server.slack_base_url,
            "routes": {"page": {}, "slack": {"slack_channel": "#quality"}, "log": {}},  # page: to the log
        },
    }
    path.write_text(yaml.safe_dump(config))
    return path


def test_no_prompt_or_answer_text_reaches_any_sink(tansu: TansuBroker, topic_prefix, tmp_path):
    traces = [_with_canaries(trace) for trace in example_traces()]
    messages = _keyed(traces)
    assert sum(CANARY.encode() in value for _, value in messages) >= 10  # the canary is really in the input
    with AlertingServer() as server:
        worker = WorkerProcess(
            tansu.bootstrap,
            topic_prefix,
            tmp_path / "worker",
            config=str(_config(tmp_path / "halluwatch.yaml", server)),
            content_hmac_key="e2e-hmac-key",
            alerting__slack_bot_token="xoxb-e2e",
        )
        worker.start()
        try:
            produce(tansu.bootstrap, worker.input_topic, messages)
            worker.wait_for("halluwatch_messages_done_total", len(messages), timeout_seconds=180)
            worker.wait_for("halluwatch_alerts_total", 2, timeout_seconds=120)
            worker.wait_for("halluwatch_alert_deliveries_total", 2)
            findings = int(worker.metric("halluwatch_findings_total"))
            alerts = int(worker.metric("halluwatch_alerts_total"))
        finally:
            worker.stop()
        slack = [json.dumps(request.body) for request in server.requests()]

    tables = {
        table: worker.query(f"SELECT * FROM halluwatch.{table} FINAL") for table in ("llm_calls", "findings", "alerts")
    }
    topics = {
        "findings": consume_all(tansu.bootstrap, worker.findings_topic, findings),
        "alerts": consume_all(tansu.bootstrap, worker.alerts_topic, alerts),
        "dlq": consume_dead_letters(tansu.bootstrap, worker.dlq_topic, 1, timeout_seconds=3),
    }
    log = worker.log_path.read_text(errors="replace")

    # Everything arrived, so the search below is over real output.
    assert len(tables["llm_calls"]) == len(messages) and len(topics["findings"]) == findings > len(messages)
    assert tables["alerts"] and len(slack) >= 1 and "ALERT [page" in log
    assert not topics["dlq"]
    outputs = {
        **{f"table {name}": repr(rows) for name, rows in tables.items()},
        **{f"topic {name}": repr([(m.key(), m.value()) for m in records]) for name, records in topics.items()},
        "worker log": log,
        "slack requests": "\n".join(slack),
    }
    for where, text in outputs.items():
        assert CANARY not in text.lower(), f"canary in {where}"
        assert EMAIL not in text, f"e-mail in {where}"
    # What is left is the structure: scores, verdicts, hashes that match between findings and alerts.
    finding = json.loads(topics["findings"][0].value())
    assert "score" in finding and finding["summary"] == ""
    assert "hmac-sha256:" in outputs["table findings"] and "hmac-sha256:" in outputs["slack requests"]
    assert all(row[0] for row in tables["llm_calls"])  # ids and metadata are still there
