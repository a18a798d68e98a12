"""LLM spans/s per core through the default detector suite, RAGTruth-sized inputs.

Builds the worker's suite from default settings (one onnxruntime thread), turns shared
RAGTruth records into the LLM calls a RAG app would trace, and times batches of them:
*cold* with an empty window cache (every source seen for the first time) and *warm* on a
second pass (the same documents recur across traces in production).  Median of runs.
``--without NAME`` also times the suite without that detector in the same run, interleaved,
and prints the ratio (the machine's speed drifts between days; a ratio does not).

    .venv/bin/python bench/detectors.py [--limit 128] [--runs 3] [--batch 32] [--without unsupported_spans]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from detectors.llm_call import LLMCall
from detectors.suite import DetectorSuite
from detectors.thresholds import load_thresholds
from pipeline.config.settings import load_settings
from pipeline.offline.evaluate import read_records, record_to_call
from pipeline.spans.suite import suite_from_settings

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "ragtruth" / "ragtruth.jsonl"


def timed_pass(suite: DetectorSuite, calls: list[LLMCall], batch: int) -> float:
    """Calls per second for one pass over ``calls`` in batches."""
    started = time.perf_counter()
    for i in range(0, len(calls), batch):
        suite.run(calls[i : i + batch])
    return len(calls) / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--limit", type=int, default=128)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--without", help="also time the suite without this detector, for a ratio")
    args = parser.parse_args()
    calls = [record_to_call(r) for r in list(read_records(DATA))[: args.limit]]
    settings, thresholds = load_settings(), load_thresholds()
    warmup = suite_from_settings(settings, thresholds)
    warmup.run(calls[:4])  # the one-time model export/load is not what we measure
    variants = {"default suite": None, **({f"without {args.without}": args.without} if args.without else {})}
    cold: dict[str, list[float]] = {name: [] for name in variants}
    warm: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(args.runs):
        for name, left_out in variants.items():
            suite = suite_from_settings(settings, thresholds)  # a fresh window cache
            suite.content = [d for d in suite.content if d.name != left_out]
            cold[name].append(timed_pass(suite, calls, args.batch))
            warm[name].append(timed_pass(suite, calls, args.batch))
            suite.close()
    print(f"{len(calls)} RAGTruth calls, batches of {args.batch}, one thread:")
    for name in variants:
        print(f"  {name}: cold median {statistics.median(cold[name]):.1f} spans/s  (runs "
              f"{', '.join(f'{r:.1f}' for r in cold[name])}); warm median {statistics.median(warm[name]):.1f} "
              f"spans/s  (runs {', '.join(f'{r:.1f}' for r in warm[name])})")  # fmt: skip
    if args.without:
        other = f"without {args.without}"
        cold_ratio = statistics.median(cold["default suite"]) / statistics.median(cold[other])
        warm_ratio = statistics.median(warm["default suite"]) / statistics.median(warm[other])
        print(f"  ratio default / {other}: cold {cold_ratio:.2f}, warm {warm_ratio:.2f}")


if __name__ == "__main__":
    main()
