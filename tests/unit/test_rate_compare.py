"""Comparing two rates: the difference, its interval from the two intervals, and the sentence people read."""

from __future__ import annotations

import pytest

from pipeline.rate.compare import comparison_sentence, difference
from pipeline.rate.estimator import Estimate


def _rate(value: float, low: float, high: float) -> Estimate:
    return Estimate(value, low, high, verdicts=200, more_for_target=0)


def test_the_difference_interval_squares_and_adds_the_two_intervals_margins():
    change = difference(_rate(0.061, 0.045, 0.081), _rate(0.030, 0.019, 0.044))
    assert change is not None
    assert change.value == pytest.approx(0.031)
    assert change.low == pytest.approx(0.031 - ((0.061 - 0.045) ** 2 + (0.044 - 0.030) ** 2) ** 0.5)
    assert change.high == pytest.approx(0.031 + ((0.081 - 0.061) ** 2 + (0.030 - 0.019) ** 2) ** 0.5)
    assert change.verdict == "worse"


def test_the_sentence_says_worse_better_or_no_clear_change():
    before = ("before (service.version=v41)", _rate(0.030, 0.019, 0.044))
    worse = comparison_sentence("hr", ("after (service.version=v42)", _rate(0.061, 0.045, 0.081)), before)
    assert worse == (
        "hr: 6.1 % ± 1.8 after (service.version=v42), 3.0 % ± 1.2 before (service.version=v41): worse "
        "(+3.1 points, 95 % CI +1.0 to +5.4)"
    )
    assert ": better (" in comparison_sentence("hr", ("after", _rate(0.010, 0.004, 0.020)), before)
    assert ": no clear change (" in comparison_sentence("hr", ("after", _rate(0.035, 0.022, 0.050)), before)


def test_no_comparison_while_a_side_has_too_few_verdicts():
    short = Estimate(None, None, None, 0, 40, "too few verdicts: 2 more in stratum hr / alerted needed")
    assert comparison_sentence("hr", ("in this week", short), ("in last week", _rate(0.03, 0.02, 0.04))) == (
        "hr: no comparison yet: too few verdicts in this week"
    )
