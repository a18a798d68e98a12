"""Two agreeing detectors -> exactly one alert, delivered through outages, replays and restarts.

Real parts end to end: OTLP spans from the OTel SDK on a Tansu broker, a `halluwatch
worker` process, slack-sdk and aiohttp talking to local fake Slack and PagerDuty servers.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml

from pipeline.tools.demo_broker import TansuBroker
from pipeline.tools.example_traces import example_traces
from tests.integration.support import WorkerProcess, alerting_worker_config, consume_all, consume_findings, produce
from tests.servers import PAGERDUTY_PATH, SLACK_POST_PATH, AlertingServer, Reply, Request

pytestmark = pytest.mark.usefixtures("exported_model")

CHANNEL = "#halluwatch-alerts"


def _trace_id(trace) -> str:
    return trace.resource_spans[0].scope_spans[0].spans[0].trace_id.hex()


def _service(trace) -> str:
    attributes = {a.key: a.value.string_value for a in trace.resource_spans[0].resource.attributes}
    return attributes["service.name"]


def _agreeing_hr_trace(traces):
    """The hr-assistant call that grounding and contradiction both flag (it invents 150%)."""
    return next(t for t in traces if _service(t) == "hr-assistant" and "150%" in str(t))


def _keyed(traces) -> list[tuple[bytes, bytes]]:
    return [(_trace_id(t).encode(), t.SerializeToString()) for t in traces]


def _write_config(path: Path, server: AlertingServer, **alerting: object) -> Path:
    links = {
        "trace_url_template": "http://jaeger.test/trace/{trace_id}",
        "dashboard_url": "http://grafana.test/d/halluwatch",
    }
    retries = {"retry_initial_seconds": 1, "request_retries": 1}
    path.write_text(yaml.safe_dump(alerting_worker_config(server, alerting={**links, **retries, **alerting})))
    return path


def _mentions(request: Request, trace_id: str) -> bool:
    return trace_id in json.dumps(request.body)


def _accepted(server: AlertingServer, path: str, since: float) -> list[Request]:
    return [r for r in server.requests(path) if r.received_at >= since]


def _wait_accepted(server: AlertingServer, path: str, since: float, count: int, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while len(_accepted(server, path, since)) < count:
        assert time.monotonic() < deadline, f"{count} requests to {path} expected, got {server.requests(path)}"
        time.sleep(0.2)


def test_one_post_per_agreeing_trace_through_outage_replay_and_restart(tansu: TansuBroker, topic_prefix, tmp_path):
    traces = example_traces()
    by_service = {}
    for trace in traces:
        by_service.setdefault(_service(trace), []).append(_trace_id(trace))
    hr_trace = _trace_id(_agreeing_hr_trace(traces))  # grounding + contradiction agree: the "slack" route
    with AlertingServer() as server:
        config = _write_config(tmp_path / "halluwatch.yaml", server)
        worker = WorkerProcess(tansu.bootstrap, topic_prefix, tmp_path / "worker", config=str(config))
        server.set_down()  # Slack and PagerDuty are out when the alerts fire
        worker.start()
        try:
            produce(tansu.bootstrap, worker.input_topic, _keyed(traces))
            worker.wait_for("halluwatch_alerts_total", 5, timeout_seconds=120)
            # Every alert failed while it was down: three pages to Slack and PagerDuty, two pairs to Slack.
            worker.wait_for("halluwatch_alert_deliveries_total", 8)
            server.set_up()
            back = time.monotonic()
            _wait_accepted(server, SLACK_POST_PATH, back, 5)
            _wait_accepted(server, PAGERDUTY_PATH, back, 3)
            time.sleep(2)  # and no more than that
            posts = _accepted(server, SLACK_POST_PATH, back)
            findings = int(worker.metric("halluwatch_agreement_findings_total"))
        finally:
            worker.stop()

        # Exactly one post per agreeing trace: the hr-assistant and order-intake pairs, the travel-guide
        # and product-qa pages (an invented year / battery life conflicts with the sources and is
        # unsupported by them), and the concierge agent's page (a failed booking claimed done).
        assert len(posts) == 5, [p.body["text"] for p in posts]
        (hr_post,) = [p for p in posts if _mentions(p, hr_trace)]
        assert hr_post.body["channel"] == CHANNEL
        assert hr_post.headers["authorization"] == "Bearer xoxb-test"
        blocks = json.dumps(hr_post.body["blocks"])
        assert "grounding" in blocks and "contradiction" in blocks
        assert f"http://jaeger.test/trace/{hr_trace}" in blocks and "http://grafana.test/d/halluwatch" in blocks
        pages = _accepted(server, PAGERDUTY_PATH, back)
        assert sorted(p.body["dedup_key"].split(":")[1] for p in pages) == [
            "claimed-failed-tool",
            "severe-contradiction",
            "severe-contradiction",
        ]
        assert {p.body["payload"]["severity"] for p in pages} == {"critical"}
        grounded_travel = [_trace_id(t) for t in traces if _service(t) == "travel-guide" and "1950" not in str(t)]
        truncated_json = [_trace_id(t) for t in traces if "Friedrichstra" in str(t)]  # schema_violation alone
        single_detector_traces = set(grounded_travel) | set(by_service["docs-assistant"]) | set(truncated_json)
        assert not any(_mentions(p, t) for p in server.requests() for t in single_detector_traces)

        # Replay every findings record, restart the worker: the state it recovers says "fired".
        replayed, records = consume_findings(tansu.bootstrap, worker.findings_topic, findings)
        assert len(records) == findings
        produce(tansu.bootstrap, worker.findings_topic, [(m.key(), m.value()) for m in replayed])
        worker.start()
        try:
            worker.wait_for("halluwatch_agreement_findings_total", findings, timeout_seconds=120)
            time.sleep(3)  # time for any (wrong) alert to reach the router and the server
        finally:
            worker.stop()
        assert len(_accepted(server, SLACK_POST_PATH, back)) == 5
        assert len(_accepted(server, PAGERDUTY_PATH, back)) == 3

    rows = worker.query(
        "SELECT trace_id, rule, destination, status, attempts FROM halluwatch.alerts FINAL ORDER BY destination"
    )
    hr_rows = [row for row in rows if row[0] == hr_trace]
    assert [(r[1], r[2], r[3]) for r in hr_rows] == [("two-detectors", f"slack:{CHANNEL}", "delivered")]
    assert hr_rows[0][4] >= 2  # delivered on a retry, after the outage
    # Three pages to Slack and PagerDuty, two pairs to Slack.
    assert {r[3] for r in rows} == {"delivered"} and len(rows) == 8


def test_an_alert_refused_for_good_is_dead_lettered_and_recorded(tansu: TansuBroker, topic_prefix, tmp_path):
    first, second = (_agreeing_hr_trace(example_traces()) for _ in range(2))
    with AlertingServer() as server:
        config = _write_config(tmp_path / "halluwatch.yaml", server)
        worker = WorkerProcess(tansu.bootstrap, topic_prefix, tmp_path / "worker", config=str(config))
        worker.start()
        try:
            produce(tansu.bootstrap, worker.input_topic, _keyed([first]))
            (delivered,) = server.wait_for(1, path_prefix=SLACK_POST_PATH, timeout=120)
            # A refusal no retry can fix (a revoked token): the second alert is dead-lettered.
            server.script(SLACK_POST_PATH, Reply(200, body={"ok": False, "error": "invalid_auth"}))
            produce(tansu.bootstrap, worker.input_topic, _keyed([second]))
            worker.wait_for("halluwatch_alert_dead_letters_total", 1)
        finally:
            worker.stop()
    assert _mentions(delivered, _trace_id(first))
    assert len(server.requests(SLACK_POST_PATH)) == 2  # refused once, not retried
    (dead,) = consume_all(tansu.bootstrap, worker.alerts_dlq_topic, 1)
    assert json.loads(dead.value())["trace_id"] == _trace_id(second)
    assert b"invalid_auth" in dict(dead.headers())["halluwatch.reason"]
    rows = worker.query("SELECT trace_id, status, error FROM halluwatch.alerts FINAL ORDER BY status")
    assert [row[:2] for row in rows] == [(_trace_id(first), "delivered"), (_trace_id(second), "failed")]
    assert "invalid_auth" in rows[1][2]
