"""Cost of the log join (pipeline/log_join/join.py): CPU per operation and memory per 1k in-flight spans.

Spans and records are made once by the real OpenTelemetry SDK (an openai-v2-style
content-free ``chat`` span with a system, a user and a choice record, decoded and
normalized as the worker does), then cloned with fresh span ids.  For N spans in flight:
offer every span, offer every span's records, scan for due entries while all windows are
open (the timer's cost per tick), release them all at the window close (merge), settle.
Memory is measured in a separate pass (tracemalloc slows everything down), as is the JSON
the stage puts on the join topic and in the table's changelog.

    .venv/bin/python bench/log_join.py [--sizes 1000 10000 100000] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import tracemalloc
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from detectors.llm_call import LLMCall
from pipeline.config.stream import JoinConfig
from pipeline.ingest.normalize import normalize_span
from pipeline.ingest.otlp_logs import GenAIRecord, decode_logs, genai_records
from pipeline.ingest.otlp_traces import decode_traces, iter_spans
from pipeline.log_join.join import LogJoin
from tests.genai_logs import Telemetry, deprecated_events

T0 = 1_800_000_000.0


def template() -> tuple[LLMCall, list[GenAIRecord]]:
    telemetry = Telemetry()
    with telemetry.chat_span():
        deprecated_events(telemetry)
    spans, logs = telemetry.payloads()
    (ctx,) = iter_spans(decode_traces(spans))
    call = normalize_span(ctx)
    assert call is not None
    return call, genai_records(decode_logs(logs))[call.trace_id, call.span_id]


def workload(n: int) -> list[LLMCall]:
    call, _ = template()
    # Two LLM spans per trace, as an agent step with a retry would have.
    return [replace(call, trace_id=f"{i // 2:032x}", span_id=f"{i:016x}") for i in range(n)]


def timed_run(n: int, records: list[GenAIRecord]) -> dict[str, float]:
    calls = workload(n)
    join = LogJoin(JoinConfig(window_seconds=5.0, max_entries=n + 1))
    started = time.perf_counter()
    for call in calls:
        join.offer_span(call, T0)
    spans_done = time.perf_counter()
    for call in calls:
        join.offer_records(call.trace_id, call.span_id, records, T0 + 1)
    records_done = time.perf_counter()
    assert join.due(T0 + 2) == []
    scan_done = time.perf_counter()
    released = join.due(T0 + 5)
    release_done = time.perf_counter()
    join.settle(released, T0 + 5)
    settle_done = time.perf_counter()
    assert len(released) == n and all(r.call is not None and r.call.answer for r in released)
    return {
        "offer_span_us": (spans_done - started) / n * 1e6,
        "offer_records_us": (records_done - spans_done) / n * 1e6,
        "scan_ms_per_1k": (scan_done - records_done) / n * 1e6,
        "release_us": (release_done - scan_done) / n * 1e6,
        "settle_us": (settle_done - release_done) / n * 1e6,
    }


def memory(n: int, records: list[GenAIRecord]) -> tuple[float, float]:
    """(KiB of Python heap, KiB of JSON) per 1,000 spans waiting with their records."""
    calls = workload(n)
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    join = LogJoin(JoinConfig(max_entries=n + 1))
    for call in calls:
        join.offer_span(call, T0)
        join.offer_records(call.trace_id, call.span_id, records, T0)
    heap = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    json_bytes = len(json.dumps(join.store))
    return heap / n * 1000 / 1024, json_bytes / n * 1000 / 1024


def hop_cost(records: list[GenAIRecord], n: int = 5000) -> float:
    """µs per call to put a held span on the join topic and read it back (the stage's extra hop)."""
    call = template()[0]
    started = time.perf_counter()
    for _ in range(n):
        value = json.dumps({"span": call.to_dict()}).encode()
        LLMCall.from_dict(json.loads(value)["span"])
        records_value = json.dumps({"records": {call.span_id: [r.to_dict() for r in records]}}).encode()
        [GenAIRecord.from_dict(r) for r in json.loads(records_value)["records"][call.span_id]]
    return (time.perf_counter() - started) / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000, 100_000])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    _, records = template()
    columns = ["offer_span_us", "offer_records_us", "scan_ms_per_1k", "release_us", "settle_us"]
    print("| in flight | " + " | ".join(columns) + " | heap KiB / 1k | JSON KiB / 1k |")
    print("|---" * (len(columns) + 3) + "|")
    for n in args.sizes:
        runs = [timed_run(n, records) for _ in range(args.runs)]
        medians = [statistics.median(run[column] for run in runs) for column in columns]
        heap, json_size = memory(n, records)
        cells = " | ".join(f"{value:.1f}" for value in medians)
        print(f"| {n:,} | {cells} | {heap:.0f} | {json_size:.0f} |")
    print(f"\njoin-topic hop (span and its records: to JSON and back): {hop_cost(records):.1f} µs per call")


if __name__ == "__main__":
    main()
