"""A replayed burst through a real `halluwatch worker`: one incident opens, alerts join it, it resolves.

Real parts: example traces from the OTel SDK on a Tansu broker, a worker process with embedded
chDB evaluating its monitor on its own timer (as the group's leader), and slack-sdk and aiohttp
talking to the local fake Slack and PagerDuty servers.  Yesterday's traffic at this hour, the
baseline, is written into the worker's ClickHouse before it starts.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from pipeline.tools.demo_broker import TansuBroker
from pipeline.tools.example_traces import EXAMPLES, example_traces
from pipeline.tools.example_traces.recording import recorded
from tests.integration.support import WorkerProcess, alerting_worker_config, produce
from tests.servers import PAGERDUTY_PATH, SLACK_POST_PATH, AlertingServer, Request

pytestmark = pytest.mark.usefixtures("exported_model")

CHANNEL = "#halluwatch-alerts"
MONITOR = {
    "route": "page",
    "group_by": ["policy"],
    "window_minutes": 1,  # the smallest window: the burst leaves it a minute after it ends
    "baseline_days": 1,
    "min_calls": 5,
    "min_increase": 0.05,
    "cooldown_minutes": 0,
    "interval_seconds": 2,
}
BASELINE = """
import sys
from datetime import datetime, timedelta
import clickhouse_connect
from pipeline.sinks.clickhouse import migrate
from tests.integration.test_monitors import insert_calls
client = clickhouse_connect.get_client(dsn=sys.argv[1])
migrate(client, "halluwatch")
day_before = datetime.fromisoformat(sys.argv[2]) - timedelta(days=1, minutes=90)
insert_calls(client, "halluwatch", "any-app", day_before, 1080, 30, "baseline")  # 3 hours, 1 call in 30 flagged
client.close()
"""


def _config(path: Path, server: AlertingServer) -> Path:
    routes = {"page": {"pagerduty": True, "slack_channel": CHANNEL}, "slack": {"slack_channel": CHANNEL}}
    config = alerting_worker_config(server, alerting={"routes": routes}, monitors={"flag-rate": MONITOR})
    path.write_text(yaml.safe_dump(config))
    return path


def _keyed(traces) -> list[tuple[bytes, bytes]]:
    return [
        (t.resource_spans[0].scope_spans[0].spans[0].trace_id.hex().encode(), t.SerializeToString()) for t in traces
    ]


def _wait(server: AlertingServer, what: str, found: Callable[[list[Request]], bool], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not found(server.requests()):
        assert time.monotonic() < deadline, f"no {what}; requests: {[r.body for r in server.requests()]}"
        time.sleep(0.5)


def _settle(worker: WorkerProcess, quiet_seconds: float = 3.0, timeout: float = 90) -> None:
    """Wait until the worker's alert deliveries stop changing: every alert published so far was handled."""
    deadline = time.monotonic() + timeout
    last, since = worker.metric("halluwatch_alert_deliveries_total"), time.monotonic()
    while time.monotonic() - since < quiet_seconds:
        assert time.monotonic() < deadline, "alert deliveries never settled"
        time.sleep(0.5)
        now = worker.metric("halluwatch_alert_deliveries_total")
        if now != last:
            last, since = now, time.monotonic()


def _incident_events(requests: list[Request], action: str) -> list[dict]:
    return [
        r.body
        for r in requests
        if r.path.startswith(PAGERDUTY_PATH)
        and r.body["dedup_key"].startswith("flag-rate:")
        and r.body["event_action"] == action
    ]


def test_a_burst_opens_one_incident_groups_its_alerts_and_resolves_when_calm(
    tansu: TansuBroker, topic_prefix, tmp_path
):
    clean = [example for example in EXAMPLES if not example.hallucinated]  # no detector flags them
    with AlertingServer() as server:
        config = str(_config(tmp_path / "c.yaml", server))
        worker = WorkerProcess(tansu.bootstrap, topic_prefix, tmp_path / "worker", config=config)
        subprocess.run(
            [sys.executable, "-c", BASELINE, worker.clickhouse_dsn, datetime.now(UTC).isoformat()],
            check=True, timeout=120, env=worker.env,
        )  # fmt: skip
        worker.start()
        try:
            # The burst: the example traces, two in three flagged, against 3 % yesterday at this hour.
            produce(tansu.bootstrap, worker.input_topic, _keyed(example_traces()))
            _wait(server, "incident trigger", lambda requests: bool(_incident_events(requests, "trigger")))
            incident_id = _incident_events(server.requests(), "trigger")[0]["dedup_key"]  # updates share the key
            worker.wait_for("halluwatch_alerts_total", 5, timeout_seconds=120)  # the example traces make 5 or more
            _settle(worker)  # the first burst's own alerts, most paged before the incident opened, all delivered
            before, alerts = len(server.requests()), worker.metric("halluwatch_alerts_total")
            # More of it while the incident is open: its alerts join the incident instead of paging.
            produce(tansu.bootstrap, worker.input_topic, _keyed(example_traces()))
            worker.wait_for("halluwatch_alerts_total", alerts + 5, timeout_seconds=120)
            _settle(worker)
            later = server.requests()[before:]
            # Then calm traffic, until the burst has left the one-minute window.
            calm_until = time.monotonic() + 240
            resolved: list[dict] = []
            while not resolved and time.monotonic() < calm_until:
                produce(tansu.bootstrap, worker.input_topic, _keyed(recorded(clean, time.time_ns())))
                time.sleep(5)
                resolved = _incident_events(server.requests(), "resolve")
        finally:
            worker.stop()

    assert [event["dedup_key"] for event in resolved] == [incident_id], "resolved once, the incident it opened"
    ((status, ts),) = worker.query("SELECT status, slack_ts FROM halluwatch.incidents FINAL")
    assert status == "resolved" and ts
    follow_ups = [r for r in server.requests(SLACK_POST_PATH) if r.body.get("thread_ts") == ts]
    assert any("resolved" in str(r.body).lower() for r in follow_ups)
    # The second burst's alerts went into the incident: PagerDuty under its key, Slack in its thread.
    grouped_pages = [r.body for r in later if r.path.startswith(PAGERDUTY_PATH)]
    assert grouped_pages and {page["dedup_key"] for page in grouped_pages} == {incident_id}
    assert all(r.body.get("thread_ts") == ts for r in later if r.path.startswith(SLACK_POST_PATH))
    assert {event["dedup_key"] for event in _incident_events(server.requests(), "trigger")} == {incident_id}
    rows = worker.query(
        "SELECT status, count() FROM halluwatch.alerts FINAL "
        f"WHERE created_at >= '{(datetime.now(UTC) - timedelta(hours=1)):%Y-%m-%d %H:%M:%S}' GROUP BY status"
    )
    assert dict(rows).get("grouped", 0) >= 5
