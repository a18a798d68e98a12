"""Chaos run for alert delivery: every alert reaches each destination once, through faults and kills.

A pair of real `halluwatch worker` processes in one consumer group on the Tansu broker, fed
the example traces over and over under fresh trace ids (some agree on a hallucination,
some do not). Slack and PagerDuty are a local fake that fails in bursts
(:mod:`tests.soak.flaky_server`); every ``CHAOS_SECONDS`` one worker is SIGKILLed or
stopped and started again (a forced rebalance), in turn. At the end the fake is healed and
the test checks, from the fake's own count of what it accepted:

- every alert the workers raised reached each of its route's destinations exactly once;
- every copy of an example that alerts raised its alert (none lost on the way);
- nothing reached a destination for a trace that raised no alert;
- both workers still run (none exited on its own) and their logs hold no traceback.

``SOAK_SECONDS`` sets how long traffic and chaos last (default: a short run for
``make test``); ``make soak`` runs it for 20 minutes. A delivery repeated because a worker
was SIGKILLed after the destination accepted it but before its record of the delivery
reached the broker cannot be told apart from the outside; the test reports such repeats
(first acceptance within :data:`KILL_WINDOW_SECONDS` before a kill) and fails on any other.
"""

from __future__ import annotations

import json
import os
import random
import signal
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from pipeline.alerting.pagerduty import PAGERDUTY
from pipeline.alerting.routes import usable_types
from pipeline.alerting.slack import SLACK_BOT
from pipeline.config.alerting import AlertingSettings
from pipeline.tools.demo_broker import TansuBroker
from pipeline.tools.example_traces import example_traces
from tests.integration.support import (
    WorkerProcess,
    alerting_worker_config,
    consume_distinct,
    produce,
    wait_until_committed,
    with_trace_id,
)
from tests.servers import PAGERDUTY_PATH, SLACK_POST_PATH
from tests.soak.flaky_server import FlakyAlertingServer, by_id_and_short_id, trace_ids_in

pytestmark = pytest.mark.usefixtures("exported_model")

SOAK_SECONDS = float(os.environ.get("SOAK_SECONDS", "150"))
ROUND_SECONDS = 6.0  # one copy of every example trace per round
CHAOS_SECONDS = min(120.0, max(SOAK_SECONDS / 3, 40.0))
KILL_WINDOW_SECONDS = 1.0
DRAIN_SECONDS = 300.0  # after the traffic: retries back off up to retry_max_seconds
PATHS = {SLACK_BOT: SLACK_POST_PATH, PAGERDUTY: PAGERDUTY_PATH}
ALERTING = {
    "request_timeout_seconds": 2,  # the fake's hangs outlast it
    "request_retries": 0,
    "retry_initial_seconds": 1,
    "retry_max_seconds": 8,
    "delivery_attempts": 50,  # outlasts every fault window: nothing is given up on
}


@dataclass
class Traffic:
    """The traces sent so far: trace id -> index of the example it copies."""

    example_of: dict[str, int] = field(default_factory=dict)
    sent: int = 0


@dataclass
class Chaos:
    """What the run did to the workers, and when (``time.monotonic()``)."""

    kills: list[float] = field(default_factory=list)
    rebalances: int = 0


def _send_rounds(bootstrap: str, topic: str, traffic: Traffic, until: float, rng: random.Random) -> None:
    examples = example_traces()
    while time.monotonic() < until:
        started = time.monotonic()
        batch = []
        for index, example in enumerate(examples):
            trace_id = rng.randbytes(16)
            traffic.example_of[trace_id.hex()] = index
            batch.append((trace_id.hex().encode(), with_trace_id(example, trace_id)))
        traffic.sent += produce(bootstrap, topic, batch)
        time.sleep(max(ROUND_SECONDS - (time.monotonic() - started), 0.0))


def _shake(workers: list[WorkerProcess], chaos: Chaos, until: float) -> None:
    """Every CHAOS_SECONDS, SIGKILL one worker or stop it gracefully (a rebalance), and start it again."""
    turn = 0
    while time.monotonic() + CHAOS_SECONDS < until:
        time.sleep(CHAOS_SECONDS)
        worker = workers[turn % len(workers)]
        if turn % 2 == 0:
            chaos.kills.append(time.monotonic())
            worker.stop(signal.SIGKILL)
        else:
            assert worker.stop() == 0, worker.log()
            chaos.rebalances += 1
        time.sleep(1)
        worker.start()
        turn += 1


def _expected(alerts: list[dict[str, object]], settings: AlertingSettings) -> Counter[tuple[str, str]]:
    """(trace id, destination path) -> how many of the alerts raised go there."""
    return Counter(
        (str(alert["trace_id"]), PATHS[kind])
        for alert in alerts
        for kind in usable_types(settings, str(alert["route"]))
    )


@dataclass
class Delivered:
    """What the fake accepted: (trace id, destination path) -> how many requests, and when the first came."""

    counts: Counter[tuple[str, str]] = field(default_factory=Counter)
    first_at: dict[tuple[str, str], float] = field(default_factory=dict)


def _delivered(server: FlakyAlertingServer, traces: set[str]) -> Delivered:
    delivered, known = Delivered(), by_id_and_short_id(traces)
    for path in PATHS.values():
        for request in server.delivered(path):
            for trace_id in trace_ids_in(request, known):
                delivered.counts[(trace_id, path)] += 1
                delivered.first_at.setdefault((trace_id, path), request.received_at)
    return delivered


@pytest.mark.timeout(SOAK_SECONDS + DRAIN_SECONDS + 600)
def test_every_alert_is_delivered_once_through_faults_kills_and_rebalances(
    tansu: TansuBroker, topic_prefix: str, tmp_path: Path
) -> None:
    rng = random.Random(20261127)
    with FlakyAlertingServer() as server:
        config = alerting_worker_config(server, alerting=dict(ALERTING))  # type: ignore[arg-type]
        (tmp_path / "halluwatch.yaml").write_text(yaml.safe_dump(config))
        workers = [
            WorkerProcess(tansu.bootstrap, topic_prefix, tmp_path / name, config=str(tmp_path / "halluwatch.yaml"))
            for name in ("worker-a", "worker-b")
        ]
        traffic, chaos = Traffic(), Chaos()
        for worker in workers:
            worker.start()
        try:
            until = time.monotonic() + SOAK_SECONDS
            shaker = threading.Thread(target=_shake, args=(workers, chaos, until), daemon=True)
            shaker.start()
            _send_rounds(tansu.bootstrap, workers[0].input_topic, traffic, until, rng)
            shaker.join()
            server.heal()
            healed_at = time.monotonic()
            group, spans = workers[0].group, workers[0].input_topic
            wait_until_committed(tansu.bootstrap, group, spans, traffic.sent, timeout_seconds=DRAIN_SECONDS)
            settings = AlertingSettings(**config["alerting"])
            deadline = time.monotonic() + DRAIN_SECONDS
            while True:  # until every alert raised so far reached its destinations, and stayed so
                alerts = [json.loads(m.value()) for m in consume_distinct(tansu.bootstrap, workers[0].alerts_topic,
                          10**6, timeout_seconds=5, identity=lambda m: json.loads(m.value())["alert_id"])]  # fmt: skip
                expected = _expected(alerts, settings)
                delivered = _delivered(server, set(traffic.example_of)).counts
                if all(delivered[key] >= count for key, count in expected.items()) or time.monotonic() > deadline:
                    drain_seconds = time.monotonic() - healed_at
                    break
                time.sleep(5)
            time.sleep(10)  # time for a repeat to show
            exited = {
                w.log_path.parent.name: w.process.poll() for w in workers if w.process and w.process.poll() is not None
            }
        finally:
            for worker in workers:
                worker.stop()

        final = _delivered(server, set(traffic.example_of))
        faults = server.faults_met()

    delivered = final.counts
    missing = sorted(key for key, count in expected.items() if delivered[key] < count)
    unwanted = sorted(key for key, count in delivered.items() if count and key not in expected)
    repeats = {key: count for key, count in delivered.items() if count > expected[key] > 0}
    at_kill = {
        key for key in repeats if any(0 <= kill - final.first_at[key] <= KILL_WINDOW_SECONDS for kill in chaos.kills)
    }
    alerting_examples = {traffic.example_of[trace_id] for trace_id, _ in expected}
    raised = {str(alert["trace_id"]) for alert in alerts}
    lost = sorted(t for t, example in traffic.example_of.items() if example in alerting_examples and t not in raised)
    tracebacks = {w.log_path.parent.name: w.log_path.read_text(errors="replace").count("Traceback") for w in workers}

    by_route = Counter(alert["route"] for alert in alerts)
    summary = (
        f"{SOAK_SECONDS:.0f} s: {traffic.sent} traces sent, {len(raised)} alerts raised, "
        f"alerts by route {dict(by_route)}, {expected.total()} deliveries expected, {delivered.total()} accepted; "
        f"{len(chaos.kills)} SIGKILLs, {chaos.rebalances} rebalances; requests per fault {faults}; "
        f"repeats at a kill {len(at_kill)}; drained {drain_seconds:.0f} s after the destinations healed"
    )
    print(summary)
    assert not exited, f"workers that exited on their own (code): {exited}; {summary}"
    assert chaos.kills and chaos.rebalances, summary
    assert set(faults) >= {"5xx", "429", "hang", "up"}, summary
    assert not missing, f"{len(missing)} deliveries never made, e.g. {missing[:3]}; {summary}"
    assert not lost, f"{len(lost)} copies of alerting examples raised no alert, e.g. {lost[:3]}; {summary}"
    assert not unwanted, f"deliveries for traces that raised no alert: {unwanted[:3]}; {summary}"
    assert set(repeats) <= at_kill, f"repeated deliveries: {dict(list(repeats.items())[:5])}; {summary}"
    assert not any(tracebacks.values()), f"tracebacks in the logs: {tracebacks}"
