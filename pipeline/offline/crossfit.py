"""The verdict, its calibration and the route minimums, cross-fitted by source document.

Records are cut into :data:`FOLDS` folds by a hash of their source document, so no document
sits in two folds.  For each fold a verdict model is fitted on the other folds and scores it:
every record then has a raw score from a model that never saw its document, which is what the
shipped model's scores are on a new team's documents.  The calibration map is fitted on those
scores (of :data:`CALIBRATION_SET`), not on the in-sample ones, which are more confident than
any new document will be.  Each route's minimum must keep its false-alarm target in every set
pooled and in all of each set's folds but :data:`SPARE_FOLDS`: the spread across folds is the margin.

:func:`out_of_fold` repeats the whole fit once per fold, on the other folds, and scores the
fold it left out: the probabilities and alerts the recipe gives on documents it never saw.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from detectors.models.learned import Matrix, ScaledLogistic
from detectors.verdict import VERDICT_FEATURES, PlattScaling
from pipeline.calibration.alert_probability import GatedCall, RouteMinimum, RouteTargets, choose_route_minimums
from pipeline.calibration.fitting import fit_platt, fit_scaled
from pipeline.calibration.reliability import ReliabilityBin, expected_calibration_error, reliability_table
from pipeline.offline.eval_metrics import auroc

FOLDS = 5
FOLD_SEED = "halluwatch-folds-1"
# A route's minimum keeps its target in every fold of each set but this many (4 of 5, or 3 of 4 in a refit).
SPARE_FOLDS = 1
VERDICT_L2 = 1.0
# The verdict's probabilities are calibrated on RAGTruth: real LLM answers to real retrieval
# prompts, with the share of hallucinated answers (38 %) nearest to production. The other sets are
# built to be mostly hallucinated (63-69 %); their reliability is reported, not fitted.
CALIBRATION_SET = "ragtruth"


def fold_of(context: Sequence[str], folds: int = FOLDS) -> int:
    """The fold of a record whose source document is ``context`` (the same on every run)."""
    digest = hashlib.sha256((FOLD_SEED + "\x00" + "\x00".join(context)).encode()).digest()
    return int.from_bytes(digest[:8], "big") % folds


@dataclass(frozen=True, slots=True)
class VerdictRow:
    """What fitting the verdict needs of one labelled record."""

    group: str  # its data set
    features: tuple[float, ...]  # VERDICT_FEATURES
    hallucinated: bool
    flags: Mapping[str, int]  # detectors that flagged it (name -> severity)
    fold: int

    @property
    def checked(self) -> bool:
        """Whether a detector the verdict weighs checked the record (else it has no probability)."""
        return any(self.features[1::2])


@dataclass(frozen=True, slots=True)
class VerdictFit:
    """A fitted verdict: its model, calibration map and route minimums."""

    model: ScaledLogistic
    calibration: PlattScaling
    minimums: tuple[RouteMinimum, ...]

    def probabilities(self, rows: Sequence[VerdictRow]) -> list[float | None]:
        """``p_hallucination`` of each row; None for a row nothing checked."""
        p = self.calibration.apply(self.model.predict(_matrix(rows)))
        return [float(value) if row.checked else None for row, value in zip(rows, p, strict=True)]


def fit_verdict(rows: Sequence[VerdictRow], routing: RouteTargets) -> VerdictFit:
    """The model on every row; its calibration and route minimums on scores cross-fitted over the rows' folds."""
    calibrating = np.array([row.group == CALIBRATION_SET for row in rows])
    if not calibrating.any():
        raise ValueError(f"no {CALIBRATION_SET} records to calibrate the verdict on")
    folds = np.array([row.fold for row in rows])
    if len(set(folds)) < 2:
        raise ValueError("cross-fitting needs records of at least two document folds")
    model = _fit_model(rows)
    raw = np.zeros(len(rows))
    for fold in sorted(set(folds)):
        inside = folds == fold
        raw[inside] = _fit_model([r for r, i in zip(rows, inside, strict=True) if not i]).predict(_matrix(rows)[inside])
    labels = np.array([float(row.hallucinated) for row in rows])
    calibration = fit_platt(raw[calibrating], labels[calibrating])
    p = calibration.apply(raw)
    calls = [GatedCall(row.flags, float(value) if row.checked else None, row.hallucinated, row.group, fold=row.fold)
             for row, value in zip(rows, p, strict=True)]  # fmt: skip
    return VerdictFit(model, calibration, tuple(choose_route_minimums(calls, routing, SPARE_FOLDS)))


@dataclass(frozen=True, slots=True)
class Scored:
    """One record's probability and the route its alert would take (None: no alert)."""

    probability: float | None
    route: str | None


def scored(fit: VerdictFit, rows: Sequence[VerdictRow], routing: RouteTargets) -> list[Scored]:
    """What ``fit`` says of ``rows``: each one's probability and alert route."""
    agreement = routing.agreement({m.route: m.min_probability for m in fit.minimums})
    out = []
    for row, p in zip(rows, fit.probabilities(rows), strict=True):
        rule = agreement.first_match(row.flags, p)
        out.append(Scored(p, rule.route if rule else None))
    return out


def out_of_fold(rows: Sequence[VerdictRow], routing: RouteTargets) -> list[Scored]:
    """Each row scored by the whole recipe fitted on the other folds (in input order)."""
    out: list[Scored | None] = [None] * len(rows)
    for fold in sorted({row.fold for row in rows}):
        inside = [i for i, row in enumerate(rows) if row.fold == fold]
        fit = fit_verdict([row for row in rows if row.fold != fold], routing)
        for i, result in zip(inside, scored(fit, [rows[i] for i in inside], routing), strict=True):
            out[i] = result
    return [result for result in out if result is not None]


@dataclass(frozen=True, slots=True)
class Quality:
    """What scored records of one set show: ranking, calibration, and the alerts on faithful ones."""

    records: int
    auroc: float | None
    ece: float
    reliability: tuple[ReliabilityBin, ...]
    faithful: int
    alerted_faithful: float  # share of the faithful records alerted on, any route
    paged_faithful: float  # share of the faithful records paged
    recall: float  # share of the hallucinated records alerted on, any route

    def to_dict(self) -> dict[str, Any]:
        """The model file's form."""
        return {"records": self.records, "auroc": None if self.auroc is None else round(self.auroc, 4),
                "ece": round(self.ece, 4), "alerted_faithful": round(self.alerted_faithful, 4),
                "paged_faithful": round(self.paged_faithful, 4), "recall": round(self.recall, 4),
                "faithful": self.faithful, "reliability": [b.to_dict() for b in self.reliability]}  # fmt: skip


def quality(results: Sequence[Scored], labels: Sequence[bool], page: str = "page") -> Quality:
    """The quality of ``results`` against ``labels`` (records without a probability count for alerts only)."""
    judged = [(r.probability, y) for r, y in zip(results, labels, strict=True) if r.probability is not None]
    p, actual = [x for x, _ in judged], [y for _, y in judged]
    faithful = [r for r, y in zip(results, labels, strict=True) if not y]
    hallucinated = [r for r, y in zip(results, labels, strict=True) if y]
    return Quality(
        records=len(results),
        auroc=auroc(p, actual),
        ece=expected_calibration_error(p, actual),
        reliability=tuple(reliability_table(p, actual)),
        faithful=len(faithful),
        alerted_faithful=_share(faithful, lambda r: r.route is not None),
        paged_faithful=_share(faithful, lambda r: r.route == page),
        recall=_share(hallucinated, lambda r: r.route is not None),
    )


def _share(results: Sequence[Scored], counted: Callable[[Scored], bool]) -> float:
    return sum(map(counted, results)) / len(results) if results else 0.0


def _fit_model(rows: Sequence[VerdictRow]) -> ScaledLogistic:
    labels = np.array([float(row.hallucinated) for row in rows])
    return fit_scaled(_matrix(rows), labels, [row.group for row in rows], VERDICT_FEATURES, VERDICT_L2)


def _matrix(rows: Sequence[VerdictRow]) -> Matrix:
    return np.array([row.features for row in rows], dtype=float).reshape(len(rows), len(VERDICT_FEATURES))
