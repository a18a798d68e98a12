"""Scores, flags and p_hallucination with the passage store are those without it, on both embedding profiles.

The demo's example calls go through the real detector suite three times: without a store,
with an empty store (which it fills), and in a new suite over the filled store, as a
restarted worker would read it.  Only the last reads parts from the store instead of
encoding them, so it is the one that could differ.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from detectors.build import build_suite
from detectors.config import Profile
from detectors.llm_call import LLMCall
from detectors.models.passage_store import PassageStore
from detectors.settings import DetectorSettings
from detectors.suite import DetectorSuite
from detectors.thresholds import load_thresholds
from detectors.verdict import load_verdict_model
from pipeline.spans.processor import InboundMessage, SpanBatchProcessor
from pipeline.tools.example_traces import example_traces


def example_calls() -> list[LLMCall]:
    """The demo's LLM calls that have sources, each twice over two batches (a source part recurs)."""
    messages = [InboundMessage(None, trace.SerializeToString()) for trace in example_traces()]
    calls = [c for c in SpanBatchProcessor(DetectorSuite([]), "v-test").normalize(messages).llm_calls if c.sources]
    assert len(calls) >= 5
    return calls


def outcomes(suite: DetectorSuite, batches: list[list[LLMCall]], profile: Profile) -> list[dict[str, Any]]:
    """Per call: each detector's status, score and flag, and the verdict's p_hallucination."""
    verdict = load_verdict_model(None, profile)
    rows: list[dict[str, Any]] = []
    for batch in batches:
        runs = suite.run(batch)
        for i in range(len(batch)):
            results = [run.results[i] for run in runs]
            judged = verdict.verdict(results)
            rows.append({
                "detectors": {r.detector: (r.status, r.score, r.flagged) for r in results},
                "p": judged.probability if judged else None,
            })  # fmt: skip
    return rows


@pytest.mark.parametrize("profile", ["accurate", "fast"])
def test_the_store_changes_no_score_flag_or_probability(
    profile: Profile, tmp_path: Path, model_cache_dir: Path
) -> None:
    settings = DetectorSettings.model_validate({"embeddings": {"profile": profile, "cache_dir": str(model_cache_dir)}})
    thresholds = load_thresholds(None, profile)
    calls = example_calls()
    half = len(calls) // 2
    batches = [calls[:half] + calls[:2], calls[half:] + calls[:2]]
    reads: list[tuple[int, int]] = []

    def store() -> PassageStore:
        return PassageStore(tmp_path / "passages.sqlite", max_megabytes=100, ttl_hours=1,
                            on_read=lambda hits, misses: reads.append((hits, misses)))  # fmt: skip

    without = outcomes(build_suite(settings, thresholds, {}), batches, profile)
    filling = outcomes(build_suite(settings, thresholds, {}, passage_store=store()), batches, profile)
    assert sum(hits for hits, _ in reads) == 0  # every part was new: encoded, then written
    reads.clear()
    restarted = build_suite(settings, thresholds, {}, passage_store=store())
    from_store = outcomes(restarted, batches, profile)
    assert sum(misses for _, misses in reads) == 0 and sum(hits for hits, _ in reads) > 0  # every part read back
    assert without == filling == from_store
    assert any(row["p"] is not None for row in without)
    assert all(row["detectors"]["grounding"][0].value == "ok" for row in without[:half])
