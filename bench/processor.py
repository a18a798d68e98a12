"""CPU ceiling of the spans stage: decode + normalize + detectors, in-process, no Kafka or ClickHouse.

Compared with bench/ingest.py this shows how much of a worker's time is the pipeline's own
Python work versus Kafka, faust and ClickHouse overhead.  ``--baseline REF`` also times
commit REF's spans stage in the same run, interleaved run by run (bench/baseline.py), on the
same messages: both trees get the bytes this tree's example traces make, so a change to the
built-in examples does not pass for a change of speed.  ``--without NAME`` also times each
tree's stage without that detector (the name as that tree spells it), to find which one costs
what.

    .venv/bin/python bench/processor.py [--traces 5000] [--spans-per-trace 20] [--runs 5] [--baseline c3c6f1b]
"""

from __future__ import annotations

import argparse
import pickle
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from baseline import children, serve, serve_tree

TREE = serve_tree(sys.argv)


def child(messages_file: Path) -> None:
    """Serve timed runs of this process's tree's spans stage over the pickled messages."""
    messages: list[tuple[bytes, bytes]] = pickle.loads(messages_file.read_bytes())  # noqa: S301 - our own temp file
    build = _processor_factory()
    build(None)  # the one-time model load is not measured

    def run(request: dict[str, Any]) -> dict[str, Any]:
        process = build(request.get("without"))
        started = time.perf_counter()
        for i in range(0, len(messages), 500):
            result = process(messages[i : i + 500])
            assert not result.dead_letters
        return {"seconds": time.perf_counter() - started}

    serve(run)


def _processor_factory() -> Any:
    """A function making the tree's spans processor (without one detector) as its worker builds it.

    The layout before the rooms (``pipeline.process``, ``detectors.registry.build_suite``, no
    verdict) is read too, so the first wave of work (c3c6f1b) can be the baseline.
    """
    from detectors.thresholds import load_thresholds

    thresholds = load_thresholds()
    try:
        from detectors.verdict import load_verdict_model
        from pipeline.config.settings import Settings
        from pipeline.spans.processor import InboundMessage, SpanBatchProcessor
        from pipeline.spans.suite import suite_from_settings

        def make(left_out: str | None) -> Any:
            suite = suite_from_settings(Settings(), thresholds)
            _leave_out(suite, left_out)
            # the call-level verdict, as the worker judges
            processor = SpanBatchProcessor(suite, thresholds.version, verdict=load_verdict_model())
            return lambda part: processor.process([InboundMessage(k, v) for k, v in part])
    except ImportError:
        from pipeline.process import InboundMessage, SpanBatchProcessor  # type: ignore[import-not-found]
        from pipeline.settings import Settings  # type: ignore[import-not-found]

        from detectors.registry import build_suite  # type: ignore[attr-defined]

        def make(left_out: str | None) -> Any:
            suite = build_suite(Settings(), thresholds)
            _leave_out(suite, left_out)
            processor = SpanBatchProcessor(suite, thresholds.version)
            return lambda part: processor.process([InboundMessage(k, v) for k, v in part])

    return make


def _leave_out(suite: Any, name: str | None) -> None:
    for group in ("structural", "content"):
        if hasattr(suite, group):
            setattr(suite, group, [d for d in getattr(suite, group) if d.name != name])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces", type=int, default=5000)
    parser.add_argument("--spans-per-trace", type=int, default=20)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--baseline", metavar="REF", help="also time this commit's code, interleaved, for a ratio")
    parser.add_argument("--without", action="append", default=[], help="also time each tree without this detector")
    parser.add_argument("--serve", metavar="TREE", help=argparse.SUPPRESS)  # a child of --baseline's harness
    parser.add_argument("--messages", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if TREE is not None:
        child(args.messages)
        return
    from pipeline.tools.example_traces import mixed_traffic

    spans = args.traces * args.spans_per_trace
    variants = [None, *args.without]
    rates: dict[str, list[float]] = {}
    with tempfile.NamedTemporaryFile(suffix=".pickle") as handle:
        traces = mixed_traffic(args.traces, spans_per_trace=args.spans_per_trace)
        pickle.dump([(t.resource_spans[0].scope_spans[0].spans[0].trace_id.hex().encode(), t.SerializeToString())
                     for t in traces], handle)  # fmt: skip
        handle.flush()
        with children(Path(__file__), args.baseline, ["--messages", handle.name]) as kids:
            for _ in range(args.runs):
                for kid in kids:
                    for left_out in variants:
                        seconds = kid.ask({"without": left_out})["seconds"]
                        rates.setdefault(kid.label + (f" without {left_out}" if left_out else ""), []).append(
                            spans / seconds
                        )
    print(f"{args.traces} traces of {args.spans_per_trace} spans (1 LLM span each), one thread, {args.runs} runs:")
    for name, runs in rates.items():
        print(f"  {name}: median {statistics.median(runs):,.0f} spans/s (runs: {', '.join(f'{r:,.0f}' for r in runs)})")
    names = list(rates)
    for name in names[1:]:
        print(f"  ratio {name} / {names[0]}: {statistics.median(rates[name]) / statistics.median(rates[names[0]]):.2f}")


if __name__ == "__main__":
    main()
