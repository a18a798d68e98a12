"""Grounding detector: speed per core (warm/cold caches, int8/fp32, vs a naive baseline) and AUROC.

Everything runs on one thread (``threads=1``), so rates are per core.  Inputs are the
shared RAGTruth records as the worker would see them (``pipeline.offline.evaluate.record_to_call``),
in batches of ``--batch`` calls.

* warm: the same calls again after one pass, so source windows are cached; answer sentences
  are never cached, and are the remaining cost.
* cold: a fresh detector and embedder (model loaded before timing), nothing cached.
* baseline: seed 000's approach on the same runtime: each answer sentence and each whole
  source encoded one ``encode`` call at a time, no windows, no cache.
* quality: AUROC of the detector score against ``hallucinated`` on each shared set.

    .venv/bin/python bench/grounding.py [--limit 200] [--runs 3] [--quality-limit 300]
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from detectors.grounding import GroundingConfig
from detectors.grounding.detector import GroundingDetector
from detectors.llm_call import LLMCall
from detectors.models.embeddings import Embedder, EmbeddingConfig
from detectors.text.prose import split_sentences
from pipeline.config.settings import Settings
from pipeline.offline.eval_metrics import auroc, best_f1_threshold
from pipeline.offline.evaluate import read_records, record_to_call

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
QUALITY_SETS = ("ragtruth", "faithbench", "summedits", "begin", "faithdial_audit", "wice")
SEED_SPLIT = re.compile(r"(?<=[.!?])\s+")
MODEL_CACHE = Settings().model_cache  # $HALLUWATCH_MODEL_CACHE, as the worker's


def detector(precision: str, config: GroundingConfig | None = None) -> GroundingDetector:
    embedder = Embedder(EmbeddingConfig(precision=precision, cache_dir=MODEL_CACHE))  # type: ignore[arg-type]
    embedder.load()
    return GroundingDetector(config or GroundingConfig(), 0.5, embedder)


def run_batches(fn: Callable[[Sequence[LLMCall]], object], calls: list[LLMCall], batch: int) -> float:
    started = time.perf_counter()
    for first in range(0, len(calls), batch):
        fn(calls[first : first + batch])
    return len(calls) / (time.perf_counter() - started)


def baseline(embedder: Embedder, calls: Sequence[LLMCall], batched: bool = False) -> list[float]:
    """Seed 000: every sentence vs every whole source, one encode per text; score = 1 - min best cosine.

    ``batched`` embeds every text of ``calls`` in one cached ``encode`` first: the same scores,
    for measuring the method's quality on many records rather than its speed.
    """
    if batched:
        texts = [t for c in calls for t in (*SEED_SPLIT.split(c.answer.strip()), *(s.text for s in c.sources))]
        embedder.encode(list(dict.fromkeys(texts)), cache=True)
    scores = []
    for call in calls:
        sims = []
        for sentence in SEED_SPLIT.split(call.answer.strip()):
            if len(sentence.split()) < 4:
                continue
            vector = embedder.encode([sentence], cache=batched)[0]
            sims.append(max(float(embedder.encode([s.text], cache=batched)[0] @ vector) for s in call.sources))
        scores.append(1.0 - min(sims) if sims else 0.0)
    return scores


def speed(calls: list[LLMCall], runs: int, batch: int) -> dict[str, float]:
    rates: dict[str, list[float]] = {}
    for precision in ("int8", "fp32"):
        warm = detector(precision)
        warm.detect_batch(calls)
        rates[f"{precision} warm"] = [run_batches(warm.detect_batch, calls, batch) for _ in range(runs)]
        rates[f"{precision} cold"] = [run_batches(detector(precision).detect_batch, calls, batch) for _ in range(runs)]
    few = calls[: max(len(calls) // 5, 10)]
    naive = Embedder(EmbeddingConfig(cache_dir=MODEL_CACHE))  # same runtime, so the ratio measures the method
    rates["int8 baseline (seed 000)"] = [run_batches(lambda c: baseline(naive, c), few, batch) for _ in range(runs)]
    for name, values in rates.items():
        print(f"| {name} | **{statistics.median(values):.1f}** | {' / '.join(f'{v:.1f}' for v in values)} |")
    return {name: statistics.median(values) for name, values in rates.items()}


def agreement(calls: list[LLMCall]) -> None:
    sentences = [s.text for call in calls for s in split_sentences(call.answer)][:2000]
    int8 = Embedder(EmbeddingConfig(precision="int8", cache_dir=MODEL_CACHE))
    fp32 = Embedder(EmbeddingConfig(precision="fp32", cache_dir=MODEL_CACHE))
    cosines = (int8.encode(sentences) * fp32.encode(sentences)).sum(axis=1)
    print(f"embedding agreement on {len(sentences)} answer sentences: "
          f"mean cosine {cosines.mean():.4f}, min {cosines.min():.4f}")  # fmt: skip
    a = np.array([r.score for r in detector("int8").detect_batch(calls)])
    b = np.array([r.score for r in detector("fp32").detect_batch(calls)])
    print(f"score agreement on {len(calls)} calls: mean |int8 - fp32| {np.abs(a - b).mean():.4f}, "
          f"max {np.abs(a - b).max():.4f}, Pearson r {np.corrcoef(a, b)[0, 1]:.4f}")  # fmt: skip


def quality(calls_by_set: dict[str, tuple[list[LLMCall], list[bool]]]) -> None:
    configs = {
        "default (min, 3 candidates)": GroundingConfig(),
        "mean": GroundingConfig(aggregate="mean"),
        "min, all windows": GroundingConfig(candidates_per_sentence=0),
    }
    print("| set | n | halluc. | " + " | ".join(f"AUROC {name}" for name in configs) + " | best-F1 threshold (F1) |")
    print("|---|---|---|" + "---|" * len(configs) + "---|")
    detectors = {name: detector("int8", config) for name, config in configs.items()}
    for name, (calls, actual) in calls_by_set.items():
        cells, best = [], ""
        for config_name, grounding in detectors.items():
            results = grounding.detect_batch(calls)
            ok = [i for i, r in enumerate(results) if r.status == "ok"]
            scores, labels = [results[i].score for i in ok], [actual[i] for i in ok]
            area = auroc(scores, labels)
            cells.append("n/a" if area is None else f"{area:.3f}")
            if config_name.startswith("default") and area is not None:
                threshold, f1 = best_f1_threshold(scores, labels)
                best = f"{threshold:.2f} ({f1:.3f})"
        print(f"| {name} | {len(calls)} | {sum(actual)} | " + " | ".join(cells) + f" | {best} |")


def load(name: str, limit: int) -> tuple[list[LLMCall], list[bool]]:
    records = [r for r in read_records(DATA / name / f"{name}.jsonl") if r.hallucinated is not None][:limit]
    return [record_to_call(r) for r in records], [bool(r.hallucinated) for r in records]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--limit", type=int, default=200, help="RAGTruth calls timed per run")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--quality-limit", type=int, default=300, help="records per set for AUROC")
    parser.add_argument("--skip", choices=("speed", "quality"), action="append", default=[])
    args = parser.parse_args()
    calls, actual = load("ragtruth", args.limit)
    if "speed" not in args.skip:
        print("| configuration | median LLM spans/s (1 thread) | runs |\n|---|---|---|")
        rates = speed(calls, args.runs, args.batch)
        print(f"warm int8 / baseline: {rates['int8 warm'] / rates['int8 baseline (seed 000)']:.1f}x; "
              f"cold int8 / baseline: {rates['int8 cold'] / rates['int8 baseline (seed 000)']:.1f}x")  # fmt: skip
        agreement(calls)
        base_scores = baseline(Embedder(EmbeddingConfig(cache_dir=MODEL_CACHE)), calls)
        print(f"baseline AUROC on these {len(calls)} RAGTruth calls: {auroc(base_scores, actual):.3f}")
    if "quality" not in args.skip:
        quality({name: load(name, args.quality_limit) for name in QUALITY_SETS})


if __name__ == "__main__":
    main()
