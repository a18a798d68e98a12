"""One record's combined verdict from its detectors' results (used by ``halluwatch eval``).

Scores of different detectors live on different scales, so each is first mapped through
its own threshold: [0, threshold] onto [0, 0.5] and [threshold, 1] onto [0.5, 1].  The
combined score is the maximum of those, which makes "combined score >= 0.5" the same
statement as "some detector flagged the call" — one number that ranks (for AUROC) and
agrees with the verdict.  The sentinel's flag means "unverified", not "hallucinated",
so it does not count.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from detectors.base import DetectorResult, DetectorStatus

NOT_HALLUCINATION_EVIDENCE = frozenset({"sentinel"})


def threshold_relative(score: float, threshold: float) -> float:
    """Map ``score`` so that ``threshold`` lands on 0.5, keeping order and the [0, 1] range."""
    score = min(max(score, 0.0), 1.0)
    if threshold <= 0.0:
        return 0.5 + score / 2
    if threshold >= 1.0:
        return score / 2
    if score < threshold:
        return 0.5 * score / threshold
    return 0.5 + 0.5 * (score - threshold) / (1.0 - threshold)


def combined_verdict(results: Iterable[DetectorResult]) -> tuple[float, bool]:
    """The record's score in [0, 1] and whether any hallucination detector flagged it."""
    deciding = [r for r in results if r.status is DetectorStatus.OK and r.detector not in NOT_HALLUCINATION_EVIDENCE]
    score = max((threshold_relative(r.score, r.threshold) for r in deciding), default=0.0)
    return score, any(r.flagged for r in deciding)


def flagged_spans(results: Iterable[DetectorResult]) -> list[dict[str, Any]]:
    """Answer spans (char offsets) that flagged detectors point at, tagged with the detector."""
    spans = []
    for result in results:
        if not result.flagged or result.detector in NOT_HALLUCINATION_EVIDENCE:
            continue
        for span in result.evidence.get("spans", ()):
            if isinstance(span, dict) and isinstance(span.get("start"), int) and isinstance(span.get("end"), int):
                spans.append({"start": span["start"], "end": span["end"], "text": span.get("text", ""),
                              "detector": result.detector})  # fmt: skip
    return spans
