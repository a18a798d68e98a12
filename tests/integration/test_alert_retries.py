"""A failing destination gets each attempt once: no re-read repeats it, and stopping mid-wait is quiet.

A real `halluwatch worker` process on the Tansu broker, slack-sdk posting to a local fake
Slack that refuses with 503. Retry back-offs longer than the dropped-records watchdog's idle
window are the case that once made it re-read the waiting retries and repeat their attempts.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml

from pipeline.config.alerting import default_routes
from pipeline.config.watchdog_timing import IDLE_WINDOW_SECONDS
from pipeline.tools.demo_broker import TansuBroker
from pipeline.tools.example_traces import example_traces
from tests.integration.support import WorkerProcess, alerting_worker_config, produce, with_trace_id
from tests.servers import SLACK_POST_PATH, AlertingServer

pytestmark = pytest.mark.usefixtures("exported_model")

ATTEMPTS = 4
ALERTS = 3
# Waits of 1, 2 and 4 x BACKOFF seconds between the attempts: the last outlasts the watchdog's idle window.
BACKOFF = IDLE_WINDOW_SECONDS / 2
QUIET_LOG_MARKS = ("Traceback", "Crashed", "Restarting dead", "never delivered")


def _hr_alert_trace(trace_id: bytes = b"") -> tuple[bytes, bytes]:
    """The hr-assistant call that grounding and contradiction agree on (one alert, to Slack only), as a message."""
    trace = next(t for t in example_traces() if "150%" in str(t))
    trace_id = trace_id or trace.resource_spans[0].scope_spans[0].spans[0].trace_id
    return trace_id.hex().encode(), with_trace_id(trace, trace_id)


def _worker(
    tansu: TansuBroker, prefix: str, tmp_path: Path, server: AlertingServer, **alerting: object
) -> WorkerProcess:
    retries = {"request_retries": 0, "delivery_attempts": ATTEMPTS, **alerting}
    config = tmp_path / "halluwatch.yaml"
    config.write_text(yaml.safe_dump(alerting_worker_config(server, alerting=retries)))
    return WorkerProcess(tansu.bootstrap, prefix, tmp_path / "worker", config=str(config))


def _posts_of(server: AlertingServer, trace_id: bytes) -> int:
    return sum(trace_id.decode() in json.dumps(r.body) for r in server.requests(SLACK_POST_PATH))


def _noise(log: str) -> list[str]:
    return [line for line in log.splitlines() if any(mark in line for mark in QUIET_LOG_MARKS)]


def test_each_attempt_reaches_a_failing_destination_once(tansu: TansuBroker, topic_prefix, tmp_path):
    with AlertingServer() as server:
        server.set_down(503)
        worker = _worker(
            tansu, topic_prefix, tmp_path, server, retry_initial_seconds=BACKOFF, retry_max_seconds=4 * BACKOFF
        )
        # Alerts in several partitions of the retry topic: one agent reads them all, so while it
        # waits on one, the others' records wait behind it (and must not look lost).
        messages = [_hr_alert_trace(bytes([n]) * 16) for n in range(1, 1 + ALERTS)]
        worker.start()
        try:
            produce(tansu.bootstrap, worker.input_topic, messages)
            worker.wait_for("halluwatch_alert_dead_letters_total", ALERTS, timeout_seconds=240)
            time.sleep(IDLE_WINDOW_SECONDS * 2)  # time for any repeat the watchdog would cause
        finally:
            worker.stop()
        assert [_posts_of(server, key) for key, _ in messages] == [ATTEMPTS] * ALERTS
    log = worker.log_path.read_text(errors="replace")
    assert not _noise(log), _noise(log)
    rows = worker.query("SELECT status, attempts FROM halluwatch.alerts FINAL")
    assert rows == [("failed", ATTEMPTS)] * ALERTS


def test_a_worker_stopped_while_a_retry_waits_stops_quietly_and_delivers_once_after(
    tansu: TansuBroker, topic_prefix, tmp_path
):
    with AlertingServer() as server:
        server.set_down(503)
        worker = _worker(tansu, topic_prefix, tmp_path, server, retry_initial_seconds=20)
        key, trace = _hr_alert_trace()
        worker.start()
        try:
            produce(tansu.bootstrap, worker.input_topic, [(key, trace)])
            server.wait_for(1, path_prefix=SLACK_POST_PATH, timeout=120)
            worker.wait_for("halluwatch_alert_deliveries_total", 1)  # the retry is scheduled: it waits 20 s
            time.sleep(2)
        finally:
            assert worker.stop() == 0
        stopped_log = worker.log_path.read_text(errors="replace")
        assert not _noise(stopped_log), _noise(stopped_log)

        server.set_up()
        worker.start()
        try:
            server.wait_for(2, path_prefix=SLACK_POST_PATH, timeout=120)
            time.sleep(IDLE_WINDOW_SECONDS * 2)
        finally:
            worker.stop()
        assert _posts_of(server, key) == 2  # the failed attempt, then one delivery
    rows = worker.query("SELECT status, attempts FROM halluwatch.alerts FINAL")
    assert rows == [("delivered", 2)]


def test_a_worker_stopped_while_an_alert_waits_for_the_rate_limit_stops_promptly(
    tansu: TansuBroker, topic_prefix, tmp_path
):
    with AlertingServer() as server:
        routes = {name: route.model_dump(mode="json") for name, route in default_routes().items()}
        routes["slack"]["max_per_minute"] = 1
        worker = _worker(tansu, topic_prefix, tmp_path, server, routes=routes)
        first, second = _hr_alert_trace(bytes([1] * 16)), _hr_alert_trace(bytes([2] * 16))
        worker.start()
        try:
            produce(tansu.bootstrap, worker.input_topic, [first])
            server.wait_for(1, path_prefix=SLACK_POST_PATH, timeout=120)
            produce(tansu.bootstrap, worker.input_topic, [second])  # waits a minute for the route's next slot
            worker.wait_for("halluwatch_alerts_total", 2)
            time.sleep(3)
        finally:
            stopping = time.monotonic()
            assert worker.stop(timeout_seconds=30) == 0
        assert time.monotonic() - stopping < 20
        assert not _noise(worker.log_path.read_text(errors="replace"))

        worker.start()  # the slot is free again: the second alert goes out, the first is not repeated
        try:
            server.wait_for(2, path_prefix=SLACK_POST_PATH, timeout=120)
            time.sleep(IDLE_WINDOW_SECONDS * 2)
        finally:
            worker.stop()
        assert (_posts_of(server, first[0]), _posts_of(server, second[0])) == (1, 1)
