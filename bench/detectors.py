"""LLM spans/s per core through the default detector suite, RAGTruth-sized inputs.

Builds the worker's suite from default settings (one onnxruntime thread), turns shared
RAGTruth records (``--set``: another shared set; WiCE's sources are long) into the LLM calls
a RAG app would trace, and times batches of them:
*cold* with an empty window cache (every source seen for the first time) and *warm* on a
second pass (the same documents recur across traces in production).  Median of runs, and
the time per call: each call is charged its batch's time divided by the batch's calls
(``--batch 1``: each call's own time), p99 over every call of every run.

``--baseline REF`` also times commit REF's code in the same run, interleaved run by run
(bench/baseline.py), and prints the ratios; ``--without NAME`` also times each suite
without that detector; ``--profile fast`` also times this tree with that embedding profile
(its own models and thresholds).  The machine's speed drifts between hours; a ratio measured
in one run does not.  Each run of this tree's code gets a new, empty passage store: cold is cold.

``--zipf S`` times traffic that repeats as RAG traffic does instead (bench/zipf_traffic.py):
each call's sources are one document of the shared sets, drawn with Zipf-distributed
popularity, and no answer repeats.  Each run replays its own warm-up calls untimed, then
times its calls in four cases: ``baseline`` (REF's code), ``no-store`` (this code without
the passage store), ``store`` (this code with a store that has kept every earlier call of
the bench) and ``restart`` (the same, but the timed calls go to a new process state over
the store, as after a worker's restart: nothing in memory but the models, loaded at start).

    .venv/bin/python bench/detectors.py [--set ragtruth] [--limit 128] [--runs 3] [--batch 32]
                                        [--baseline 1a415df] [--without NAME] [--profile fast]
    .venv/bin/python bench/detectors.py --zipf 1.1 [--calls 96] [--warm-up 192] [--history 1000] [--runs 3]
                                        [--prefill] [--baseline REF]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from baseline import ROOT, children, percentile, serve, serve_tree, timed_batches

TREE = serve_tree(sys.argv)

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def child(data_set: str, limit: int, batch: int, profile: str | None) -> None:
    """Serve timed runs of this process's tree (its code first on sys.path)."""
    from detectors.thresholds import load_thresholds
    from pipeline.config.settings import load_settings
    from pipeline.offline.evaluate import read_records, record_to_call
    from pipeline.spans.suite import suite_from_settings

    calls = [record_to_call(r) for r in list(read_records(DATA / data_set / f"{data_set}.jsonl"))[:limit]]

    def settings(data_dir: str, profile: str | None) -> Any:
        embeddings: dict[str, Any] = {"detectors": {"embeddings": {"profile": profile}}} if profile else {}
        return load_settings(data_dir=Path(data_dir), **embeddings)

    def thresholds(profile: str | None) -> Any:
        return load_thresholds(None, profile) if profile else load_thresholds()  # type: ignore[arg-type]

    # Only this tree is asked for another profile (a baseline's settings may not know the setting).
    for variant in {None, profile if TREE == ROOT else None}:
        with tempfile.TemporaryDirectory(prefix="halluwatch-bench-") as scratch:  # the one-time model load, not timed
            suite_from_settings(settings(scratch, variant), thresholds(variant)).run(calls[:4])

    def run(request: dict[str, Any]) -> dict[str, Any]:
        with tempfile.TemporaryDirectory(prefix="halluwatch-bench-") as fresh:  # an empty passage store
            suite = suite_from_settings(settings(fresh, request.get("profile")), thresholds(request.get("profile")))
            suite.content = [d for d in suite.content if d.name != request.get("without")]
            cold, warm = timed_batches(suite, calls, batch), timed_batches(suite, calls, batch)
            suite.close()
        return {"cold": cold, "warm": warm}

    serve(run)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--set", default="ragtruth", help="a shared data set, e.g. wice for long sources")
    parser.add_argument("--limit", type=int, default=128)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--baseline", metavar="REF", help="also time this commit's code, interleaved, for ratios")
    parser.add_argument("--without", help="also time each suite without this detector, for a ratio")
    parser.add_argument("--profile", help="also time this tree with this detectors.embeddings.profile, for a ratio")
    parser.add_argument("--serve", metavar="TREE", help=argparse.SUPPRESS)  # a child of --baseline's harness
    parser.add_argument("--zipf", type=float, metavar="S", help="traffic whose sources repeat, popularity ~ 1/rank^S")
    parser.add_argument("--calls", type=int, default=96, help="--zipf: timed calls per run and case")
    parser.add_argument("--warm-up", type=int, default=192, help="--zipf: untimed calls before them")
    parser.add_argument("--seed", type=int, default=1, help="--zipf: the traffic's random seed")
    parser.add_argument("--history", type=int, default=1000, help="--zipf: calls the store served before the runs")
    parser.add_argument("--prefill", action="store_true", help="--zipf: then every corpus part into the store")
    args = parser.parse_args()
    if args.zipf is not None:
        from zipf_traffic import zipf_bench, zipf_child

        if TREE is not None:
            zipf_child(args.zipf, args.calls, args.warm_up, args.runs, args.seed, args.batch, args.history)
        else:
            zipf_bench(Path(__file__), args)
        return
    if TREE is not None:
        child(args.set, args.limit, args.batch, args.profile)
        return
    variants = [None, *([args.without] if args.without else [])]
    times: dict[str, dict[str, list[list[float]]]] = {}
    options = ["--set", args.set, "--limit", str(args.limit), "--batch", str(args.batch)]
    options += ["--profile", args.profile] if args.profile else []
    with children(Path(__file__), args.baseline, options) as kids:
        for _ in range(args.runs):
            for kid in kids:
                asks = [({"without": left_out}, _name(kid.label, left_out)) for left_out in variants]
                if args.profile and kid is kids[-1]:
                    asks.append(({"profile": args.profile}, f"{kid.label} {args.profile}"))
                for request, name in asks:
                    answer = kid.ask(request)
                    for phase in ("cold", "warm"):
                        times.setdefault(name, {}).setdefault(phase, []).append(answer[phase])
        labels = [kid.label for kid in kids]
    print(f"{args.limit} {args.set} calls, batches of {args.batch}, one thread, {args.runs} runs interleaved:")
    for name, by in times.items():
        print(f"  {name}: " + "; ".join(_phase_cell(phase, runs) for phase, runs in by.items()))
    pairs = [(_name(labels[-1], v), _name(labels[0], v)) for v in variants if len(labels) > 1]
    pairs += [(_name(label, args.without), _name(label, None)) for label in labels if args.without]
    pairs += [(f"{labels[-1]} {args.profile}", labels[-1])] if args.profile else []
    for name, reference in pairs:
        print(f"  ratio {name} / {reference}: " + ", ".join(_ratio_cell(times, phase, name, reference)
                                                          for phase in ("cold", "warm")))  # fmt: skip


def _name(label: str, left_out: str | None) -> str:
    return label + (f" without {left_out}" if left_out else "")


def _rate(run: list[float]) -> float:
    """Calls per second of one pass, from its per-call times."""
    return len(run) / sum(run)


def _phase_cell(phase: str, runs: list[list[float]]) -> str:
    rates, per_call = [_rate(r) for r in runs], [t for r in runs for t in r]
    return (
        f"{phase} median {statistics.median(rates):.1f} spans/s (runs {', '.join(f'{r:.1f}' for r in rates)}), "
        f"per call median {statistics.median(per_call) * 1e3:.1f} ms, p99 {percentile(per_call, 0.99) * 1e3:.1f} ms"
    )


def _ratio_cell(times: dict[str, dict[str, list[list[float]]]], phase: str, name: str, reference: str) -> str:
    ratio = statistics.median(map(_rate, times[name][phase])) / statistics.median(map(_rate, times[reference][phase]))
    p99, p99_ref = (percentile([t for r in times[n][phase] for t in r], 0.99) * 1e3 for n in (name, reference))
    return f"{phase} {ratio:.2f}x (p99 per call {p99:.1f} vs {p99_ref:.1f} ms)"


if __name__ == "__main__":
    main()
