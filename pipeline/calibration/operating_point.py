"""Each alert route's minimum for an application's calls to come: the lowest its false-alarm promise allows.

A route promises a share of faithful calls it may alert on (pages 1 %, every alert 3 %).  Its
minimum is chosen for the calls still to come from two things the application gave: its
**traffic** (every call of the review window with its shipped ``p_hallucination``, flags and the
judge's answer, if asked) and its **verdicts** (the review queue's stratified audit sample of it).

The estimate.  A logistic model of "hallucinated" over the shipped p (its logit), whether the
call's detectors agree on an alert rule at all (the rules' second signal, which p alone may not
carry on an application's own traffic) and the judge's answer (its weight's log-likelihood ratio,
a known offset) is fitted on the verdicts, each standing for its stratum, and shrunk toward the
shipped p being right.  Applied to every call of the traffic, it says how many faithful calls a
candidate minimum lets through: ``sum(1 - q) over the alerted / sum(1 - q) over all``.  Verdicts
alone could not: 200 of them hold some dozens in the band a minimum moves through, and a share of
a few percent among those is known to within tens of percent.

The bound.  Two things make the rate on calls to come differ from that estimate, and a bootstrap
draws both: the verdicts (resampled within their strata, the model refitted) and the traffic
(Poisson weights: the calls to come are another sample of the same application).  The 95th
percentile of the replicates' share is a one-sided 95 % upper bound of the rate.

The choice.  Candidates are walked from the highest down, a fixed sequence that needs no
correction for testing many (Maurer et al., 1995); the minimum is the last before the first whose
bound is over the target.  It falls below the held minimum only when that is shown; it is raised
when the estimate at the held minimum is over the target (waiting for confidence would keep paging
people meanwhile).  Below the evidence the held minimum stays: a stratum holding calls with fewer
than two verdicts, fewer faithful verdicts than one false alarm at the
target takes (``1 / target``: below that even a route at its target shows none among them, and
the model alone would speak), or a bound that does not reach the target; the choice then says in
which band of p more verdicts would decide it, and about how many.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from detectors.verdict import PlattScaling
from pipeline.agreement.rules import AgreementRule
from pipeline.calibration.alert_probability import RouteTargets
from pipeline.calibration.fitting import fit_logistic
from pipeline.config.alerting import JUDGE, JUDGE_SEVERITY, gated_routes
from pipeline.judge.weight import JudgeWeight, Judgment
from pipeline.rate.estimator import Estimate

DRAWS = 200  # bootstrap replicates: the 95th percentile of 200 is known to about a tenth of the spread
MAX_CANDIDATES = 200  # the most minimums a route's choice tries
BOUND = 0.95
CLOSED = 1.0 + 1e-9  # a minimum no probability reaches
_EPSILON = 1e-6
Vector = np.ndarray[Any, np.dtype[np.float64]]


@dataclass(frozen=True, slots=True)
class TrafficCall:
    """One call the application sent: what the rules read of it, and how many calls it stands for."""

    shipped_probability: float
    flags: Mapping[str, int]  # detectors that flagged it -> severity
    judgment: Judgment | None = None  # what the judge answered (None: it was not asked)
    weight: float = 1.0  # calls it stands for (a sample of the window's traffic: more than one)


@dataclass(frozen=True, slots=True)
class Verdict:
    """One audit verdict on a call of the traffic, with the stratum it was drawn from and what it stands for."""

    call: TrafficCall
    hallucinated: bool
    frame: str
    design_weight: float  # the calls of its stratum it stands for: the inverse of its inclusion probability


@dataclass(frozen=True, slots=True)
class RouteChoice:
    """One route's minimum on the map's scale, what it does on calls to come, and why it is what it is."""

    route: str
    min_probability: float
    target: float
    false_alarms: Estimate  # faithful calls to come alerted on the route or one before it, of the faithful
    precision: Estimate  # hallucinated among the calls to come alerted on it or one before it
    caught: Estimate  # hallucinated calls to come alerted on it or one before it, of the hallucinated
    note: str
    shipped_minimum: float  # the same gate on the shipped p (one scale for two maps' minimums)
    needed_in: str = ""  # the band of p whose verdicts could move a kept minimum ("p 0.62-0.93")
    more_verdicts: int = 0  # about how many more verdicts, drawn as the queue draws them, could

    def to_dict(self) -> dict[str, Any]:
        """The proposal report's form."""
        return {"route": self.route, "min_probability": round(self.min_probability, 4), "target": self.target,
                "shipped_minimum": round(self.shipped_minimum, 4), "false_alarms": _estimate_dict(self.false_alarms),
                "precision": _estimate_dict(self.precision), "caught": _estimate_dict(self.caught),
                "note": self.note, "needed_in": self.needed_in, "more_verdicts": self.more_verdicts}  # fmt: skip


@dataclass(frozen=True, slots=True)
class _Rows:
    """Calls as arrays: the model's inputs and the p the rules compare with a minimum."""

    logit: Vector  # of the shipped p
    agree: Vector  # 1 where the detectors' flags fire a rule when no probability gates it
    offset: Vector  # the judge's answer, in logit
    score: Vector  # the p the rules read: the map's, with the judge's answer in
    weight: Vector
    flags: list[Mapping[str, int]]  # the flags the rules read, the judge's among them


class Population:
    """The application's traffic and verdicts under one map and judge weight, ready for many candidate minimums."""

    def __init__(
        self,
        traffic: Sequence[TrafficCall],
        verdicts: Sequence[Verdict],
        calibration: PlattScaling,
        judge: JudgeWeight,
        routing: RouteTargets,
        shrinkage: float,
    ) -> None:
        self._calibration, self._judge, self._routing = calibration, judge, routing
        self._verdicts = list(verdicts)
        opened = routing.agreement(dict.fromkeys(gated_routes(routing.rules), 0.0))
        self.traffic = self._rows(list(traffic), opened)
        self.judged = self._rows([v.call for v in self._verdicts], opened)
        self.labels = np.array([float(v.hallucinated) for v in self._verdicts])
        self.frames = [v.frame for v in self._verdicts]
        self._shrinkage = shrinkage
        self.model, self._covariance = self._fit()

    @property
    def routing(self) -> RouteTargets:
        """The rules and targets the calls are routed by."""
        return self._routing

    def on_shipped(self, minimum: float) -> float:
        """A minimum on the map's scale as the shipped p the same calls pass it at."""
        return minimum if minimum > 1.0 else self._calibration.inverse().apply_one(minimum)

    def _rows(self, calls: Sequence[TrafficCall], opened: AgreementRule) -> _Rows:
        shipped = np.array([c.shipped_probability for c in calls], dtype=float)
        judgments = [c.judgment or Judgment.UNKNOWN for c in calls]
        mapped = self._calibration.apply(shipped) if calls else shipped
        scores = np.array([self._judge.apply(float(p), j) for p, j in zip(mapped, judgments, strict=True)])
        flags = [self._signals(c.flags, j) for c, j in zip(calls, judgments, strict=True)]
        agree = np.array([route is not None for route in routes_of(opened, flags, np.ones(len(calls)))], dtype=float)
        return _Rows(_logit(shipped), agree, np.array([self._judge.shift(j) for j in judgments]),
                     scores.astype(float), np.array([c.weight for c in calls], dtype=float), flags)  # fmt: skip

    def _signals(self, flags: Mapping[str, int], judgment: Judgment) -> Mapping[str, int]:
        """The flags the rules read: the judge's "hallucinated" is one more, where its answers weigh."""
        if judgment == Judgment.HALLUCINATED and self._judge.weighs:
            return {**flags, JUDGE: JUDGE_SEVERITY}
        return flags

    def _fit(self) -> tuple[Vector, Vector]:
        """The model's coefficients (intercept, logit, agree, agree x logit) and their covariance, from the verdicts.

        Each verdict counts once: the queue draws by p and by whether an alert was raised, both
        inputs of the model, so the draw says nothing more about the label (it is ignorable) and the
        verdicts it oversampled where minimums move inform the model there.  Beside them: the shipped
        p's pseudo-verdicts (``shrinkage`` in all) and, in each stratum, half a verdict of each label
        at its calls' mean (a Jeffreys-like prior: a stratum whose verdicts all say one thing is not
        read as certain, and no coefficient runs off to infinity).
        """
        j = self.judged
        x = _features(j.logit, j.agree)
        frames = sorted(set(self.frames))
        means = np.array([x[[f == frame for f in self.frames]].mean(axis=0) for frame in frames]).reshape(-1, 4)
        offsets = np.array([j.offset[[f == frame for f in self.frames]].mean() for frame in frames])
        rows = np.vstack([x, x, means, means])
        labels = np.concatenate(
            [self.labels, _sigmoid(j.logit + j.offset), np.ones(len(frames)), np.zeros(len(frames))]
        )
        weights = np.concatenate([np.ones(len(x)), np.full(len(x), self._shrinkage / max(len(x), 1)),
                                  np.full(2 * len(frames), 0.5)])  # fmt: skip
        offset = np.concatenate([j.offset, j.offset, offsets, offsets])
        if not len(x):
            return np.array([0.0, 1.0, 0.0, 0.0]), np.zeros((4, 4))
        coef, intercept = fit_logistic(rows[:, 1:], labels, weights, 1e-3, offset=offset)
        model = np.concatenate([[intercept], coef])
        q = _sigmoid(rows @ model + offset)
        information = (rows * (weights * q * (1 - q))[:, None]).T @ rows + 1e-3 * np.eye(4)
        return model, np.linalg.inv(information)

    def hallucinated(self, model: Vector) -> Vector:
        """Each traffic call's probability of being hallucinated under ``model``'s coefficients."""
        t = self.traffic
        return _sigmoid(_features(t.logit, t.agree) @ model + t.offset)

    def replicates(self, draws: int, seed: int) -> list[tuple[Vector, Vector]]:
        """``draws`` replicates of each traffic call's weight and its probability of being hallucinated.

        The coefficients are drawn from their posterior (normal at the fit, with the inverse of its
        information: Laplace's approximation), the traffic's weights from Poisson(1) (the calls to
        come are another sample of the same application).
        """
        rng = np.random.default_rng(seed)
        spread = np.linalg.cholesky(self._covariance + 1e-12 * np.eye(4))
        out = []
        for _ in range(draws):
            model = self.model + spread @ rng.standard_normal(4)
            out.append((self.traffic.weight * rng.poisson(1.0, len(self.traffic.weight)), self.hallucinated(model)))
        return out

    def alerted(self, fixed: Mapping[str, float], route: str) -> tuple[Vector, Vector]:
        """Which traffic calls alert on ``route`` or a route before it whatever its minimum, and which only above it.

        ``fixed``: the minimums of the routes before it.  A call alerts at minimum ``m`` when it is in
        the first set, or in the second with its score at ``m`` or over.
        """
        routes = gated_routes(self._routing.rules)
        so_far = set(routes[: routes.index(route) + 1])
        t = self.traffic
        closed = routes_of(self._routing.agreement({**fixed, route: CLOSED}), t.flags, t.score)
        opened = routes_of(self._routing.agreement({**fixed, route: 0.0}), t.flags, t.score)
        always = np.array([r in so_far for r in closed], dtype=float)
        gated = np.array([r in so_far for r in opened], dtype=float) * (1 - always)
        return always, gated


def routes_of(agreement: AgreementRule, flags: Sequence[Mapping[str, int]], scores: Vector) -> list[str | None]:
    """The route each call's alert takes (None: no alert), the rules run once per set of flags and band of p.

    Between two of the rules' minimums every p fires the same rules, so the lower one stands for the band.
    """
    points = np.array(
        sorted({0.0, *(r.min_probability for r in agreement.rules if isinstance(r.min_probability, float))})
    )
    bands = np.searchsorted(points, scores, side="right") - 1
    known: dict[tuple[tuple[tuple[str, int], ...], int], str | None] = {}
    out = []
    for flagged, band in zip(flags, bands, strict=True):
        key = (tuple(sorted(flagged.items())), int(band))
        if key not in known:
            rule = agreement.first_match(flagged, float(points[max(band, 0)]))
            known[key] = agreement.route_of(rule) if rule else None
        out.append(known[key])
    return out


@dataclass(frozen=True, slots=True)
class _Shares:
    """A share at every candidate minimum: the point estimate and the replicates' 5th and 95th percentiles."""

    value: Vector
    low: Vector
    high: Vector

    def at(self, index: int, verdicts: int) -> Estimate:
        return Estimate(float(self.value[index]), float(self.low[index]), float(self.high[index]), verdicts, 0)


def _shares(
    population: Population, always: Vector, gated: Vector, candidates: Vector,
    replicates: Sequence[tuple[Vector, Vector]],
) -> tuple[_Shares, _Shares, _Shares]:  # fmt: skip
    """False alarms, precision and the share caught at each candidate: the estimate, then its replicates' spread."""
    score = population.traffic.score
    inside = np.nonzero(gated)[0]
    order = inside[np.argsort(score[inside])]
    first = np.searchsorted(score[order], candidates, side="left")  # order[first:] pass the candidate

    def passing(values: Vector) -> Vector:
        """``values`` summed over the calls that alert at each candidate."""
        above = np.concatenate([np.cumsum(values[order][::-1])[::-1], [0.0]])
        return float(values @ always) + above[first]

    def measured(weight: Vector, hallucinated: Vector) -> tuple[Vector, Vector, Vector]:
        faithful, true = weight * (1 - hallucinated), weight * hallucinated
        alarms, hits = passing(faithful), passing(true)
        return (alarms / max(faithful.sum(), _EPSILON), hits / np.maximum(alarms + hits, _EPSILON),
                hits / max(true.sum(), _EPSILON))  # fmt: skip

    point = measured(population.traffic.weight, population.hallucinated(population.model))
    drawn = [measured(weight, outcome) for weight, outcome in replicates]
    out = []
    for index in range(3):
        stack = np.array([d[index] for d in drawn])
        out.append(_Shares(point[index], np.percentile(stack, 100 * (1 - BOUND), axis=0),
                           np.percentile(stack, 100 * BOUND, axis=0)))  # fmt: skip
    return out[0], out[1], out[2]


def choose_minimums(
    population: Population,
    held: Mapping[str, float],
    choose: bool = True,
    draws: int = DRAWS,
    seed: int = 0,
    short: str = "",
    held_on_shipped: Mapping[str, float] | None = None,
) -> tuple[RouteChoice, ...]:
    """Each gated route's minimum on the map's scale, pages first, and what it does on calls to come.

    ``held``: each route's minimum on the map's scale that it keeps until the evidence shows another
    (absent: the route is closed).  ``choose`` False measures the held minimums only.  ``short``:
    why the verdicts cannot move any minimum yet (strata short of verdicts), empty when they can.
    ``held_on_shipped``: the held minimums on the shipped p, exact where the map's inverse would round.
    """
    routing = population.routing
    replicates = population.replicates(draws, seed)
    verdicts = len(population.labels)
    faithful_verdicts = int((population.labels == 0).sum())
    fixed: dict[str, float] = {}
    chosen = []
    for route in gated_routes(routing.rules):
        target = routing.targets[route]
        keep = held.get(route, CLOSED)
        always, gated = population.alerted(fixed, route)
        candidates = _candidates(population.traffic.score[gated > 0], keep)
        alarms, precision, caught = _shares(population, always, gated, candidates, replicates)
        at_held = int(np.searchsorted(candidates, keep))
        if not choose:
            index, note = at_held, "the current gate"
        else:
            index, note = _choose(alarms, at_held, target, short, faithful_verdicts, bool(gated.any()))
        minimum = float(candidates[index])
        fixed[route] = minimum
        on_shipped = population.on_shipped(minimum)
        if index == at_held and held_on_shipped and route in held_on_shipped:
            on_shipped = held_on_shipped[route]
        band, more = ("", 0)
        if choose and index == at_held and gated.any():
            band, more = _what_would_move(alarms, candidates, at_held, target, verdicts, faithful_verdicts)
        chosen.append(RouteChoice(route, minimum, target, alarms.at(index, faithful_verdicts),
                                  precision.at(index, verdicts), caught.at(index, verdicts), note,
                                  on_shipped, band, more))  # fmt: skip
    return tuple(chosen)


def _candidates(scores: Vector, held: float) -> Vector:
    """Minimums just above the scores of calls a minimum gates (evenly spaced ones of many), the held one, 0."""
    ordered = np.unique(scores)
    if len(ordered) > MAX_CANDIDATES:
        ordered = ordered[np.linspace(0, len(ordered) - 1, MAX_CANDIDATES).astype(int)]
    return np.unique(np.concatenate([[0.0, held], ordered + 1e-9]))


def _choose(
    alarms: _Shares, at_held: int, target: float, short: str, faithful_verdicts: int, gates: bool
) -> tuple[int, str]:
    """The index of the route's minimum among the candidates, and why (``gates``: some call's alert depends on it)."""
    if short:
        return at_held, f"the current gate kept: {short}"
    if not gates and alarms.value[at_held] <= target:  # every minimum lets the same calls through
        return at_held, "the current gate kept: no call of the window reaches this route's gated rules"
    lowest = _lowest_shown(alarms.high, target)
    speaks = faithful_verdicts * target >= 1  # else even a route at its target shows no false alarm among them
    if speaks and lowest is not None and lowest < at_held:
        shown = f"at most {alarms.high[lowest]:.1%} of faithful calls to come (95 %)"
        return lowest, f"lowered: the verdicts and the traffic show {shown}"
    if alarms.value[at_held] > target:
        raised = lowest if lowest is not None else _lowest_shown(alarms.value, target)
        if raised is not None and raised > at_held:
            estimate = f"{alarms.value[at_held]:.1%} of faithful calls to come, over the {target:.0%} target"
            return raised, f"raised: the current gate's false alarms are estimated at {estimate}"
        # Past every minimum the estimate stays over: those false alarms come from rules no probability gates
        # (facts) or from an earlier route, and closing this route would silence it without meeting the target.
        return (
            at_held,
            "the current gate kept: no minimum keeps the target; the false alarms past it are not the gate's",
        )
    if not speaks:
        one = math.ceil(1 / target)
        return at_held, (f"the current gate kept: {faithful_verdicts} faithful verdicts say nothing of a "
                         f"{target:.0%} share yet (at {target:.0%}, {one} of them hold one false alarm)")  # fmt: skip
    return at_held, f"the current gate kept: the verdicts cannot show a lower one holds {target:.0%} yet"


def _lowest_shown(shares: Vector, target: float) -> int | None:
    """Walking down from the highest candidate, the last whose share is at or under ``target`` (None: not the first)."""
    lowest = None
    for index in range(len(shares) - 1, -1, -1):
        if shares[index] > target:
            break
        lowest = index
    return lowest


def _what_would_move(
    alarms: _Shares, candidates: Vector, at_held: int, target: float, verdicts: int, faithful_verdicts: int
) -> tuple[str, int]:
    """Where the verdicts that could lower a kept minimum lie (a band of p), and about how many more it takes.

    The band runs from the lowest minimum whose estimate keeps the target to the current one: verdicts
    there decide how many faithful calls a lower minimum lets through.  The bound's excess over the
    estimate narrows as one over the square root of the verdicts; and the faithful verdicts must reach
    ``1 / target``, drawn at the share of faithful the verdicts hold so far.
    """
    lowest = _lowest_shown(alarms.value, target)
    if lowest is None or lowest >= at_held or not verdicts:
        return "", 0
    step = at_held - 1
    value, high = float(alarms.value[step]), float(alarms.high[step])
    more = math.ceil(verdicts * (((high - value) / (target - value)) ** 2 - 1)) if high > target else 0
    short_of_faithful = math.ceil(1 / target) - faithful_verdicts
    if short_of_faithful > 0:
        more = max(more, math.ceil(short_of_faithful * verdicts / max(faithful_verdicts, 1)))
    return f"p {candidates[lowest]:.2f}-{candidates[at_held]:.2f}", max(1, more)


def population_of(traffic: Sequence[TrafficCall] | None, verdicts: Sequence[Verdict]) -> Sequence[TrafficCall]:
    """The traffic to measure minimums on: the calls themselves, or without them the verdicts standing for theirs."""
    if traffic:
        return traffic
    return [TrafficCall(v.call.shipped_probability, v.call.flags, v.call.judgment, v.design_weight) for v in verdicts]


def _estimate_dict(estimate: Estimate) -> dict[str, Any]:
    def rounded(value: float | None) -> float | None:
        return None if value is None else round(value, 4)

    return {"value": rounded(estimate.value), "low": rounded(estimate.low), "high": rounded(estimate.high),
            "verdicts": estimate.verdicts, "shortfall": estimate.shortfall, "short": bool(estimate.short)}  # fmt: skip


def _features(logit: Vector, agree: Vector) -> Vector:
    """The model's inputs with an intercept: the shipped p's logit, agreement, and agreement's own slope."""
    out: Vector = np.column_stack([np.ones(len(logit)), logit, agree, agree * logit])
    return out


def _logit(p: Vector) -> Vector:
    clipped = np.clip(p, _EPSILON, 1 - _EPSILON)
    out: Vector = np.log(clipped / (1 - clipped))
    return out


def _sigmoid(x: Vector) -> Vector:
    out: Vector = 1.0 / (1.0 + np.exp(-np.clip(x, -30, 30)))
    return out
