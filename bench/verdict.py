"""Cost of the verdict in the spans stage: p_hallucination per call against the detectors' own work.

Runs the default detector suite over RAGTruth-sized calls (the shared records, each as the
RAG call it would be traced as), then times, on the same results, what the spans stage adds
per call: the verdict model's features, its logistic and calibration (``judge_call``).
Both are medians of several runs on one thread; the ratio is what the target is about.

    .venv/bin/python bench/verdict.py [--records 128] [--runs 5]
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from detectors.thresholds import load_thresholds
from detectors.verdict import judge_call, load_verdict_model
from pipeline.config.settings import Settings
from pipeline.offline.evaluate import read_records, record_to_call
from pipeline.spans.suite import suite_from_settings

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "ragtruth" / "ragtruth.jsonl"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=128)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--data", type=Path, default=DATA)
    args = parser.parse_args()
    calls = [record_to_call(r) for r in itertools.islice(read_records(args.data), args.records)]
    suite = suite_from_settings(Settings(), load_thresholds())
    suite.start()
    verdict = load_verdict_model()
    suite.run(calls[:8])  # model load and first-call warm-up outside the timing
    detect, judge = [], []
    for _ in range(args.runs):
        started = time.perf_counter()
        runs = suite.run(calls)
        detect.append((time.perf_counter() - started) / len(calls))
        per_call = [[run.results[i] for run in runs] for i in range(len(calls))]
        started = time.perf_counter()
        for results in per_call:
            judge_call(results, verdict, 0.5)
        judge.append((time.perf_counter() - started) / len(calls))
    suite.close()
    d, j = statistics.median(detect), statistics.median(judge)
    print(f"{len(calls)} RAGTruth calls, {args.runs} runs, one thread (the runs are warm: sources seen before)")
    print(f"  detectors  median {d * 1e3:8.3f} ms per call")
    print(f"  verdict    median {j * 1e3:8.3f} ms per call")
    print(f"  verdict / detectors = {j / d:.2%}")


if __name__ == "__main__":
    main()
