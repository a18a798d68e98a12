"""Route minimums for calls to come, from an application's traffic and its stratified verdicts."""

from __future__ import annotations

import numpy as np
import pytest

from detectors.verdict import PlattScaling
from pipeline.calibration.alert_probability import RouteTargets
from pipeline.calibration.operating_point import CLOSED, Population, TrafficCall, Verdict, choose_minimums
from pipeline.config.alerting import AlertingSettings
from pipeline.judge.weight import SHIPPED_PRIOR

ROUTING = RouteTargets.from_settings(AlertingSettings())
PAIR = {"grounding": 2, "contradiction": 2}  # two detectors agree: the slack rule
HELD = {"page": 0.95, "slack": 0.95}


def truth(p: np.ndarray, slope: float, intercept: float) -> np.ndarray:
    """How often a call of shipped ``p`` is hallucinated on this application."""
    return 1 / (1 + np.exp(-(slope * np.log(p / (1 - p)) + intercept)))


def app(n: int, seed: int, slope: float = 1.0, intercept: float = 0.0) -> tuple[list[TrafficCall], np.ndarray]:
    """``n`` calls, every one flagged by two detectors, and whether each came out hallucinated."""
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.02, 0.98, n)
    labels = rng.random(n) < truth(p, slope, intercept)
    return [TrafficCall(float(q), PAIR) for q in p], labels


def stratified(traffic: list[TrafficCall], labels: np.ndarray, count: int, seed: int) -> list[Verdict]:
    """``count`` verdicts, equal shares from the calls under and over p 0.5 (a queue's strata)."""
    rng = np.random.default_rng(seed)
    high = [i for i, c in enumerate(traffic) if c.shipped_probability >= 0.5]
    low = [i for i, c in enumerate(traffic) if c.shipped_probability < 0.5]
    out = []
    for name, members in (("low", low), ("high", high)):
        picked = rng.choice(members, size=count // 2, replace=False)
        out += [Verdict(traffic[i], bool(labels[i]), name, len(members) / len(picked)) for i in picked]
    return out


def slack(traffic: list[TrafficCall], verdicts: list[Verdict], draws: int = 200):
    population = Population(traffic, verdicts, PlattScaling(), SHIPPED_PRIOR, ROUTING, shrinkage=5.0)
    return next(r for r in choose_minimums(population, HELD, draws=draws) if r.route == "slack")


def faithful_share_alerted(minimum: float, slope: float, intercept: float) -> float:
    """The share of an application's faithful calls whose p is at ``minimum`` or over: exact, by quadrature."""
    p = np.linspace(0.02, 0.98, 200_001)
    faithful = 1 - truth(p, slope, intercept)
    return float(faithful[p >= minimum].sum() / faithful.sum())


def test_a_census_of_a_known_application_lands_where_the_target_is_reached_by_hand():
    # 2,500 calls, each judged: the p whose faithful calls above it are 3 % of the faithful is known exactly.
    traffic, labels = app(2500, seed=1)
    verdicts = [Verdict(c, bool(y), "all", 1.0) for c, y in zip(traffic, labels, strict=True)]
    chosen = slack(traffic, verdicts, draws=100)
    exact = next(m for m in np.linspace(0.5, 0.98, 4801) if faithful_share_alerted(m, 1.0, 0.0) <= 0.03)
    assert chosen.min_probability == pytest.approx(exact, abs=0.03)
    assert chosen.min_probability >= exact - 0.005  # the bound only ever errs upward of the exact point
    assert chosen.false_alarms.high is not None and chosen.false_alarms.high <= 0.03
    assert "lowered" in chosen.note


def test_an_application_over_target_at_its_minimum_gets_it_raised():
    # Its calls hallucinate far less often than the shipped p says: at p 0.6 most alerts are false.
    traffic, labels = app(3000, seed=2, intercept=-3.0)
    population = Population(traffic, stratified(traffic, labels, 200, seed=2), PlattScaling(), SHIPPED_PRIOR,
                            ROUTING, 5.0)  # fmt: skip
    raised = next(r for r in choose_minimums(population, {"page": 0.6, "slack": 0.6}) if r.route == "slack")
    assert raised.min_probability > 0.6 and raised.note.startswith("raised")
    assert faithful_share_alerted(raised.min_probability, 1.0, -3.0) <= 0.03


def test_the_chosen_minimum_keeps_the_target_on_calls_to_come_in_at_least_95_percent_of_draws():
    # An application whose shipped p is underconfident (a dialogue set's shape): each draw is its traffic
    # so far and 200 stratified verdicts on it; the truth says what the chosen minimum does to calls to come.
    slope, intercept = 1.6, -0.5
    kept, lowered = 0, 0
    seeds = range(40)
    for seed in seeds:
        traffic, labels = app(1500, seed=100 + seed, slope=slope, intercept=intercept)
        chosen = slack(traffic, stratified(traffic, labels, 200, seed), draws=100)
        kept += faithful_share_alerted(chosen.min_probability, slope, intercept) <= 0.03
        lowered += chosen.min_probability < 0.95
    assert kept >= 0.95 * len(seeds)
    assert lowered >= 0.9 * len(seeds)  # and the promise is spent: the minimum falls where it can


def test_few_verdicts_keep_the_held_minimum_and_say_how_many_more_and_where():
    traffic, labels = app(2000, seed=3, slope=1.6, intercept=-0.5)
    chosen = slack(traffic, stratified(traffic, labels, 12, seed=3))
    assert chosen.min_probability == pytest.approx(0.95)
    assert "faithful verdicts say nothing of a 3% share yet" in chosen.note
    assert chosen.more_verdicts > 0 and chosen.needed_in.startswith("p 0.")


def test_a_stratum_short_of_verdicts_keeps_every_minimum():
    traffic, labels = app(500, seed=4)
    verdicts = stratified(traffic, labels, 200, seed=4)
    population = Population(traffic, verdicts, PlattScaling(), SHIPPED_PRIOR, ROUTING, 5.0)
    for route in choose_minimums(population, HELD, short="too few verdicts yet: 2 more verdicts in stratum x"):
        assert route.min_probability == pytest.approx(0.95) and "stratum x" in route.note


def test_a_closed_route_stays_closed_when_only_measured():
    traffic, labels = app(300, seed=5)
    population = Population(traffic, stratified(traffic, labels, 100, seed=5), PlattScaling(), SHIPPED_PRIOR,
                            ROUTING, 5.0)  # fmt: skip
    page, slack_route = choose_minimums(population, {"slack": 0.9}, choose=False)
    assert page.min_probability == CLOSED and slack_route.min_probability == pytest.approx(0.9)
    assert slack_route.note == "the current gate"
