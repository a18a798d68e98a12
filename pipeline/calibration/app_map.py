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

A route's minimum governs the calls still to come, so its false alarms are estimated for them
(stratified, :mod:`pipeline.rate.estimator`, with no finite-population correction: judging every
call of the window is still a sample of the application's traffic).  A route keeps its current
minimum (never one under the shipped minimum) until the verdicts show another: lower, to the
lowest minimum whose false alarms stay under the route's target with their whole 95 % interval;
higher (the cautious direction, on the estimate alone), when the estimate at the current minimum
is over the target.  A 1 % target with
no false alarm among the verdicts needs some 380 faithful verdicts' worth of evidence before the
minimum may fall; until then the proposal says how many more verdicts could move it.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from detectors.verdict import PlattScaling
from pipeline.calibration.alert_probability import RouteTargets
from pipeline.calibration.fitting import fit_logistic
from pipeline.calibration.reliability import expected_calibration_error
from pipeline.config.alerting import gated_routes
from pipeline.judge.weight import SHIPPED_PRIOR, JudgedVerdict, JudgeWeight, Judgment, fit_weight
from pipeline.rate.estimator import Estimate, Judged, estimate_ratio, growth_to_bound
from pipeline.rate.maps import JUDGE_REPORT_KEY, AppMap
from pipeline.rate.store import JudgedRow
from pipeline.words import counted

DEFAULT_SHRINKAGE = 5.0
COULD_MOVE = "could let it move"
MAX_CANDIDATES = 200  # the most minimums a route's choice tries (every verdict's, up to this many)
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
class RouteEstimate:
    """One route under a map: its minimum, the share of faithful calls it alerts on, its precision."""

    route: str
    min_probability: float
    target: float
    false_alarms: Estimate  # faithful calls alerted on the route (or one before it), of the faithful
    precision: Estimate  # hallucinated calls among those alerted on the route
    note: str = ""  # why the minimum is what it is
    needed_in: str = ""  # where the verdicts that could move a kept minimum are most needed: a stratum

    def to_dict(self) -> dict[str, Any]:
        """The proposal report's form."""
        return {"route": self.route, "min_probability": round(self.min_probability, 4), "target": self.target,
                "false_alarms": _estimate_dict(self.false_alarms), "precision": _estimate_dict(self.precision),
                "note": self.note, "needed_in": self.needed_in}  # fmt: skip


@dataclass(frozen=True, slots=True)
class Proposal:
    """A new map for one application, and what it does against the one its calls are scored with now."""

    app: str
    version: str
    calibration: PlattScaling
    verdicts: int
    measured: OutOfSample | None  # None without verdicts with a probability
    routes: tuple[RouteEstimate, ...]
    routes_before: tuple[RouteEstimate, ...]
    judge: JudgeWeight = SHIPPED_PRIOR  # the judge's weight, fitted on the verdicts on calls it answered

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
                "brier_before": _round(brier[0], 6), "brier_after": _round(brier[1], 6),
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
) -> tuple[RouteEstimate, ...]:
    """Each gated route's minimum (chosen, or the held one) and its false alarms and precision from the verdicts.

    ``held_minimums``: each route's minimum on the shipped probability that it keeps until the
    verdicts show another (absent: the route is closed).  The estimates are for calls to come.
    """
    p = list(calibration.apply(np.array([c.shipped_probability for c in calls]))) if calls else []
    minimums = {route: 1.0 + 1e-9 for route in gated_routes(routing.rules)}
    estimates = []
    for index, route in enumerate(minimums):
        so_far = set(list(minimums)[: index + 1])
        target = routing.targets[route]

        def measured(minimum: float, route: str = route, so_far: set[str] = so_far) -> tuple[Estimate, Estimate]:
            agreement = routing.agreement({**minimums, route: minimum})
            on = [_route(agreement, c, float(q)) for c, q in zip(calls, p, strict=True)]
            alarms = [Judged(float(r in so_far and not c.hallucinated), float(not c.hallucinated))
                      for c, r in zip(calls, on, strict=True)]  # fmt: skip
            hits = [Judged(float(r == route and c.hallucinated), float(r == route))
                    for c, r in zip(calls, on, strict=True)]  # fmt: skip
            return _stratified(calls, alarms, population), _stratified(calls, hits, population)

        held = calibration.apply_one(held_minimums[route]) if route in held_minimums else 1.0
        minimum, note = held, "the current gate"
        if choose:
            candidates = sorted({0.0, held, *_candidate_minimums(p)})
            minimum, note = _choose(measured, candidates, target, held, len(calls))
        minimums[route] = minimum
        false_alarms, precision = measured(minimum)
        needed_in = false_alarms.widest if note.endswith(COULD_MOVE) else ""
        if minimum == held and route in held_minimums:  # the same gate, on the new map's scale of p
            note += f" (p {held_minimums[route]:.3f} on the shipped scale)"
        estimates.append(RouteEstimate(route, minimum, target, false_alarms, precision, note, needed_in))
    return tuple(estimates)


def _candidate_minimums(p: Sequence[float]) -> list[float]:
    """Minimums just above verdicts' probabilities: each one's, or evenly spaced ones of many (and the highest).

    Each candidate costs a pass over the verdicts, so thousands of them would keep a page's
    request waiting for seconds; between two of :data:`MAX_CANDIDATES` spaced candidates the
    chooser takes the higher, which alerts on no more calls.
    """
    ordered = sorted(set(p))
    if len(ordered) > MAX_CANDIDATES:
        step = len(ordered) / MAX_CANDIDATES
        ordered = [ordered[int(i * step)] for i in range(MAX_CANDIDATES)] + [ordered[-1]]
    return [q + 1e-9 for q in ordered]


def _choose(measured: Any, candidates: Sequence[float], target: float, held: float, verdicts: int) -> tuple[float, str]:
    """The route's minimum: lower than ``held`` only where the verdicts show the target holds; higher where it may not.

    ``held`` is the minimum the route keeps otherwise (the current or shipped gate carried through
    the new map: the same calls pass it).  Lower: the lowest candidate whose false alarms on calls
    to come stay under ``target`` with their whole 95 % interval.  Higher, the cautious direction,
    on the estimate alone: when the estimate at ``held`` is over the target, the lowest candidate
    whose estimate is under it (waiting for confidence would keep paging people meanwhile).
    """
    for candidate in [c for c in candidates if c <= held]:
        false_alarms, _ = measured(candidate)
        if false_alarms.high is not None and false_alarms.high <= target:
            return candidate, f"the verdicts show at most {target:.0%} on calls to come (95 %)"
    at_held, _ = measured(held)
    if at_held.value is None:
        return held, "the current gate kept: too few verdicts yet (each stratum with calls needs two)"
    if at_held.value > target:
        for candidate in [c for c in candidates if c > held]:
            false_alarms, _ = measured(candidate)
            if false_alarms.value is not None and false_alarms.value <= target:
                estimate = f"{at_held.value:.1%}, over the target (an estimate, not yet 95 % sure)"
                return candidate, f"raised: the verdicts estimate the current gate's false alarms at {estimate}"
        # Even a minimum above every verdict's p leaves the estimate over the target: the false alarms past it
        # come from rules no probability gates (facts) or from an earlier route, and closing this route's gated
        # rules would silence them without meeting the target.
        return held, "the current gate kept: no minimum keeps the target; the false alarms past it are not the gate's"
    return held, f"the current gate kept: {_what_would_move(at_held, target, verdicts)}"


def _what_would_move(false_alarms: Estimate, target: float, verdicts: int) -> str:
    """Why ``verdicts`` cannot lower the gate, and how many more, drawn as the queue draws them, could."""
    shown = f"{counted(verdicts, 'verdict')} cannot show a false-alarm rate under {target:.0%} on calls to come"
    growth = growth_to_bound(false_alarms, target)
    if growth is None:
        return f"{shown}: the verdicts put it at {false_alarms.value:.1%} at this gate"
    more = max(1, math.ceil(verdicts * (growth - 1)))
    return f"{shown}; about {more} more, drawn as the queue draws them, {COULD_MOVE}"


def propose(
    app: str,
    calls: Sequence[JudgedCall],
    population: Mapping[str, int],
    routing: RouteTargets,
    shipped_minimums: Mapping[str, float],
    current: AppMap | None = None,
    shrinkage: float = DEFAULT_SHRINKAGE,
) -> Proposal:
    """A new map and route minimums for ``app`` from its verdicts, measured against its ``current`` map.

    A route keeps its current minimum, never one under the shipped minimum, until its verdicts show another.
    """
    now = current.calibration if current else _IDENTITY
    current_minimums = _on_shipped(current) if current else {}
    held = {route: max(minimum, current_minimums.get(route, minimum)) for route, minimum in shipped_minimums.items()}
    calibration = fit_map(calls, shrinkage)
    measured = out_of_sample(calls, shrinkage, now)
    routes = route_estimates(calls, population, calibration, routing, held)
    routes_before = route_estimates(calls, population, now, routing, {**shipped_minimums, **current_minimums}, False)
    judge = fit_weight([JudgedVerdict(c.judgment, c.hallucinated) for c in calls if c.judgment is not None])
    recipe = json.dumps([app, calibration.to_dict(), {r.route: r.min_probability for r in routes}, len(calls),
                         [judge.sensitivity, judge.specificity]])  # fmt: skip
    version = f"{app}-{hashlib.sha256(recipe.encode()).hexdigest()[:10]}"
    return Proposal(app, version, calibration, len(calls), measured, routes, routes_before, judge)


def _on_shipped(applied: AppMap) -> dict[str, float]:
    """An applied map's route minimums on the shipped probability (the scale proposals fit on)."""
    undo = applied.calibration.inverse()
    return {route: undo.apply_one(minimum) for route, minimum in applied.minimums.items()}


def _route(agreement: Any, call: JudgedCall, probability: float) -> str | None:
    rule = agreement.first_match(call.flags, probability)
    return rule.route if rule else None


def _stratified(calls: Sequence[JudgedCall], parts: Sequence[Judged], population: Mapping[str, int]) -> Estimate:
    judged: dict[str, list[Judged]] = {}
    for call, part in zip(calls, parts, strict=True):
        judged.setdefault(call.frame, []).append(part)
    return estimate_ratio({frame: size for frame, size in population.items() if frame in judged}, judged, future=True)


def _estimate_dict(estimate: Estimate) -> dict[str, Any]:
    return {"value": _round(estimate.value), "low": _round(estimate.low), "high": _round(estimate.high),
            "verdicts": estimate.verdicts, "shortfall": estimate.shortfall, "short": bool(estimate.short)}  # fmt: skip


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


def describe(proposal: Proposal) -> list[str]:
    """The proposal as the command prints it: ECE before and after, each route's minimum and false alarms."""
    c = proposal.calibration
    lines = [
        f"proposal {proposal.version} for {proposal.app}: {proposal.verdicts} review verdicts; "
        f"p_hallucination mapped as logit * {c.slope:.3f} {c.intercept:+.3f} over the shipped calibration",
        f"  ECE out of sample: {_ece(proposal.ece_before)} now -> {_ece(proposal.ece_after)} with the proposal",
        f"  {judge_line(proposal.judge)}",
    ]
    before = {r.route: r for r in proposal.routes_before}
    for route in proposal.routes:
        now = before.get(route.route)
        lines.append(
            f"  route {route.route:<8} p >= {route.min_probability:.3f}: false alarms {_interval(route.false_alarms)} "
            f"of faithful calls to come (target {route.target:.0%}; now {_interval(now.false_alarms) if now else '-'} "
            f"at {now.min_probability if now else 1.0:.3f}), precision {_interval(route.precision)}; {route.note}"
            + (f" (most needed in stratum {route.needed_in})" if route.needed_in else "")
        )
    return lines


def _ece(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _interval(estimate: Estimate) -> str:
    if estimate.value is None or estimate.low is None or estimate.high is None:
        return f"unknown ({estimate.shortfall})"
    return f"{estimate.value:.1%} (95 % CI {estimate.low:.1%}-{estimate.high:.1%})"
