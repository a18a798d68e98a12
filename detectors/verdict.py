"""One record's combined verdict from its detectors' results (used by ``halluwatch eval``).

Scores of different detectors live on different scales, so each is first mapped through
its own threshold: [0, threshold] onto [0, 0.5] and [threshold, 1] onto [0.5, 1].  A
learned **verdict model** (``detectors/data/verdict.json``, written by ``halluwatch train``)
weighs those per detector, with whether each checked the call at all, into one calibrated
probability: detectors are not equally right on every kind of traffic, and a maximum lets
the noisiest decide.  Without a model the combined score is the maximum, which makes
"combined score >= 0.5" the same statement as "some detector flagged the call".  The
sentinel's flag means "unverified", not "hallucinated", so it never counts.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any, Final

import numpy as np

from detectors.base import DetectorResult, DetectorStatus
from detectors.models.learned import Matrix, ScaledLogistic, read_model_file

NOT_HALLUCINATION_EVIDENCE = frozenset({"sentinel"})
SENTENCE_SPAN_DETECTORS = frozenset({"grounding"})  # their spans are whole sentences
_NOT_SPAN_SOURCES = NOT_HALLUCINATION_EVIDENCE | SENTENCE_SPAN_DETECTORS
# The span-level hallucination detectors the verdict model weighs (sampled ones judge too few calls).
VERDICT_DETECTORS: Final = ("contradiction", "grounding", "unsupported_spans", "confidence", "schema_violation")
VERDICT_FEATURES: Final = tuple(f"{name}.{part}" for name in VERDICT_DETECTORS for part in ("score", "checked"))
_BUILT_IN = "verdict.json"


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


def verdict_features(results: Iterable[DetectorResult]) -> Matrix:
    """One row (``VERDICT_FEATURES`` order): each detector's threshold-relative score and whether it checked."""
    row = np.zeros(len(VERDICT_FEATURES))
    for r in results:
        if r.status is DetectorStatus.OK and r.detector in VERDICT_DETECTORS:
            at = 2 * VERDICT_DETECTORS.index(r.detector)
            row[at : at + 2] = (threshold_relative(r.score, r.threshold), 1.0)
    return row


def combined_verdict(results: Iterable[DetectorResult], model: ScaledLogistic | None = None) -> tuple[float, bool]:
    """The record's score in [0, 1] and verdict: the model's probability, or the maximum without one."""
    deciding = [r for r in results if r.status is DetectorStatus.OK and r.detector not in NOT_HALLUCINATION_EVIDENCE]
    if model is not None:
        probability = float(model.predict(verdict_features(deciding)[None, :])[0])
        return probability, probability >= 0.5
    score = max((threshold_relative(r.score, r.threshold) for r in deciding), default=0.0)
    return score, any(r.flagged for r in deciding)


def load_verdict_model(path: Path | None = None) -> ScaledLogistic:
    """The verdict model at ``path``, or the built-in one; a ValueError names the file and the fault."""
    where = str(path) if path else f"detectors/data/{_BUILT_IN}"
    try:
        model = ScaledLogistic.from_dict(read_model_file(path, _BUILT_IN)["model"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"verdict model {where}: {exc}") from exc
    if model.features != VERDICT_FEATURES:
        raise ValueError(f"verdict model {where}: made for other detectors; retrain with `halluwatch train`")
    return model


def answer_spans(results: Iterable[DetectorResult], hallucinated: bool) -> list[dict[str, Any]]:
    """The answer spans (char offsets) of a record the verdict calls hallucinated, tagged with the detector.

    Words and values (unsupported_spans, contradiction) that flagged detectors point at.  A
    record called clean gets none, and grounding's whole sentences are never spans: under
    LettuceDetect's character-overlap span F1, which counts every character marked in a clean
    answer as a false positive, either costs more than it finds (RAGTruth held-out documents:
    span F1 0.13 with both, 0.18 without).
    """
    if not hallucinated:
        return []
    spans = []
    for result in results:
        if not result.flagged or result.detector in _NOT_SPAN_SOURCES:
            continue
        for span in result.evidence.get("spans", ()):
            if isinstance(span, dict) and isinstance(span.get("start"), int) and isinstance(span.get("end"), int):
                spans.append({"start": span["start"], "end": span["end"], "text": span.get("text", ""),
                              "detector": result.detector})  # fmt: skip
    return spans
