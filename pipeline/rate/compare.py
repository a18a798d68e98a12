"""Did a change make it worse?  Two verdict-corrected rates, their difference with its interval, one sentence.

The difference's 95 % interval combines the two rates' own intervals by Newcombe's square-and-add
method (Newcombe, "Interval estimation for the difference between independent proportions",
Statistics in Medicine 17, 1998, method 10): it keeps their asymmetry near 0 %, where most rates
of a working application sit.  The two scopes are independent samples: different windows, or
different values of an attribute.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pipeline.rate.estimator import Estimate
from pipeline.rate.report import percent


@dataclass(frozen=True, slots=True)
class Difference:
    """``after - before`` and its 95 % interval, and what that says."""

    value: float
    low: float
    high: float

    @property
    def verdict(self) -> str:
        """``worse`` or ``better`` when the interval excludes no change, else ``no clear change``."""
        if self.low > 0:
            return "worse"
        if self.high < 0:
            return "better"
        return "no clear change"


def difference(after: Estimate, before: Estimate) -> Difference | None:
    """The change of rate from ``before`` to ``after``; None while either has no interval."""
    if after.bounds is None or before.bounds is None:
        return None
    (a, a_low, a_high), (b, b_low, b_high) = after.bounds, before.bounds
    change = a - b
    return Difference(
        change,
        change - math.hypot(a - a_low, b_high - b),
        change + math.hypot(a_high - a, b - b_low),
    )


def comparison_sentence(name: str, after: tuple[str, Estimate], before: tuple[str, Estimate]) -> str:
    """``hr: 6.1 % ± 1.8 after (v42), 3.0 % ± 1.2 before (v41): worse (+3.1 points, 95 % CI +0.4 to +5.8)``."""
    (after_label, later), (before_label, earlier) = after, before
    change = difference(later, earlier)
    if change is None or later.bounds is None or earlier.bounds is None:
        short = after_label if later.bounds is None else before_label
        return f"{name}: no comparison yet: too few verdicts {short}"
    return (
        f"{name}: {_rate(later.bounds)} {after_label}, {_rate(earlier.bounds)} {before_label}: {change.verdict} "
        f"({100 * change.value:+.1f} points, 95 % CI {100 * change.low:+.1f} to {100 * change.high:+.1f})"
    )


def _rate(bounds: tuple[float, float, float]) -> str:
    value, low, high = bounds
    return f"{percent(value)} ± {100 * (high - low) / 2:.1f}"
