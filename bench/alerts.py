"""Alert latency: an LLM span produced to Kafka -> the Slack request for its alert, through one worker.

Starts a broker (``--broker``: embedded Tansu by default, or Apache Kafka; bench/brokers.py),
a local fake Slack Web API (``tests.servers.AlertingServer``) and `halluwatch worker`, warms the
worker up with one alerting trace (discarded), then produces ``--traces`` fresh copies of the
built-in hr-assistant trace that grounding and contradiction both flag, one every ``--interval``
seconds, keyed by trace id like the collector's ``partition_traces_by_id``.  Latency per trace =
when the fake Slack server received the ``chat.postMessage`` naming the trace id, minus when the
produce was acked (``flush()`` returned).  The Kafka timestamps of the findings and alert records split it
into the three stages (spans, agreement, router).  ``--runs`` repeats that (a fresh worker and
topics each run) and pools the traces; with ``--broker both`` every run is made on Tansu and then
on Kafka, and the summary gives each broker's percentiles and the ratio Kafka / Tansu.

    .venv/bin/python bench/alerts.py [--traces 40] [--interval 1.0] [--batch-max-wait 0.5] [--runs 1]
                                     [--broker tansu|kafka|both] [--json]

The ONNX export of the embedding model is cached under ``$HALLUWATCH_MODEL_CACHE``
(default ``~/.cache/halluwatch/models``), so only the first run ever exports it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import brokers  # bench/, on the path as the script's folder
from confluent_kafka import Message

from pipeline.alerting.stage import ROUTER_BATCH, ROUTER_BATCH_SECONDS
from pipeline.config.alerting import default_routes
from pipeline.config.settings import Settings
from pipeline.tools.example_traces import EXAMPLES, example_traces
from tests.integration.support import WorkerProcess, consume_all, consume_findings, produce
from tests.servers import SLACK_POST_PATH, AlertingServer

# The hr-assistant answer that invents "150%": grounding and contradiction agree -> one Slack post.
ALERTING_EXAMPLE = "seed_rag_cited_invented"
WARM_UP_TIMEOUT_SECONDS = 300  # group join, table recovery, a model export on a cold cache
DRAIN_TIMEOUT_SECONDS = 60
# Above the bench's rate, so that no alert waits for a slot or goes out in a digest (default 20).
MAX_PER_MINUTE = 600


@dataclass(frozen=True)
class Sample:
    """One produced trace: its id, and when its produce was acked (both clocks) and how long that took."""

    trace_id: str
    acked_wall: float
    acked_monotonic: float
    produce_seconds: float


def alerting_trace() -> tuple[str, bytes]:
    """A fresh copy (new trace id) of the alerting example: (hex trace id, OTLP protobuf)."""
    index = [example.name for example in EXAMPLES].index(ALERTING_EXAMPLE)
    trace = example_traces()[index]
    return trace.resource_spans[0].scope_spans[0].spans[0].trace_id.hex(), trace.SerializeToString()


def worker_settings(server: AlertingServer, batch_max_wait: float) -> dict[str, str]:
    """Worker settings (``WorkerProcess`` keyword form): Slack at the fake server, no rate limit in the way."""
    routes = {
        name: {**route.model_dump(mode="json"), "max_per_minute": MAX_PER_MINUTE}
        for name, route in default_routes().items()
    }
    return {
        "alerting__slack_bot_token": "xoxb-bench",
        "alerting__slack_base_url": server.slack_base_url,  # ends in "/api/", as slack-sdk wants
        "alerting__routes": json.dumps(routes),
        "batch_max_wait_seconds": str(batch_max_wait),
        "log_level": "warn",
    }


def produce_one(bootstrap: str, topic: str) -> Sample:
    """Produce one alerting trace, keyed by its trace id, and wait for the broker's ack."""
    trace_id, value = alerting_trace()
    started = time.monotonic()
    produce(bootstrap, topic, [(trace_id.encode(), value)])
    acked = time.monotonic()
    return Sample(trace_id, time.time(), acked, acked - started)


def slack_arrivals(server: AlertingServer, trace_ids: Iterable[str]) -> dict[str, float]:
    """trace id -> ``received_at`` (monotonic) of the first Slack post naming it."""
    wanted = set(trace_ids)
    arrivals: dict[str, float] = {}
    for request in server.requests(SLACK_POST_PATH):
        body = json.dumps(request.body)
        for trace_id in wanted - arrivals.keys():
            if trace_id in body:
                arrivals[trace_id] = request.received_at
    return arrivals


def wait_for_alerts(server: AlertingServer, worker: WorkerProcess, samples: Sequence[Sample], timeout: float) -> None:
    """Block until every sample's Slack post arrived; SystemExit with the worker log otherwise."""
    deadline = time.monotonic() + timeout
    while len(slack_arrivals(server, (s.trace_id for s in samples))) < len(samples):
        if time.monotonic() > deadline or (worker.process is not None and worker.process.poll() is not None):
            raise SystemExit(f"alerts missing (worker exited, or {timeout:.0f}s passed); log:\n{worker.log()}")
        time.sleep(0.05)


def produce_spaced(bootstrap: str, topic: str, count: int, interval: float) -> list[Sample]:
    """Produce ``count`` traces on a fixed schedule, one every ``interval`` seconds."""
    samples: list[Sample] = []
    start = time.monotonic()
    for i in range(count):
        time.sleep(max(start + i * interval - time.monotonic(), 0.0))
        samples.append(produce_one(bootstrap, topic))
    return samples


def record_times(messages: Iterable[Message]) -> dict[str, float]:
    """Key (trace id) -> the latest Kafka CreateTime (wall clock, seconds) of ``messages``."""
    latest: dict[str, float] = {}
    for message in messages:
        key = (message.key() or b"").decode()
        latest[key] = max(latest.get(key, 0.0), message.timestamp()[1] / 1000)
    return latest


def percentiles(values: Sequence[float]) -> dict[str, float]:
    """n, min, p50, p90, p99 and max of ``values`` (linear interpolation between ranks)."""
    cuts = statistics.quantiles(values, n=100, method="inclusive") if len(values) > 1 else [values[0]] * 99
    return {"n": len(values), "min": min(values), "p50": cuts[49], "p90": cuts[89], "p99": cuts[98], "max": max(values)}


def stage_latencies(
    samples: Sequence[Sample], arrivals: dict[str, float], findings: dict[str, float], alerts: dict[str, float]
) -> dict[str, list[float]]:
    """Per-trace seconds: end to end, and split at the findings and alert records' CreateTime."""
    to_wall = time.time() - time.monotonic()  # one machine: the two clocks differ by a constant
    stages: dict[str, list[float]] = {"end to end": [], "spans stage": [], "agreement stage": [], "router + Slack": []}
    for s in samples:
        received = arrivals[s.trace_id]
        stages["end to end"].append(received - s.acked_monotonic)
        if s.trace_id in findings and s.trace_id in alerts:
            stages["spans stage"].append(findings[s.trace_id] - s.acked_wall)
            stages["agreement stage"].append(alerts[s.trace_id] - findings[s.trace_id])
            stages["router + Slack"].append(received + to_wall - alerts[s.trace_id])
    return stages


def mean_batch_seconds(worker: WorkerProcess) -> float:
    """The spans stage's mean time per batch (detect, ClickHouse write, publish), from its histogram."""
    return worker.metric("halluwatch_batch_seconds_sum") / max(worker.metric("halluwatch_batch_seconds_count"), 1)


def measure(args: argparse.Namespace, broker: brokers.Broker, workdir: Path) -> dict[str, Any]:
    """Fake Slack and a worker on ``broker``; warm up; produce the traces; the raw latencies."""
    with AlertingServer() as server:
        worker = WorkerProcess(
            broker.bootstrap,
            f"benchalerts{uuid.uuid4().hex[:6]}",
            workdir,
            **worker_settings(server, args.batch_max_wait),
        )
        brokers.create_input_topic(worker)
        worker.start()
        try:
            warm_up = [produce_one(broker.bootstrap, worker.input_topic)]
            wait_for_alerts(server, worker, warm_up, WARM_UP_TIMEOUT_SECONDS)
            samples = produce_spaced(broker.bootstrap, worker.input_topic, args.traces, args.interval)
            wait_for_alerts(server, worker, samples, DRAIN_TIMEOUT_SECONDS)
            findings_total = int(worker.metric("halluwatch_agreement_findings_total"))
            alerts_total = int(worker.metric("halluwatch_alerts_total"))
            batch_seconds = mean_batch_seconds(worker)
        finally:
            worker.stop()
        findings = record_times(consume_findings(broker.bootstrap, worker.findings_topic, findings_total)[0])
        alerts = record_times(consume_all(broker.bootstrap, worker.alerts_topic, alerts_total))
        arrivals = slack_arrivals(server, (s.trace_id for s in samples))
    return {
        "stages": stage_latencies(samples, arrivals, findings, alerts),
        "produce_seconds": [s.produce_seconds for s in samples],
        "spans_batch_seconds_mean": batch_seconds,
    }


def summarize(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One broker's runs: percentiles over all their traces, and each run's end-to-end median."""
    stages: dict[str, list[float]] = {}
    for run in runs:
        for name, values in run["stages"].items():
            stages.setdefault(name, []).extend(values)
    return {
        "stages": {name: percentiles(values) for name, values in stages.items() if values},
        "end_to_end_p50_per_run": [statistics.median(run["stages"]["end to end"]) for run in runs],
        "produce_ack_seconds_median": statistics.median(v for run in runs for v in run["produce_seconds"]),
        "spans_batch_seconds_mean": statistics.fmean(run["spans_batch_seconds_mean"] for run in runs),
    }


def ratios(reports: dict[str, dict[str, Any]]) -> dict[str, float]:
    """Per stage, Kafka's p50 over Tansu's (empty unless both ran)."""
    out: dict[str, float] = {}
    if brokers.TANSU in reports and brokers.KAFKA in reports:
        for name, tansu in reports[brokers.TANSU]["stages"].items():
            kafka = reports[brokers.KAFKA]["stages"].get(name)
            if kafka is None:
                continue
            ratio = brokers.kafka_over_tansu({brokers.TANSU: tansu["p50"], brokers.KAFKA: kafka["p50"]})
            if ratio is not None:
                out[f"{name} p50"] = ratio
    return out


def settings_report(args: argparse.Namespace) -> dict[str, Any]:
    """The worker settings that set the latency floor."""
    return {
        "broker": args.broker,
        "runs": args.runs,
        "traces": args.traces,
        "interval_seconds": args.interval,
        "spans_stage_within_seconds": args.batch_max_wait,
        "agreement_stage_within_seconds": args.batch_max_wait,
        "router_within_seconds": ROUTER_BATCH_SECONDS,
        "router_max": ROUTER_BATCH,
        "batch_max_messages": Settings.model_fields["batch_max_messages"].default,
        "route_max_per_minute": MAX_PER_MINUTE,
        "model_cache": str(Settings().model_cache),
    }


def print_summary(report: dict[str, Any]) -> None:
    settings = report["settings"]
    runs = f"{settings['runs']} runs of " if settings["runs"] > 1 else ""
    print(
        f"alert latency, produce acked -> Slack request received; {runs}{settings['traces']} hr-assistant traces, "
        f"one every {settings['interval_seconds']}s, after one warm-up trace (discarded)"
    )
    stages_wait, router_wait = settings["spans_stage_within_seconds"], settings["router_within_seconds"]
    print(
        f"worker: spans and agreement stages take_events(max {settings['batch_max_messages']}, within={stages_wait}s); "
        f"router take_events(max {settings['router_max']}, within={router_wait}s); "
        f"routes max_per_minute {settings['route_max_per_minute']}"
    )
    for kind, broker in report["brokers"].items():
        print(f"\n## {kind}\n")
        print(f"produce() until acked (new producer each): median {broker['produce_ack_seconds_median'] * 1000:.0f} ms")
        batch_ms = broker["spans_batch_seconds_mean"] * 1000
        print(f"spans stage batch (detect + ClickHouse + publish): mean {batch_ms:.0f} ms")
        per_run = " / ".join(f"{p50 * 1000:.0f}" for p50 in broker["end_to_end_p50_per_run"])
        print(f"end to end p50 per run: {per_run} ms\n")
        print("| stage | n | min | p50 | p90 | p99 | max |")
        print("|---|---|---|---|---|---|---|")
        for name, p in broker["stages"].items():
            cells = " | ".join(f"{p[key] * 1000:.0f}" for key in ("min", "p50", "p90", "p99", "max"))
            print(f"| {name} (ms) | {p['n']} | {cells} |")
    if report["kafka_over_tansu"]:
        print(
            "\nKafka / Tansu, p50: "
            + ", ".join(f"{k.removesuffix(' p50')} {v:.2f}" for k, v in report["kafka_over_tansu"].items())
        )
    print("\nstages split at the Kafka CreateTime of the trace's findings and alert records (ms resolution)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces", type=int, default=40, help="measured traces (after one warm-up)")
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between produced traces")
    default_wait = Settings.model_fields["batch_max_wait_seconds"].default
    parser.add_argument(
        "--batch-max-wait", type=float, default=default_wait, help="worker batch_max_wait_seconds (spans, agreement)"
    )
    parser.add_argument("--runs", type=int, default=1, help="runs per broker, a fresh worker each (traces pooled)")
    brokers.add_broker_argument(parser)
    parser.add_argument("--json", action="store_true", help="print the report as JSON instead")
    args = parser.parse_args()
    runs: dict[str, list[dict[str, Any]]] = {}
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        started = brokers.start_all(stack, args.broker, tmp)
        for run in range(args.runs):
            for kind, broker in started.items():  # alternating, run for run
                runs.setdefault(kind, []).append(measure(args, broker, tmp / f"worker-{kind}-{run}"))
    reports = {kind: summarize(kind_runs) for kind, kind_runs in runs.items()}
    report = {"settings": settings_report(args), "brokers": reports, "kafka_over_tansu": ratios(reports)}
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print_summary(report)


if __name__ == "__main__":
    main()
