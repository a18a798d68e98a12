"""A share of calls, estimated from a stratified audit sample: a point, a 95 % interval, verdicts still needed.

Within each stratum the judged calls are a simple random sample (the sampler serves them in a
seeded random order), so each has inclusion probability ``n_h / N_h``.  A ratio
``R = sum(y) / sum(x)`` over the population (the rate: ``x = 1``; an alert rule's precision:
``x = alerted``; its recall: ``x = hallucinated``) is the stratified estimator: the strata's
sample means weighted by their population shares (Cochran, *Sampling Techniques*, 3rd ed., 1977,
ch. 5-6), with the linearized variance and each stratum's finite-population correction.  The
interval is Wilson's score interval (Wilson, JASA 22, 1927) at the design's effective sample size
``R(1-R) / variance`` (Korn and Graubard, Survey Methodology 24, 1998): unlike the normal interval
it stays inside [0, 1] and does not collapse for rates near 0, where most applications sit.

What the rate page reports is a share of the window's calls: judged whole, a stratum is known
exactly.  A route's minimum governs the calls still to come, so its false alarms are estimated
for them (``future``): the window's calls are a sample of the application's traffic, with no
finite-population correction and no census, however many of them are judged.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

_Z = 1.959963984540054  # the normal quantile of a two-sided 95 % interval
NO_DENOMINATOR = "no judged call falls in the denominator"


@dataclass(frozen=True, slots=True)
class Judged:
    """One judged call of the audit sample: its values of the ratio's two parts."""

    y: float  # the numerator's indicator (hallucinated; alerted and hallucinated...)
    x: float = 1.0  # the denominator's indicator (1 for a rate)


@dataclass(frozen=True, slots=True)
class Estimate:
    """A ratio estimated from the audit sample, or why there is none (``value`` None, ``shortfall`` says).

    ``verdicts`` counts the judged calls that fall in the ratio's denominator (for precision: the
    alerted ones); ``more_for_target`` is how many more verdicts, drawn as the sample was, would
    bring the interval's half-width to the target (0: it is there already), at most every call not
    judged yet.  ``short``: the strata still short of the two verdicts a variance needs, and by how
    many; ``census``: every call is judged, so the value is exact (no interval to narrow).
    ``effective_size``: what the verdicts are worth as a simple random sample (None without an
    interval); ``widest``: the stratum whose verdicts leave the most sampling error.
    """

    value: float | None
    low: float | None
    high: float | None
    verdicts: int
    more_for_target: int
    shortfall: str = ""
    short: tuple[tuple[str, int], ...] = ()
    census: bool = False
    effective_size: float | None = None
    widest: str = ""

    @property
    def bounds(self) -> tuple[float, float, float] | None:
        """``(value, low, high)``, or None when there is no estimate."""
        if self.value is None or self.low is None or self.high is None:
            return None
        return self.value, self.low, self.high

    @property
    def half_width(self) -> float | None:
        """Half the interval's width (the "±" people read)."""
        return None if self.low is None or self.high is None else (self.high - self.low) / 2


def estimate_ratio(
    population: Mapping[str, int],
    judged: Mapping[str, Sequence[Judged]],
    *,
    target_half_width: float = 0.02,
    planning_value: float | None = None,
    future: bool = False,
) -> Estimate:
    """The ratio over ``population`` (calls per stratum) from the calls judged in each stratum.

    A stratum holding calls needs two verdicts (or all its calls judged) for a variance; until
    each has them the estimate is withheld and ``shortfall`` names the strata.  ``planning_value``
    (the model-based rate, say) sizes ``more_for_target`` while the verdicts show no spread yet.
    ``future``: the ratio on calls like these still to come (``population`` gives the strata's
    shares only).
    """
    total = sum(population.values())
    strata = [name for name, size in population.items() if size > 0]
    judged_now = sum(len(judged.get(name, ())) for name in strata)
    units = sum(1 for name in strata for call in judged.get(name, ()) if call.x)
    short = {
        name: min(2, population[name]) - len(judged.get(name, ()))
        for name in strata
        if len(judged.get(name, ())) < min(2, population[name])
    }
    if total == 0 or short:
        # How many more each stratum needs, not how many it has: what the reviewer is to do.
        missing = ", ".join(f"{count} more in stratum {name}" for name, count in short.items())
        needed = _effective_size_for(target_half_width, planning_value)
        more = min(max(needed - judged_now, sum(short.values())), total - judged_now)
        words = f"too few verdicts: {missing} needed" if missing else "too few verdicts: no calls"
        return Estimate(
            None,
            None,
            None,
            units,
            more,
            words,
            tuple(short.items()),
        )
    shares = {name: population[name] / total for name in strata}
    # Each judged call stands for its stratum's share over the stratum's verdicts.
    weights = [(shares[name] / len(judged[name]), call) for name in strata for call in judged[name]]
    x_total = sum(weight * call.x for weight, call in weights)
    if units == 0:
        return Estimate(None, None, None, 0, 0, NO_DENOMINATOR)
    ratio = sum(weight * call.y for weight, call in weights) / x_total
    if not future and all(len(judged[name]) >= population[name] for name in strata):
        return Estimate(ratio, ratio, ratio, units, 0, census=True)  # every call judged: nothing left to estimate
    unjudged = math.inf if future else total - judged_now
    terms = {
        name: shares[name] ** 2 * _residual_variance(judged[name], ratio, math.inf if future else population[name])
        for name in strata
    }
    variance = sum(terms.values()) / x_total**2
    # The design's effective sample size; with no spread to read it from (a share of 0 or 1), Kish's
    # effective size of the weights (Kish, Survey Sampling, 1965).
    kish = x_total**2 / sum((weight * call.x) ** 2 for weight, call in weights)
    size = ratio * (1 - ratio) / variance if variance > 0 and 0 < ratio < 1 else kish
    low, high = wilson_interval(ratio, size)
    planning = ratio if 0 < ratio < 1 else planning_value
    needed = math.ceil(judged_now * _effective_size_for(target_half_width, planning) / size)
    # Never more than the calls left: judging them all leaves nothing to estimate.
    more = int(min(max(0, needed - judged_now), unjudged))
    return Estimate(ratio, low, high, units, more, effective_size=size, widest=max(terms, key=terms.__getitem__))


def wilson_interval(value: float, size: float) -> tuple[float, float]:
    """Wilson's 95 % score interval of a share ``value`` at an effective sample ``size`` (may be fractional)."""
    z2 = _Z * _Z
    centre = (value + z2 / (2 * size)) / (1 + z2 / size)
    half = _Z * math.sqrt(value * (1 - value) / size + z2 / (4 * size * size)) / (1 + z2 / size)
    return min(max(0.0, centre - half), value), max(min(1.0, centre + half), value)


def _stratum_means(calls: Sequence[Judged]) -> tuple[float, float]:
    return sum(call.y for call in calls) / len(calls), sum(call.x for call in calls) / len(calls)


def _residual_variance(calls: Sequence[Judged], ratio: float, size: float) -> float:
    """The variance of one stratum's mean of the ratio's residuals ``y - R x`` (``size``: its population).

    One more call joins the judged ones, half with ``y = x`` and half with ``y = 0`` at the stratum's
    mean ``x`` (for a rate: half a hallucinated, half a faithful call, a Jeffreys-like prior), so
    that a stratum whose few verdicts happen to show no hallucination is not read as having no
    spread at all.
    """
    n = len(calls)
    if n >= size:
        return 0.0  # judged whole: no sampling error
    x = sum(call.x for call in calls) / n
    residuals = [(call.y - ratio * call.x, 1.0) for call in calls] + [(x * (1 - ratio), 1.0), (-ratio * x, 1.0)]
    mean = sum(e * w for e, w in residuals) / (n + 2)
    sample_variance = sum(w * (e - mean) ** 2 for e, w in residuals) / (n + 1)
    return (1 - n / size) * sample_variance / n


def _effective_size_for(half_width: float, planning_value: float | None) -> int:
    """The binomial sample size whose normal 95 % interval is ``half_width`` at ``planning_value`` (0.5 unknown)."""
    value = 0.5 if planning_value is None else min(max(planning_value, 0.01), 0.99)
    return math.ceil(value * (1 - value) * (_Z / half_width) ** 2)


def growth_to_bound(estimate: Estimate, bound: float) -> float | None:
    """How many times its verdicts the estimate needs, its value unchanged, for its interval to end at ``bound``.

    1 when it does already; None when no number would (no estimate, or its value is at ``bound`` or past it).
    """
    if estimate.value is None or estimate.high is None or estimate.effective_size is None:
        return None
    if estimate.high <= bound:
        return 1.0
    if estimate.value >= bound:
        return None
    low, high = estimate.effective_size, 2 * estimate.effective_size
    while wilson_interval(estimate.value, high)[1] > bound:
        low, high = high, 2 * high
    for _ in range(40):  # bisection to well under one verdict
        middle = (low + high) / 2
        low, high = (low, middle) if wilson_interval(estimate.value, middle)[1] <= bound else (middle, high)
    return high / estimate.effective_size
