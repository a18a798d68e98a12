"""Thresholds per application policy: each group's own fit, shrunk toward the global one.

One global fit serves every application badly when their label priors differ (a data
extraction job hallucinates more often than a docs search).  A policy group with enough
labels gets thresholds of its own; its fit is noisier than the pooled one, so what is
written is ``w * own + (1 - w) * global`` with ``w = n / (n + k)``: ``n`` the group's
labelled calls, ``k`` the shrinkage (how many labels a group needs before its own fit
counts as much as the global one).  A group that cannot be fitted (too few positives,
no threshold reaching the target precision) keeps the global thresholds, and says why.
Calls no policy selects (``default``) always take the global fit.  A policy may aim at its
own precision (``target_precision`` in its settings): an app whose calls are mostly
hallucinated reaches the global target at almost any threshold.

The same labels recalibrate the app's ``p_hallucination``: a Platt map from the probability
its calls were stored with to what its people found, shrunk toward "no change" by the same
weight, and composed with the map the app had, so the worker applies one map to the
verdict's global probability.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from detectors.thresholds import Thresholds
from detectors.verdict import PlattScaling
from pipeline.agreement.rules import AgreementRule
from pipeline.calibration.fitting import fit_platt
from pipeline.config.policy import DEFAULT_POLICY
from pipeline.offline.calibrate import (
    Calibration,
    CalibrationError,
    OperatingPoint,
    alert_point,
    calibrate,
    is_held_out,
)
from pipeline.offline.scored_calls import LabelledScores

DEFAULT_SHRINKAGE = 100.0
# The thresholds each group's held-out alerts are measured at.
GLOBAL, ALONE, SHRUNK = "global", "alone", "shrunk"


@dataclass(frozen=True, slots=True)
class PolicyCalibration:
    """One policy group's thresholds and how its held-out alerts fare under each choice."""

    policy: str
    records: int
    positives: int
    weight: float  # of the group's own fit in the written thresholds; 0.0 when it was not fitted
    note: str  # "fitted ..." or why the global thresholds stand
    alone: dict[str, float]  # the group's own thresholds, for the detectors it could fit
    thresholds: dict[str, float]  # what is written: shrunk toward the global fit
    heldout_alerts: dict[str, OperatingPoint]  # GLOBAL / ALONE / SHRUNK; empty without held-out records
    recalibration: PlattScaling | None = None  # of the app's p_hallucination; None: too few judged labels


def calibrate_policies(
    records: Sequence[LabelledScores],
    overall: Calibration,
    rule: AgreementRule,
    shrinkage: float = DEFAULT_SHRINKAGE,
    targets: Mapping[str, float] | None = None,
    current: Mapping[str, PlattScaling] | None = None,
) -> list[PolicyCalibration]:
    """Each policy group's calibration, by the choice rules of ``overall`` (the global fit).

    ``targets`` gives a policy its own target precision (it then wins over a cost ratio too);
    ``current`` is each policy's recalibration the stored probabilities already went through.
    """
    if shrinkage < 0:
        raise ValueError(f"shrinkage must be >= 0, got {shrinkage}")
    pooled = {name: detector.threshold for name, detector in overall.detectors.items()}
    by_policy = itertools.groupby(sorted(records, key=lambda r: r.policy), key=lambda r: r.policy)
    return [
        _calibrate_group(
            policy,
            list(group),
            overall,
            pooled,
            rule,
            shrinkage,
            (targets or {}).get(policy),
            (current or {}).get(policy, PlattScaling()),
        )
        for policy, group in by_policy
        if policy != DEFAULT_POLICY
    ]


def _calibrate_group(
    policy: str,
    records: list[LabelledScores],
    overall: Calibration,
    pooled: dict[str, float],
    rule: AgreementRule,
    shrinkage: float,
    target: float | None,
    current: PlattScaling,
) -> PolicyCalibration:
    positives = sum(r.hallucinated for r in records)
    # The policy's own target, else the global choice (target_precision goes unused under a cost ratio).
    target_precision = target or overall.target_precision or 1.0
    cost_ratio = None if target else overall.cost_ratio
    try:
        own = calibrate(
            records, Thresholds("global", pooled), rule, target_precision=target_precision, cost_ratio=cost_ratio,
            min_positives=overall.min_positives, min_flagged=overall.min_flagged, holdout=overall.holdout,
        )  # fmt: skip
    except CalibrationError as exc:
        alone: dict[str, float] = {}
        note = f"global thresholds: {exc}"
    else:
        alone = {name: d.threshold for name, d in own.detectors.items() if not d.kept}
        aim = f" at precision {target:g}" if target else ""
        fitted = f"fitted {', '.join(sorted(alone))}" if alone else "global thresholds: no detector could be fitted"
        note = fitted + aim
    weight = len(records) / (len(records) + shrinkage) if alone else 0.0
    shrunk = {name: weight * value + (1 - weight) * pooled[name] for name, value in alone.items()}
    heldout = [r for r in records if is_held_out(r.id, overall.holdout)]
    alerts = (
        {
            GLOBAL: alert_point(heldout, pooled, rule),
            ALONE: alert_point(heldout, pooled | alone, rule),
            SHRUNK: alert_point(heldout, pooled | shrunk, rule),
        }
        if heldout
        else {}
    )
    return PolicyCalibration(policy, len(records), positives, weight, note, alone, shrunk, alerts,
                             _recalibration(records, overall.min_positives, shrinkage, current))  # fmt: skip


def _recalibration(
    records: Sequence[LabelledScores], min_positives: int, shrinkage: float, current: PlattScaling
) -> PlattScaling | None:
    """The app's new map: its labels' Platt fit over the stored probabilities, shrunk, after its current map."""
    judged = [r for r in records if r.p_hallucination is not None]
    positives = sum(r.hallucinated for r in judged)
    if positives < min_positives or len(judged) - positives < min_positives:
        return None
    fit = fit_platt(np.array([r.p_hallucination for r in judged]), np.array([float(r.hallucinated) for r in judged]))
    weight = len(judged) / (len(judged) + shrinkage)
    return current.then(PlattScaling(1.0 + weight * (fit.slope - 1.0), weight * fit.intercept))


def policies_document(groups: Sequence[PolicyCalibration]) -> dict[str, Any]:
    """The thresholds file's ``policies:`` section (workers read each group's ``detectors``)."""
    return {
        group.policy: {
            "records": group.records,
            "positives": group.positives,
            "weight": round(group.weight, 4),
            "note": group.note,
            "detectors": {
                name: {"threshold": round(value, 6), "alone": round(group.alone[name], 6)}
                for name, value in sorted(group.thresholds.items())
            },
            "heldout_alerts": {choice: _rounded(point) for choice, point in group.heldout_alerts.items()},
            **(
                {
                    "calibration": {
                        "slope": round(group.recalibration.slope, 6),
                        "intercept": round(group.recalibration.intercept, 6),
                    }
                }
                if group.recalibration
                else {}
            ),
        }
        for group in groups
    }


def describe(groups: Sequence[PolicyCalibration]) -> list[str]:
    """Lines for the command's output: per group, what was written and held-out alerts under each choice."""
    lines = []
    for group in groups:
        lines.append(f"  policy {group.policy}: {group.records} labelled, {group.positives} positives, "
                     f"weight {group.weight:.2f}; {group.note}")  # fmt: skip
        for name, value in sorted(group.thresholds.items()):
            lines.append(f"    {name:<18} {value:.4g}  (alone {group.alone[name]:.4g})")
        if group.heldout_alerts:
            points = ", ".join(f"{choice} {_pr(point)}" for choice, point in group.heldout_alerts.items())
            lines.append(f"    held-out alerts P/R: {points}")
        if group.recalibration:
            r = group.recalibration
            lines.append(f"    p_hallucination recalibrated: logit * {r.slope:.3f} {r.intercept:+.3f}")
    return lines


def _rounded(point: OperatingPoint) -> Mapping[str, float]:
    return {"precision": round(point.precision, 4), "recall": round(point.recall, 4)}


def _pr(point: OperatingPoint) -> str:
    return f"{point.precision:.2f}/{point.recall:.2f} ({point.flagged} alerts)"
