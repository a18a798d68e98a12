"""The verdict-corrected rate on simulated traffic with a known rate and known detector errors.

Each simulation draws a population of calls, a true hallucination probability for each, whether
it was hallucinated, and the model's ``p_hallucination`` from a deliberately miscalibrated model;
the audit sampler then serves verdicts as the review page does.  Over 200 seeded simulations the
95 % interval must cover the true rate at least 93 % of the time, and the model-based rate (the
mean probability) must be biased while the corrected rate is not.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest

from pipeline.rate.estimator import Estimate, Judged, estimate_ratio, wilson_interval
from pipeline.rate.sampler import Strata, next_stratum

STRATA = Strata((0.1, 0.5, 0.9))
SIMULATIONS = 200


@dataclass(frozen=True)
class Simulation:
    true_rate: float
    model_rate: float
    rate: Estimate
    precision: Estimate
    true_precision: float
    recall: Estimate
    true_recall: float


def _overconfident(q: np.ndarray) -> np.ndarray:
    """A model that says "clean" too readily: every probability pushed down."""
    return q**2


def _calibrated(q: np.ndarray) -> np.ndarray:
    return q


def simulate(
    seed: int, model: Callable[[np.ndarray], np.ndarray], calls: int = 3000, verdicts: int = 300
) -> Simulation:
    rng = np.random.default_rng(seed)
    risky = rng.random(calls) < 0.15  # a share of calls in trouble (no good source, a hard question)
    q = np.where(risky, rng.beta(4, 2, calls), rng.beta(1, 30, calls))
    hallucinated = rng.random(calls) < q
    p = np.clip(model(q), 0.0, 1.0)
    # The alert rule: two detectors agreeing on a likely call; it misses some and wakes people for others.
    alerted = (p >= 0.5) & (rng.random(calls) < 0.8) | (rng.random(calls) < 0.01)
    names = [STRATA.of(float(value), bool(flag)) for value, flag in zip(p, alerted, strict=True)]
    members: dict[str, list[int]] = {}
    for index in rng.permutation(calls):  # the seeded hash order the store serves a stratum in
        members.setdefault(names[index], []).append(int(index))
    population = {name: len(members.get(name, [])) for name in STRATA.names}
    served = dict.fromkeys(STRATA.names, 0)
    sample: list[tuple[int, str]] = []
    for _ in range(verdicts):
        stratum = next_stratum(population, served, [n for n in STRATA.names if served[n] < population[n]])
        assert stratum is not None
        sample.append((members[stratum][served[stratum]], stratum))
        served[stratum] += 1

    def judged(y: np.ndarray, x: np.ndarray) -> dict[str, list[Judged]]:
        by_stratum: dict[str, list[Judged]] = {}
        for index, stratum in sample:
            by_stratum.setdefault(stratum, []).append(Judged(float(y[index]), float(x[index])))
        return by_stratum

    ones = np.ones(calls)
    both = hallucinated & alerted
    return Simulation(
        true_rate=float(hallucinated.mean()),
        model_rate=float(p.mean()),
        rate=estimate_ratio(population, judged(hallucinated, ones)),
        precision=estimate_ratio(population, judged(both, alerted)),
        true_precision=float(both.sum() / alerted.sum()),
        recall=estimate_ratio(population, judged(both, hallucinated)),
        true_recall=float(both.sum() / hallucinated.sum()),
    )


def _covers(estimate: Estimate, truth: float) -> bool:
    assert estimate.low is not None and estimate.high is not None
    return estimate.low <= truth <= estimate.high


@pytest.fixture(scope="module")
def miscalibrated() -> list[Simulation]:
    return [simulate(seed, _overconfident) for seed in range(SIMULATIONS)]


def test_the_95_percent_interval_covers_the_true_rate_in_at_least_93_percent_of_simulations(miscalibrated):
    coverage = np.mean([_covers(s.rate, s.true_rate) for s in miscalibrated])
    assert coverage >= 0.93, f"coverage {coverage:.3f}"
    # The intervals are informative, not [0, 1]: a few points either side at 300 verdicts.
    assert np.median([s.rate.half_width for s in miscalibrated]) < 0.05


def test_the_alert_rules_precision_and_recall_intervals_cover_theirs(miscalibrated):
    precision = np.mean([_covers(s.precision, s.true_precision) for s in miscalibrated])
    assert precision >= 0.93, f"precision coverage {precision:.3f}"
    # Recall's denominator is every hallucination, most of them rare events among the unflagged
    # calls: its interval is the least reliable of the three (docs/operations.md says so).
    recall = np.mean([_covers(s.recall, s.true_recall) for s in miscalibrated])
    assert recall >= 0.90, f"recall coverage {recall:.3f}"


def test_the_model_based_rate_is_biased_when_calibration_is_off_and_the_corrected_rate_is_not(miscalibrated):
    model_error = np.array([s.model_rate - s.true_rate for s in miscalibrated])
    corrected_error = np.array([s.rate.value - s.true_rate for s in miscalibrated])  # type: ignore[operator]
    standard_error = corrected_error.std() / np.sqrt(len(corrected_error))
    assert abs(model_error.mean()) > 10 * standard_error  # an overconfident model reads the rate far too low
    assert model_error.mean() < -0.02
    assert abs(corrected_error.mean()) < 3 * standard_error


def test_with_calibration_right_both_agree():
    runs = [simulate(seed, _calibrated, verdicts=200) for seed in range(40)]
    model_error = np.mean([s.model_rate - s.true_rate for s in runs])
    corrected_error = np.mean([s.rate.value - s.true_rate for s in runs])  # type: ignore[operator]
    assert abs(model_error) < 0.01 and abs(corrected_error) < 0.01


def test_too_few_verdicts_names_the_strata_short_of_them_and_how_many_more_would_give_2_points():
    population = {"p 0.00-0.50": 900, "p 0.50-1.00": 100, "no probability": 0}
    judged = {"p 0.00-0.50": [Judged(0.0)]}
    estimate = estimate_ratio(population, judged, planning_value=0.1)
    assert estimate.value is None
    assert estimate.shortfall == "too few verdicts: 1 more in stratum p 0.00-0.50, 2 more in stratum p 0.50-1.00 needed"
    # A binomial sample at the model's 10 %: 1.96^2 * 0.1 * 0.9 / 0.02^2 = 865 verdicts, one judged.
    assert estimate.more_for_target == 864


def test_more_verdicts_for_2_points_scale_with_the_variance_the_design_shows():
    population = {"low": 1000, "high": 1000}
    judged = {name: [Judged(float(i < hits)) for i in range(20)] for name, hits in (("low", 1), ("high", 10))}
    estimate = estimate_ratio(population, judged)
    assert estimate.value == pytest.approx((1 / 20 + 10 / 20) / 2, abs=0.02)
    assert estimate.half_width is not None and estimate.half_width > 0.02
    assert estimate.more_for_target > 100
    # Twice the judged calls in each stratum with the same shares: the shortfall shrinks.
    doubled = {name: calls + calls for name, calls in judged.items()}
    assert estimate_ratio(population, doubled).more_for_target < estimate.more_for_target


def test_a_stratum_judged_whole_has_no_sampling_error():
    population = {"only": 3}
    judged = {"only": [Judged(1.0), Judged(0.0), Judged(0.0)]}
    estimate = estimate_ratio(population, judged)
    assert (estimate.value, estimate.low, estimate.high) == pytest.approx((1 / 3, 1 / 3, 1 / 3))
    assert estimate.more_for_target == 0


def test_no_hallucination_judged_still_leaves_room_for_some():
    low, high = wilson_interval(0.0, 30)
    assert low == 0.0 and high == pytest.approx(1.96**2 / (30 + 1.96**2), rel=1e-3)  # about 3.8 / n
