"""An application's own map of ``p_hallucination`` and its route minimums, from its review-queue verdicts.

The review queue's verdicts are an audit sample drawn across probability strata, each stored
with its inclusion probability; weighted by the inverse of its stratum's (:func:`design_weights`),
a verdict stands for the calls like it, so the sample stands for all of the application's calls.
The map is a Platt map over the shipped
probability (before any map of the application's own), fitted on those weighted verdicts and
on pseudo-verdicts that say the shipped probability is right (each call "hallucinated" with
its own probability), ``shrinkage`` of them in all: with few verdicts the map stays near the
shipped calibration, with many it follows the application.

The fit is measured out of sample: each of :data:`FOLDS` folds of the verdicts scored by the
map fitted on the others, beside the probabilities the calls were scored with before (ECE, and
the Brier score that says whether the proposal is better).

A route's minimum governs the calls still to come: it is chosen there from everything the
application sent and its verdicts (:mod:`pipeline.calibration.operating_point`), the lowest whose
false alarms on calls to come have a one-sided 95 % bound at or under the route's target, raised
where the estimate at the current minimum is over it; below that evidence a route keeps its current
minimum (never one under the shipped minimum) and the proposal says how many more verdicts, and
where, could move it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from detectors.verdict import PlattScaling
from pipeline.calibration.alert_probability import RouteTargets
from pipeline.calibration.fitting import fit_logistic
from pipeline.calibration.operating_point import (
    Population,
    RouteChoice,
    TrafficCall,
    Verdict,
    choose_minimums,
    population_of,
)
from pipeline.calibration.reliability import expected_calibration_error
from pipeline.judge.weight import SHIPPED_PRIOR, JudgedVerdict, JudgeWeight, Judgment, fit_weight
from pipeline.rate.maps import JUDGE_REPORT_KEY, AppMap
from pipeline.rate.store import JudgedRow, TrafficRow
from pipeline.words import counted

DEFAULT_SHRINKAGE = 5.0
FOLDS = 5
SHIPPED = "shipped"  # the version of "no map of the application's own"
_EPSILON = 1e-6
_IDENTITY = PlattScaling()


@dataclass(frozen=True, slots=True)
class JudgedCall:
    """One verdict of the application's audit sample, with what the worker knew of its call."""

    key: str  # trace and span: the verdict's fold
    frame: str  # the sampling frame (application / stratum) it was drawn from
    shipped_probability: float  # p under the shipped calibration alone
    hallucinated: bool
    inclusion_probability: float
    flags: Mapping[str, int] = field(default_factory=dict)  # detectors that flagged it -> severity
    judgment: Judgment | None = None  # what the judge answered on the call (None: it was not asked)


@dataclass(frozen=True, slots=True)
class Proposal:
    """A new map for one application, and what it does against the one its calls are scored with now."""

    app: str
    version: str
    calibration: PlattScaling
    verdicts: int
    measured: OutOfSample | None  # None without verdicts with a probability
    routes: tuple[RouteChoice, ...]
    routes_before: tuple[RouteChoice, ...]
    judge: JudgeWeight = SHIPPED_PRIOR  # the judge's weight, fitted on the verdicts on calls it answered

    @property
    def keeps_map(self) -> bool:
        """Whether the proposal keeps the current map (a refit did not beat it out of sample)."""
        return self.measured is not None and not self.measured.better

    @property
    def ece_before(self) -> float | None:
        """ECE out of sample of the map the calls are scored with now."""
        return self.measured.ece_before if self.measured else None

    @property
    def ece_after(self) -> float | None:
        """ECE out of sample of the proposal."""
        return self.measured.ece_after if self.measured else None

    @property
    def minimums(self) -> dict[str, float]:
        """Each gated route's minimum under the proposal."""
        return {r.route: r.min_probability for r in self.routes}

    def stored(self) -> AppMap:
        """The proposal as the maps table keeps it."""
        return AppMap(self.app, self.version, self.calibration, self.minimums, self.verdicts, self.report())

    def report(self) -> dict[str, Any]:
        """What the proposal was measured to do (stored with it, shown before it is applied)."""
        m = self.measured
        brier = (m.brier_before, m.brier_after) if m else (None, None)
        return {"ece_before": _round(self.ece_before), "ece_after": _round(self.ece_after),
                "brier_before": _round(brier[0], 6), "brier_after": _round(brier[1], 6), "keeps_map": self.keeps_map,
                "routes": [r.to_dict() for r in self.routes],
                "routes_before": [r.to_dict() for r in self.routes_before],
                JUDGE_REPORT_KEY: {"sensitivity": round(self.judge.sensitivity, 4),
                                   "specificity": round(self.judge.specificity, 4),
                                   "verdicts": self.judge.verdicts, "note": self.judge.note}}  # fmt: skip


def to_logit(p: np.ndarray[Any, np.dtype[np.float64]]) -> np.ndarray[Any, np.dtype[np.float64]]:
    """The logit of probabilities, clipped off 0 and 1."""
    clipped = np.clip(p, _EPSILON, 1 - _EPSILON)
    logit: np.ndarray[Any, np.dtype[np.float64]] = np.log(clipped / (1 - clipped))
    return logit


def fit_map(calls: Sequence[JudgedCall], shrinkage: float = DEFAULT_SHRINKAGE) -> PlattScaling:
    """The application's Platt map over the shipped probability, shrunk toward the shipped calibration."""
    if shrinkage < 0:
        raise ValueError(f"shrinkage must be >= 0, got {shrinkage}")
    if not calls:
        return PlattScaling()
    p = np.array([c.shipped_probability for c in calls])
    weights = np.array(design_weights(calls))
    effective = weights.sum() ** 2 / (weights**2).sum()  # Kish: what the weighted verdicts are worth
    real = weights * effective / weights.sum()
    prior = weights * shrinkage / weights.sum()
    x = np.concatenate([to_logit(p), to_logit(p)])[:, None]
    y = np.concatenate([[float(c.hallucinated) for c in calls], p])
    coef, intercept = fit_logistic(x, y, np.concatenate([real, prior]), 0.0)
    return PlattScaling(float(coef[0]), intercept)


def design_weights(calls: Sequence[JudgedCall]) -> list[float]:
    """What each verdict stands for: the inverse of its stratum's inclusion probability as it stands now.

    A call drawn as its stratum's k-th of N was stored with k / N; the sample holds n of the
    stratum's calls, so each now stands for N / n calls, the inverse of the newest verdict's k / N
    (the largest stored in its frame).  Weighing each by its own k / N would let the stratum's first
    verdict (1 / N) outweigh all the others.
    """
    newest: dict[str, float] = {}
    for c in calls:
        newest[c.frame] = max(newest.get(c.frame, 0.0), c.inclusion_probability)
    return [1.0 / max(newest[c.frame], _EPSILON) for c in calls]


def fold_of(key: str) -> int:
    """A verdict's fold for the out-of-sample measure: a hash of its call, the same on every run."""
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") % FOLDS


@dataclass(frozen=True, slots=True)
class OutOfSample:
    """The current map and the fitted one on the verdicts, each verdict scored by a fit without its fold.

    ECE (weighted, ten bins) is what the page shows; the Brier score (weighted mean squared error
    of p) decides whether a proposal is better, because ECE on a hundred verdicts is mostly bin noise.
    """

    ece_before: float
    ece_after: float
    brier_before: float
    brier_after: float

    @property
    def better(self) -> bool:
        """Whether the fitted map scores the verdicts better than the current one."""
        return self.brier_after < self.brier_before


def out_of_sample(calls: Sequence[JudgedCall], shrinkage: float, current: PlattScaling) -> OutOfSample | None:
    """The current map and the fitted one measured out of sample on ``calls``; None without calls."""
    if not calls:
        return None
    fitted = np.zeros(len(calls))
    folds = [fold_of(c.key) for c in calls]
    shipped = np.array([c.shipped_probability for c in calls])
    for fold in set(folds):
        inside = np.array([f == fold for f in folds])
        fit = fit_map([c for c, i in zip(calls, inside, strict=True) if not i], shrinkage)
        fitted[inside] = fit.apply(shipped[inside])
    labels = [c.hallucinated for c in calls]
    weights = design_weights(calls)
    now = current.apply(shipped)
    return OutOfSample(
        expected_calibration_error(list(now), labels, weights=weights),
        expected_calibration_error(list(fitted), labels, weights=weights),
        _brier(now, labels, weights),
        _brier(fitted, labels, weights),
    )


def _brier(p: np.ndarray[Any, np.dtype[np.float64]], labels: Sequence[bool], weights: Sequence[float]) -> float:
    return float(np.average((p - np.array(labels, dtype=float)) ** 2, weights=weights))


def route_estimates(
    calls: Sequence[JudgedCall],
    population: Mapping[str, int],
    calibration: PlattScaling,
    routing: RouteTargets,
    held_minimums: Mapping[str, float],
    choose: bool = True,
    traffic: Sequence[TrafficCall] | None = None,
    judge: JudgeWeight = SHIPPED_PRIOR,
    shrinkage: float = DEFAULT_SHRINKAGE,
) -> tuple[RouteChoice, ...]:
    """Each gated route's minimum on ``calibration``'s scale (chosen, or the held one), measured on calls to come.

    ``held_minimums``: each route's minimum on the shipped probability that it keeps until the
    evidence shows another (absent: the route is closed).  ``traffic``: every call of the window
    (without it, the verdicts stand for their strata's calls).  ``population``: calls per frame,
    which says the strata that hold calls and so need verdicts.
    """
    weights = design_weights(calls)
    verdicts = [Verdict(TrafficCall(c.shipped_probability, c.flags, c.judgment), c.hallucinated, c.frame, w)
                for c, w in zip(calls, weights, strict=True)]  # fmt: skip
    measured = Population(population_of(traffic, verdicts), verdicts, calibration, judge, routing, shrinkage)
    held = {route: calibration.apply_one(minimum) for route, minimum in held_minimums.items()}
    return choose_minimums(measured, held, choose, short=_short(calls, population), held_on_shipped=held_minimums)


def _short(calls: Sequence[JudgedCall], population: Mapping[str, int]) -> str:
    """Why the verdicts cannot move a minimum yet: strata holding calls with under two verdicts (empty: they can)."""
    judged: dict[str, int] = {}
    for c in calls:
        judged[c.frame] = judged.get(c.frame, 0) + 1
    short = {frame: min(2, size) - judged.get(frame, 0) for frame, size in population.items()
             if size > 0 and judged.get(frame, 0) < min(2, size)}  # fmt: skip
    if not short:
        return ""
    return "too few verdicts yet: " + ", ".join(f"{counted(n, 'more verdict')} in stratum {frame}"
                                                for frame, n in short.items())  # fmt: skip


def propose(
    app: str,
    calls: Sequence[JudgedCall],
    population: Mapping[str, int],
    routing: RouteTargets,
    shipped_minimums: Mapping[str, float],
    current: AppMap | None = None,
    shrinkage: float = DEFAULT_SHRINKAGE,
    traffic: Sequence[TrafficCall] | None = None,
) -> Proposal:
    """A new map and route minimums for ``app`` from its verdicts and traffic, measured against its ``current`` map.

    The map is refitted only where the refit beats the current one out of sample (a refit of a map
    that was already right moves it by noise); the minimums are chosen for calls to come either way.
    A route keeps its current minimum, never one under the shipped minimum, until the evidence shows another.
    """
    now = current.calibration if current else _IDENTITY
    current_minimums = _on_shipped(current) if current else {}
    held = {route: max(minimum, current_minimums.get(route, minimum)) for route, minimum in shipped_minimums.items()}
    measured = out_of_sample(calls, shrinkage, now)
    calibration = fit_map(calls, shrinkage) if measured is None or measured.better else now
    judge = fit_weight([JudgedVerdict(c.judgment, c.hallucinated) for c in calls if c.judgment is not None])
    routes = route_estimates(calls, population, calibration, routing, held, True, traffic, judge, shrinkage)
    routes_before = route_estimates(calls, population, now, routing, {**shipped_minimums, **current_minimums}, False,
                                    traffic, current.judge if current else SHIPPED_PRIOR, shrinkage)  # fmt: skip
    recipe = json.dumps([app, calibration.to_dict(), {r.route: r.min_probability for r in routes}, len(calls),
                         [judge.sensitivity, judge.specificity]])  # fmt: skip
    version = f"{app}-{hashlib.sha256(recipe.encode()).hexdigest()[:10]}"
    return Proposal(app, version, calibration, len(calls), measured, routes, routes_before, judge)


def _on_shipped(applied: AppMap) -> dict[str, float]:
    """An applied map's route minimums on the shipped probability (the scale proposals fit on)."""
    undo = applied.calibration.inverse()
    return {route: undo.apply_one(minimum) for route, minimum in applied.minimums.items()}


def _round(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)


def judged_calls(rows: Sequence[JudgedRow], maps: Mapping[str, PlattScaling]) -> list[JudgedCall]:
    """The verdicts with their shipped probability: each stored one taken back through the map it went through.

    ``maps``: the calibration of each map version the rows name (a version it lacks is taken as none).
    """
    out = []
    for row in rows:
        undo = maps.get(row.map_version, _IDENTITY).inverse()
        out.append(JudgedCall(f"{row.trace_id}:{row.span_id}", row.frame, undo.apply_one(row.probability),
                              row.hallucinated, row.inclusion_probability, row.flags,
                              _judgment(row.judgment)))  # fmt: skip
    return out


def traffic_calls(rows: Sequence[TrafficRow], total: int, maps: Mapping[str, PlattScaling]) -> list[TrafficCall]:
    """The window's calls (``rows``, a random sample of its ``total``) with their shipped probability and signals."""
    stands_for = total / len(rows) if rows else 1.0
    return [TrafficCall(maps.get(row.map_version, _IDENTITY).inverse().apply_one(row.probability), row.flags,
                        _judgment(row.judgment), stands_for) for row in rows]  # fmt: skip


def _judgment(stored: str) -> Judgment | None:
    """A stored judgment ('' when the judge was not asked; anything unreadable is "unknown")."""
    if not stored:
        return None
    return Judgment(stored) if stored in set(Judgment) else Judgment.UNKNOWN


def judge_line(judge: JudgeWeight) -> str:
    """The judge's weight in one line: what a "hallucinated" and a "faithful" answer do to p, and why."""
    if not judge.weighs:
        return f"the judge's answers: no weight ({judge.note})"
    return (f"the judge's answers: sensitivity {judge.sensitivity:.2f}, specificity {judge.specificity:.2f} "
            f"(\"hallucinated\" adds {judge.shift(Judgment.HALLUCINATED):+.2f} to the logit of p, "
            f"\"faithful\" {judge.shift(Judgment.FAITHFUL):+.2f}; {judge.note})")  # fmt: skip


def describe(proposal: Proposal, judging: bool = True) -> list[str]:
    """The proposal as the command prints it: ECE, the judge's weight where a judge runs, each route's minimum."""
    c = proposal.calibration
    lines = [
        f"proposal {proposal.version} for {proposal.app}: {proposal.verdicts} review verdicts; "
        f"p_hallucination mapped as logit * {c.slope:.3f} {c.intercept:+.3f} over the shipped calibration",
        f"  ECE out of sample: {_ece(proposal.ece_before)} now -> {_ece(proposal.ece_after)} refitted"
        + ("; the current map is kept (the refit does not beat it)" if proposal.keeps_map else ""),
    ]
    if judging:
        lines.append(f"  {judge_line(proposal.judge)}")
    return lines + route_lines(proposal.report(), c)


def operating_point_lines(app: str, proposal: AppMap | None) -> list[str]:
    """What `halluwatch rate --app` adds: each route's minimum for calls to come, from the newest proposal."""
    if proposal is None:
        return [f"route minimums for calls to come: no proposal yet (`halluwatch calibrate --app {app}` makes one)"]
    apply = f"`halluwatch calibrate --app {app} --apply {proposal.version}` or the review page applies it"
    head = f"route minimums for calls to come (proposal {proposal.version}, {proposal.verdicts} verdicts; {apply}):"
    return [head, *route_lines(proposal.report, proposal.calibration)]


def route_lines(report: Mapping[str, Any], calibration: PlattScaling) -> list[str]:
    """Each route of a proposal's report: its minimum now and proposed on the proposal's scale, and what it does.

    What it does on calls to come: faithful calls alerted (the estimate and its 95 % bound), the
    share of hallucinations caught, precision, and for a kept minimum how many more verdicts, and
    on which calls, could move it.
    """
    before = {r["route"]: r for r in report.get("routes_before", [])}
    lines = []
    for route in report.get("routes", []):
        now = before.get(route["route"])
        current = f"{calibration.apply_one(now['shipped_minimum']):.3f}" if now and "shipped_minimum" in now else "-"
        lines.append(f"  route {route['route']}: p >= {current} now -> {route['min_probability']:.3f} proposed "
                     f"(target {route['target']:.0%} of faithful calls to come); {route['note']}")  # fmt: skip
        was = _bounded(now["false_alarms"]) if now else "-"
        caught, precision = _share(route.get("caught", {})), _share(route["precision"])
        lines.append(f"    false alarms {_bounded(route['false_alarms'])} (now {was}), "
                     f"catches {caught} of hallucinations, precision {precision}")  # fmt: skip
        if route.get("needed_in"):
            lines.append(f"    about {counted(route['more_verdicts'], 'more verdict')} on calls with "
                         f"{route['needed_in']} could let it move")  # fmt: skip
    return lines


def _ece(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _bounded(estimate: Mapping[str, Any]) -> str:
    """``2.1 % (at most 2.8 %, 95 %)``: an estimate's report form with its one-sided bound."""
    if estimate.get("value") is None or estimate.get("high") is None:
        return f"unknown ({estimate.get('shortfall', '')})"
    return f"{estimate['value']:.1%} (at most {estimate['high']:.1%}, 95 %)"


def _share(estimate: Mapping[str, Any]) -> str:
    return "-" if estimate.get("value") is None else f"{estimate['value']:.0%}"
