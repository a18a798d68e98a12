"""CPU ceiling of the spans stage: decode + normalize + detectors, in-process, no Kafka or ClickHouse.

Compared with bench/ingest.py this shows how much of a worker's time is the pipeline's own
Python work versus Kafka, faust and ClickHouse overhead.

    .venv/bin/python bench/processor.py [--traces 5000] [--spans-per-trace 20] [--runs 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from detectors.thresholds import load_thresholds
from detectors.verdict import load_verdict_model
from pipeline.config.settings import Settings
from pipeline.spans.processor import InboundMessage, SpanBatchProcessor
from pipeline.spans.suite import suite_from_settings
from pipeline.tools.example_traces import mixed_traffic


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces", type=int, default=5000)
    parser.add_argument("--spans-per-trace", type=int, default=20)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    messages = [
        InboundMessage(t.resource_spans[0].scope_spans[0].spans[0].trace_id.hex().encode(), t.SerializeToString())
        for t in mixed_traffic(args.traces, spans_per_trace=args.spans_per_trace)
    ]
    thresholds = load_thresholds()
    processor = SpanBatchProcessor(
        suite_from_settings(Settings(), thresholds), thresholds.version, verdict=load_verdict_model()
    )  # the call-level verdict, as the worker judges
    rates = []
    for _ in range(args.runs):
        started = time.perf_counter()
        for i in range(0, len(messages), 500):
            result = processor.process(messages[i : i + 500])
            assert not result.dead_letters
        rates.append(args.traces * args.spans_per_trace / (time.perf_counter() - started))
    print(
        f"median {statistics.median(rates):,.0f} spans/s on one thread "
        f"(runs: {', '.join(f'{r:,.0f}' for r in rates)}; {args.spans_per_trace} spans per trace, 1 LLM span)"
    )


if __name__ == "__main__":
    main()
