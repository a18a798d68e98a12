"""Ingest throughput: mixed OTLP traffic from Kafka to ClickHouse through one worker process.

Pre-loads a topic on a broker (``--broker``: embedded Tansu by default, or Apache Kafka;
bench/brokers.py) with traces of ``--spans-per-trace`` spans
of which one is an LLM span, then starts `halluwatch worker` and samples its Prometheus
counters: the rate counts spans from the first sample that saw progress until every LLM
span's row is in ClickHouse, so group join and start-up are excluded.  Repeats ``--runs`` times
(a fresh topic and database each) and prints the median.  ``--baseline REF`` also runs commit
REF's worker (its tree first on the worker's ``PYTHONPATH``) on the same traffic, run for run
interleaved with this tree's, and prints the ratio of the medians.  ``--broker both`` runs the
same traffic on Tansu and on Kafka, run for run interleaved the same way, and prints each one's
median and the ratio Kafka / Tansu.

    .venv/bin/python bench/ingest.py [--traces 5000] [--spans-per-trace 20] [--runs 3] [--unkeyed] [--baseline REF]
                                     [--broker tansu|kafka|both] [--json]
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
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import brokers  # bench/, on the path as the script's folder
from baseline import code_tree

from pipeline.tools.example_traces import mixed_traffic
from tests.integration.support import WorkerProcess, produce


def one_run(
    broker: brokers.Broker, args: argparse.Namespace, workdir: Path, tree: Path | None, seed: int
) -> dict[str, float]:
    traces = list(mixed_traffic(args.traces, spans_per_trace=args.spans_per_trace, seed=seed))
    spans = args.traces * args.spans_per_trace
    if args.unkeyed:  # the collector without partition_traces_by_id: batches of 10 traces, no key
        messages = [
            (None, b"".join(t.SerializeToString() for t in traces[i : i + 10])) for i in range(0, len(traces), 10)
        ]
    else:
        messages = [
            (t.resource_spans[0].scope_spans[0].spans[0].trace_id.hex().encode(), t.SerializeToString()) for t in traces
        ]
    worker = WorkerProcess(broker.bootstrap, f"b{uuid.uuid4().hex[:8]}", workdir, log_level="warn")
    worker.code = tree
    brokers.create_input_topic(worker)
    produce(broker.bootstrap, worker.input_topic, messages)
    worker.start()
    llm_rows_metric = 'halluwatch_rows_written_total{table="llm_calls"}'
    first: tuple[float, float] | None = None  # (time, spans decoded) when progress was first seen
    deadline = time.monotonic() + 600
    try:
        while time.monotonic() < deadline:
            now, decoded = time.monotonic(), worker.metric("halluwatch_spans_total")
            if first is None and decoded > 0:
                first = (now, decoded)
            # Done means durable: every LLM span's row is in ClickHouse.
            if worker.metric(llm_rows_metric) >= args.traces:
                break
            time.sleep(0.05)
        else:
            raise SystemExit(f"worker did not finish within 600s; log:\n{worker.log()}")
    finally:
        worker.stop()
    assert first is not None
    seconds = now - first[0]
    return {"spans_per_second": (spans - first[1]) / seconds, "seconds": seconds, "spans": spans}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces", type=int, default=5000)
    parser.add_argument("--spans-per-trace", type=int, default=20)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--unkeyed", action="store_true", help="mixed-trace unkeyed batches (re-keyed path)")
    parser.add_argument("--baseline", metavar="REF", help="also run this commit's worker, interleaved, for a ratio")
    brokers.add_broker_argument(parser)
    parser.add_argument("--json", action="store_true", help="also print the runs and medians as JSON, last")
    args = parser.parse_args()
    rates: dict[tuple[str, str], list[float]] = {}  # (broker, tree label) -> spans/s per run
    # (broker, tree label) -> per run, the CPU seconds each started broker used (the idle one too)
    broker_cpu: dict[tuple[str, str], list[dict[str, float]]] = {}
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        started = brokers.start_all(stack, args.broker, tmp)
        trees: dict[str, Path | None] = {"current": None}
        if args.baseline:
            trees = {f"baseline {args.baseline}": stack.enter_context(code_tree(args.baseline)), **trees}
        for run in range(args.runs):
            seed = int(time.time())  # new traffic each run, the same for every tree and broker
            for kind, broker in started.items():
                for label, tree in trees.items():
                    workdir = tmp / f"run{run}-{kind}-{label.split()[0]}"
                    cpu_before = {other: brokers.cpu_seconds(b) for other, b in started.items()}
                    result = one_run(broker, args, workdir, tree, seed)
                    cpu = brokers.cpu_used(started, cpu_before)
                    rates.setdefault((kind, label), []).append(result["spans_per_second"])
                    broker_cpu.setdefault((kind, label), []).append(cpu)
                    cpu_note = ", ".join(f"{other} {seconds:.1f}s" for other, seconds in cpu.items())
                    print(
                        f"run {run + 1} {kind} {label}: {result['spans']:.0f} spans, {result['seconds']:.2f}s from "
                        f"first progress to the last llm_calls row = {result['spans_per_second']:,.0f} spans/s"
                        + (f"; broker CPU over the run (produce to worker stop): {cpu_note}" if cpu_note else "")
                    )
    layout = "unkeyed batches of 10 traces" if args.unkeyed else "keyed, one message per trace"
    print(f"{args.traces} traces x {args.spans_per_trace} spans, 1 LLM span per trace, {layout}:")
    medians = {key: statistics.median(runs) for key, runs in rates.items()}
    for (kind, label), value in medians.items():
        own = [run[kind] for run in broker_cpu[kind, label] if kind in run]
        cpu_note = f", its broker's CPU median {statistics.median(own):.1f}s per run" if own else ""
        print(f"  {kind} {label}: median {value:,.0f} spans/s{cpu_note}")
    baseline_ratios: dict[str, float] = {}
    if args.baseline:
        for kind in started:
            baseline, current = (medians[kind, label] for label in trees)
            baseline_ratios[kind] = current / baseline
            print(f"  {kind} ratio current / baseline {args.baseline}: {current / baseline:.2f}")
    broker_ratios: dict[str, float] = {}
    for label in trees:
        ratio = brokers.kafka_over_tansu({kind: medians[kind, label] for kind in started})
        if ratio is not None:
            broker_ratios[label] = ratio
            print(f"  {label} ratio Kafka / Tansu: {ratio:.2f}")
    if args.json:
        report = {
            "traces": args.traces,
            "spans_per_trace": args.spans_per_trace,
            "layout": layout,
            "brokers": {
                kind: {
                    label: {
                        "spans_per_second": rates[kind, label],
                        "median": medians[kind, label],
                        "broker_cpu_seconds": broker_cpu[kind, label],
                    }
                    for label in trees
                }
                for kind in started
            },
            "ratio_current_over_baseline": baseline_ratios,
            "ratio_kafka_over_tansu": broker_ratios,
        }
        print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
