"""With content modes hash and drop, no prompt or answer text reaches any sink.

A real `halluwatch worker` on a Tansu broker gets the example traces with a canary word
written into every prompt, answer and source, and one OTLP/JSON message the decoder refuses
quoting the canary (``Couldn't parse integer: "..."``); Slack refuses the first alert with
an error that echoes content. Then every output is searched for it: ClickHouse's llm_calls,
findings and alerts rows (with the delivery error), the findings, alerts and alerts
dead-letter topics, the dead letter's reason header, the worker's log (alerts on the "page"
route are logged in full, dead letters and failed deliveries with their reasons), and every
request the local Slack server received. The dead letter's value is the message as it came
(a deliberate exception, infra/README.md "Content on internal topics").
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from opentelemetry.proto.trace.v1.trace_pb2 import TracesData

from pipeline.config.content_policy import HASH_PREFIX
from pipeline.tools.demo_broker import TansuBroker
from pipeline.tools.example_traces import EXAMPLE_OUTPUT_SCHEMAS, example_traces
from tests.integration.support import WorkerProcess, consume_all, consume_distinct, consume_findings, produce
from tests.servers import SLACK_POST_PATH, AlertingServer, Reply

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


def _undecodable() -> tuple[bytes, bytes]:
    """OTLP/JSON with a prompt where an integer belongs: the decoder's reason quotes it."""
    attribute = {"key": "gen_ai.prompt", "value": {"intValue": f"the {CANARY} question of {EMAIL}"}}
    span = {"traceId": "ab" * 16, "spanId": "cd" * 8, "name": "chat", "attributes": [attribute]}
    return b"ab" * 16, json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}).encode()


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
    undecodable = _undecodable()
    with AlertingServer() as server:
        # A refusal for good whose error echoes content (a proxy quoting what it got, say).
        echo = {"ok": False, "error": f"invalid_blocks: the {CANARY} answer of {EMAIL}"}
        server.script(SLACK_POST_PATH, Reply(200, body=echo))
        worker = WorkerProcess(
            tansu.bootstrap,
            topic_prefix,
            tmp_path / "worker",
            config=str(_config(tmp_path / "halluwatch.yaml", server)),
            content_hmac_key="e2e-hmac-key-40d9b2",
            alerting__slack_bot_token="xoxb-e2e",
        )
        worker.start()
        try:
            produce(tansu.bootstrap, worker.input_topic, [*messages, undecodable])
            worker.wait_for("halluwatch_messages_done_total", len(messages) + 1, timeout_seconds=180)
            worker.wait_for("halluwatch_alerts_total", 2, timeout_seconds=120)
            worker.wait_for("halluwatch_alert_deliveries_total", 2)
            worker.wait_for("halluwatch_alert_dead_letters_total", 1)
            findings = int(worker.metric("halluwatch_findings_total"))
            alerts = int(worker.metric("halluwatch_alerts_total"))
        finally:
            worker.stop()
        slack = [json.dumps(request.body) for request in server.requests()]

    tables = {
        table: worker.query(f"SELECT * FROM halluwatch.{table} FINAL") for table in ("llm_calls", "findings", "alerts")
    }
    findings_messages, published = consume_findings(tansu.bootstrap, worker.findings_topic, findings)
    topics = {
        "findings": findings_messages,
        "alerts": consume_all(tansu.bootstrap, worker.alerts_topic, alerts),
        "alerts dlq": consume_distinct(tansu.bootstrap, worker.alerts_dlq_topic, 1),
    }
    dead_letters = consume_distinct(tansu.bootstrap, worker.dlq_topic, 2, timeout_seconds=10)
    log = worker.log_path.read_text(errors="replace")

    # Everything arrived, so the search below is over real output.
    assert len(tables["llm_calls"]) == len(messages) and len(published) == findings > len(messages)
    assert tables["alerts"] and len(slack) >= 1 and "ALERT [page" in log
    ((_, dead_letter_value),) = [(m.key(), m.value()) for m in dead_letters]  # the undecodable message only
    # The dead letter keeps the message as it came (to fix and replay it): content, like the input topic.
    assert dead_letter_value == undecodable[1] and CANARY.encode() in dead_letter_value
    # Its reason: the worker's words, the decoder's quote withheld (dead letters follow llm_calls: drop).
    reasons = [dict(m.headers() or [])["halluwatch.reason"].decode() for m in dead_letters]
    assert reasons == ["malformed OTLP/JSON: [withheld]"]
    # The refused delivery: alerts content is hashed, so is the server's reply quoted in the error.
    failed = [row for row in tables["alerts"] if "HTTP 200" in repr(row)]
    assert failed and f"DeliveryError: slack:#quality: HTTP 200: {HASH_PREFIX}" in repr(failed)
    assert "HTTP 200: hmac-sha256:" in dict(topics["alerts dlq"][0].headers() or [])["halluwatch.reason"].decode()
    outputs = {
        **{f"table {name}": repr(rows) for name, rows in tables.items()},
        **{
            f"topic {name}": repr([(m.key(), m.value(), m.headers()) for m in records])
            for name, records in topics.items()
        },
        "dead letter headers": repr([(m.key(), m.headers()) for m in dead_letters]),
        "worker log": log,
        "slack requests": "\n".join(slack),
    }
    for where, text in outputs.items():
        assert CANARY not in text.lower(), f"canary in {where}"
        assert EMAIL not in text, f"e-mail in {where}"
    # What is left is the structure: scores, verdicts, hashes that match between findings and alerts.
    finding = json.loads(topics["findings"][0].value())[0]
    assert "score" in finding and finding["summary"] == ""
    assert "hmac-sha256:" in outputs["table findings"] and "hmac-sha256:" in outputs["slack requests"]
    assert all(row[0] for row in tables["llm_calls"])  # ids and metadata are still there
