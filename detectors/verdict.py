"""One call's probability of being hallucinated, from its detectors' results.

Scores of different detectors live on different scales, so each is first mapped through
its own threshold: [0, threshold] onto [0, 0.5] and [threshold, 1] onto [0.5, 1].  A
learned **verdict model** (``detectors/data/verdict.json``, written by ``halluwatch train``)
weighs those per detector, with whether each checked the call at all, and a calibration
map turns its score into ``p_hallucination``: a probability that means what it says on
held-out labelled documents (the file carries the reliability table that shows it).  The
worker computes it for every call, ``halluwatch eval`` for every record: one implementation.

Without a model the combined score is the maximum, which makes "combined score >= 0.5" the
same statement as "some detector flagged the call".  The sentinel's and the coverage
detector's flags mean "unverified", not "hallucinated", so they never count.  Detectors that report facts (a tool
call the schema forbids, a failed tool the answer says succeeded) are not probabilities
and keep their own meaning: :data:`FACT_DETECTORS`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import numpy as np

from detectors.base import VERDICT_DETECTORS, DetectorResult, DetectorStatus
from detectors.config import DEFAULT_PROFILE, Profile
from detectors.models.learned import Matrix, ScaledLogistic, read_model_file, sigmoid
from detectors.profiles import ProfileMismatch, built_in_path
from detectors.registry import FACT_DETECTORS

NOT_HALLUCINATION_EVIDENCE = frozenset({"sentinel", "coverage"})
SENTENCE_SPAN_DETECTORS = frozenset({"grounding"})  # their spans are whole sentences
_NOT_SPAN_SOURCES = NOT_HALLUCINATION_EVIDENCE | SENTENCE_SPAN_DETECTORS
VERDICT_FEATURES: Final = tuple(f"{name}.{part}" for name in VERDICT_DETECTORS for part in ("score", "checked"))
_BUILT_IN = "verdict.json"
_EPSILON = 1e-6


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


def verdict_features(results: Iterable[DetectorResult], thresholds: Mapping[str, float] | None = None) -> list[float]:
    """One row (``VERDICT_FEATURES`` order): each detector's threshold-relative score and whether it checked.

    ``thresholds`` (by detector) replace the results' own: a model's features are relative to
    the thresholds it was trained with, whatever a policy or a later thresholds file sets.
    """
    row = [0.0] * len(VERDICT_FEATURES)
    for r in results:
        if r.status is DetectorStatus.OK and r.detector in VERDICT_DETECTORS:
            at = 2 * VERDICT_DETECTORS.index(r.detector)
            threshold = (thresholds or {}).get(r.detector, r.threshold)
            row[at : at + 2] = (threshold_relative(r.score, threshold), 1.0)
    return row


@dataclass(frozen=True, slots=True)
class PlattScaling:
    """``sigmoid(slope * logit(p) + intercept)``: moves a model's scores onto observed frequencies."""

    slope: float = 1.0
    intercept: float = 0.0

    def apply(self, scores: Matrix) -> Matrix:
        """Calibrated probabilities for raw model scores."""
        clipped = np.clip(scores, _EPSILON, 1 - _EPSILON)
        return sigmoid(self.slope * np.log(clipped / (1 - clipped)) + self.intercept)

    def apply_one(self, score: float) -> float:
        """:meth:`apply` of one score in plain Python."""
        clipped = min(max(score, _EPSILON), 1 - _EPSILON)
        return 0.5 * (1.0 + math.tanh(0.5 * (self.slope * math.log(clipped / (1 - clipped)) + self.intercept)))

    def inverse(self) -> PlattScaling:
        """The map that undoes this one (a stored probability back to the one before it)."""
        return PlattScaling(1.0 / self.slope, -self.intercept / self.slope)

    def then(self, other: PlattScaling) -> PlattScaling:
        """The map that applies ``self`` and then ``other``: one map, both being linear in the logit."""
        return PlattScaling(other.slope * self.slope, other.slope * self.intercept + other.intercept)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form."""
        return {"kind": "platt", "slope": self.slope, "intercept": self.intercept}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PlattScaling:
        """Read the JSON form."""
        return cls(float(data["slope"]), float(data["intercept"]))


@dataclass(frozen=True, slots=True)
class VerdictModel:
    """The learned verdict: a logistic model over detector features, then its calibration."""

    version: str
    model: ScaledLogistic
    calibration: PlattScaling = PlattScaling()
    # Detector thresholds the features were made relative to when the model was trained.
    thresholds: Mapping[str, float] = field(default_factory=dict)

    def features(self, results: Iterable[DetectorResult]) -> list[float]:
        """The model's input row for one call's results."""
        return verdict_features(results, self.thresholds)

    def calibrated(self, rows: Matrix) -> Matrix:
        """``p_hallucination`` for feature rows."""
        return self.calibration.apply(self.model.predict(rows))

    def verdict(self, results: Iterable[DetectorResult]) -> CallVerdict | None:
        """One call's ``p_hallucination``; None when no detector the model weighs checked the call.

        A call nobody checked (no sources, a prompt the sentinel found not factual) has no
        probability: the model's prior is not a judgement of that answer.
        """
        row = self.features(results)
        if not any(row[1::2]):  # the "checked" columns
            return None
        # Per call in the spans stage: plain Python, the same arithmetic as the batched :meth:`calibrated`.
        return CallVerdict(self.calibration.apply_one(self.model.predict_row(row)), self.version)


@dataclass(frozen=True, slots=True)
class CallVerdict:
    """What the verdict says of one call, as stored with it: the probability, the model's and the app map's versions."""

    probability: float
    model_version: str
    map_version: str = ""  # the application's own map the probability went through ('': none)


@dataclass(frozen=True, slots=True)
class CallJudgement:
    """The call as a whole: its calibrated probability (None: nothing checked it) and whether it is flagged."""

    verdict: CallVerdict | None
    flagged: bool


def judge_call(
    results: Sequence[DetectorResult],
    verdict_model: VerdictModel | None,
    flag_probability: float,
    recalibration: PlattScaling = PlattScaling(),
    map_version: str = "",
) -> CallJudgement:
    """A call is flagged when its probability reaches ``flag_probability`` or a fact detector flagged it.

    ``recalibration`` is the call's application's own map (fitted on its people's verdicts), and
    ``map_version`` its version, stored with the call.  Without a verdict model, any hallucination
    flag flags the call.
    """
    facts = any(r.flagged and r.detector in FACT_DETECTORS for r in results)
    if verdict_model is None:
        return CallJudgement(None, any(r.flagged and r.detector not in NOT_HALLUCINATION_EVIDENCE for r in results))
    verdict = verdict_model.verdict(results)
    if verdict is not None and (recalibration != PlattScaling() or map_version):
        verdict = CallVerdict(recalibration.apply_one(verdict.probability), verdict.model_version, map_version)
    return CallJudgement(verdict, facts or (verdict is not None and verdict.probability >= flag_probability))


def combined_verdict(results: Iterable[DetectorResult], model: VerdictModel | None = None) -> tuple[float, bool]:
    """The record's score in [0, 1] and verdict: ``p_hallucination``, or the maximum without a model.

    A call nothing checked scores 0 under the model.
    """
    deciding = [r for r in results if r.status is DetectorStatus.OK and r.detector not in NOT_HALLUCINATION_EVIDENCE]
    if model is not None:
        verdict = model.verdict(deciding)
        probability = verdict.probability if verdict else 0.0
        return probability, probability >= 0.5
    score = max((threshold_relative(r.score, r.threshold) for r in deciding), default=0.0)
    return score, any(r.flagged for r in deciding)


def load_verdict_model(path: Path | None = None, profile: Profile = DEFAULT_PROFILE) -> VerdictModel:
    """The verdict model at ``path``, or ``profile``'s built-in one; a ValueError names the file and the fault."""
    where = str(path) if path else f"detectors/data/{built_in_path(profile, _BUILT_IN)}"
    try:
        document = read_model_file(path, _BUILT_IN, profile)
        calibration = document.get("calibration")
        verdict = VerdictModel(
            version=str(document.get("version") or "unversioned"),
            model=ScaledLogistic.from_dict(document["model"]),
            calibration=PlattScaling.from_dict(calibration["map"]) if calibration else PlattScaling(),
            thresholds={str(k): float(v) for k, v in (document.get("thresholds") or {}).items()},
        )
    except ProfileMismatch:
        raise
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"verdict model {where}: {exc}") from exc
    if verdict.model.features != VERDICT_FEATURES:
        raise ValueError(f"verdict model {where}: made for other detectors; retrain with `halluwatch train`")
    return verdict


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
