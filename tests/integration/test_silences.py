"""Silences end to end: set with `halluwatch silence`, honoured by a real worker's alert router.

Real parts: the `halluwatch` command and a `halluwatch worker` process on one embedded
ClickHouse directory (chDB admits one process at a time, so the commands run while the
worker is stopped), alerts on a Tansu broker, the local fake Slack and PagerDuty servers,
and PagerDuty's signed webhook posted to the worker's own HTTP endpoint.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import replace
from pathlib import Path

import pytest

from pipeline.alerting.alert import Alert
from pipeline.tools.demo_broker import TansuBroker
from tests.integration.support import WorkerProcess, produce
from tests.servers import AlertingServer
from tests.unit.test_alert_render import make_alert
from tests.unit.test_pagerduty_webhook import SECRET, event, sign

pytestmark = pytest.mark.usefixtures("exported_model")

QUIET = make_alert(trace_id="a" * 32)  # support-bot, route "page": Slack and PagerDuty
LOUD = replace(make_alert(trace_id="b" * 32), service="checkout")
LATER = make_alert(trace_id="c" * 32)  # support-bot again, once the silence is expired


def _halluwatch(data_dir: Path, *args: str) -> str:
    env = {**os.environ, "HALLUWATCH_DATA_DIR": str(data_dir)}
    done = subprocess.run([sys.executable, "-m", "pipeline.cli", *args], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _config(path: Path, server: AlertingServer) -> str:
    alerting = {
        "slack_bot_token": "xoxb-test",
        "slack_base_url": server.slack_base_url,
        "pagerduty_routing_key": "pd-routing-key",
        "pagerduty_url": server.pagerduty_url,
        "silence_refresh_seconds": 1,
    }
    path.write_text(json.dumps({"alerting": alerting}))  # JSON is YAML
    return str(path)


def _send(worker: WorkerProcess, bootstrap: str, *alerts: Alert) -> None:
    produce(bootstrap, worker.alerts_topic, [(a.trace_id.encode(), a.to_json()) for a in alerts])


def _posted_traces(server: AlertingServer) -> list[str]:
    """The trace of every Slack post and page received, sorted."""
    traces = [a.trace_id for a in (QUIET, LOUD, LATER)]
    return sorted(trace for request in server.requests() for trace in traces if trace in json.dumps(request.body))


def _webhook(port: int, body: bytes, signature: str) -> tuple[int, str]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/pagerduty/webhook",
        data=body,
        headers={"Content-Type": "application/json", "X-PagerDuty-Signature": signature},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 - an http:// URL built here
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def test_a_silenced_alert_is_recorded_not_sent_and_stays_unsent_after_the_silence_ends(
    tansu: TansuBroker, topic_prefix: str, tmp_path: Path
):
    data_dir = tmp_path / "worker"
    added = _halluwatch(data_dir, "silence", "add", "--match", "service=support-bot", "--match", "detector=grounding",
                        "--duration", "2h", "--reason", "known retriever outage", "--by", "alice")  # fmt: skip
    (silence_id,) = re.findall(r"^silence ([0-9a-f]{12}) set: detector=grounding,service=support-bot", added)
    assert silence_id in _halluwatch(data_dir, "silence", "list")

    with AlertingServer() as server:
        config = _config(tmp_path / "halluwatch.yaml", server)
        worker = WorkerProcess(tansu.bootstrap, topic_prefix, data_dir, config=config,
                               ui__pagerduty_webhook_secret=SECRET)  # fmt: skip
        worker.start()
        try:
            _send(worker, tansu.bootstrap, QUIET, LOUD)
            worker.wait_for("halluwatch_alert_deliveries_total", 4, timeout_seconds=120)  # two each
            worker.wait_for("halluwatch_rows_written_total", 4)  # the alerts rows a webhook lands on
            # PagerDuty's people acknowledge the incident of the alert that went out.
            ack = json.dumps(event(incident_key=LOUD.alert_id)).encode()
            assert _webhook(worker.metrics_port, ack, sign(ack, "not-the-secret")) == (
                401,
                "missing or invalid X-PagerDuty-Signature",
            )
            assert _webhook(worker.metrics_port, ack, sign(ack)) == (200, "applied")
        finally:
            worker.stop()
        assert _posted_traces(server) == [LOUD.trace_id, LOUD.trace_id]  # one Slack post, one page

        rows = worker.query(
            "SELECT trace_id, destination, status, error, incident_status, acknowledged_by "
            "FROM halluwatch.alerts FINAL ORDER BY trace_id, destination"
        )
        note = f"silence {silence_id} by alice: known retriever outage"
        assert rows == [
            (QUIET.trace_id, "pagerduty", "silenced", note, "", ""),
            (QUIET.trace_id, "slack:#halluwatch-alerts", "silenced", note, "", ""),
            (LOUD.trace_id, "pagerduty", "delivered", "", "acknowledged", "Dana Oncall"),
            (LOUD.trace_id, "slack:#halluwatch-alerts", "delivered", "", "", ""),
        ]

        # Expired, the silence lets new alerts through; the one it kept stays unsent when replayed.
        assert _halluwatch(data_dir, "silence", "expire", silence_id).startswith(f"silence {silence_id} expired")
        assert "no silences in force" in _halluwatch(data_dir, "silence", "list")
        worker.start()
        try:
            _send(worker, tansu.bootstrap, QUIET, LATER)
            worker.wait_for("halluwatch_alert_deliveries_total", 2, timeout_seconds=120)
            time.sleep(3)  # time for a (wrong) post of the replayed alert to arrive
        finally:
            worker.stop()
        assert _posted_traces(server) == [LOUD.trace_id, LOUD.trace_id, LATER.trace_id, LATER.trace_id]
    statuses = worker.query("SELECT trace_id, status FROM halluwatch.alerts FINAL ORDER BY trace_id, destination")
    assert [status for trace, status in statuses if trace == QUIET.trace_id] == ["silenced", "silenced"]
    assert [status for trace, status in statuses if trace == LATER.trace_id] == ["delivered", "delivered"]
