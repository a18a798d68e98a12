"""`halluwatch rate` in words a person reads: what it still needs, where, and whether the queue can serve it."""

from __future__ import annotations

from pipeline.rate.estimator import Estimate, Judged, estimate_ratio
from pipeline.rate.report import estimate_words

ALERTED, LOW = "default / alerted", "default / p 0.00-0.10"


def test_too_few_verdicts_says_how_many_more_among_which_calls():
    estimate = estimate_ratio({ALERTED: 3, LOW: 9}, {LOW: [Judged(0.0)]})
    words = estimate_words(estimate, 0.02, {ALERTED: 3, LOW: 8})
    assert (
        words
        == "needs 2 more verdicts among alerted calls and 1 more verdict among calls with p_hallucination 0.00-0.10"
    )


def test_more_verdicts_than_the_queue_can_serve_are_never_asked_for():
    estimate = estimate_ratio({ALERTED: 3, LOW: 9}, {LOW: [Judged(0.0)]})
    words = estimate_words(estimate, 0.02, {ALERTED: 0, LOW: 8})
    assert "2 more verdicts among alerted calls (every call left there was skipped" in words
    judged = {ALERTED: [Judged(1.0), Judged(0.0)], LOW: [Judged(0.0), Judged(1.0)]}
    spread = estimate_ratio({ALERTED: 30, LOW: 90}, judged)
    assert spread.more_for_target > 5
    assert f"; {spread.more_for_target} more verdicts would give" in estimate_words(
        spread, 0.02, {ALERTED: 28, LOW: 88}
    )
    assert "; 5 more verdicts would give ±2 points" in estimate_words(spread, 0.02, {ALERTED: 2, LOW: 3})
    assert "no call left to narrow it" in estimate_words(spread, 0.02, {ALERTED: 0, LOW: 0})


def test_a_census_says_every_call_was_judged():
    estimate = estimate_ratio({ALERTED: 2, LOW: 1}, {ALERTED: [Judged(1.0), Judged(1.0)], LOW: [Judged(0.0)]})
    assert (
        estimate_words(estimate, 0.02, {ALERTED: 0, LOW: 0})
        == "66.7 %, every call judged (3 verdicts): exact, no interval"
    )


def test_strata_of_several_applications_are_named_with_their_application():
    estimate = Estimate(None, None, None, 0, 4, "too few verdicts", (("hr / alerted", 2), (ALERTED, 2)))
    assert (
        estimate_words(estimate, 0.02)
        == "needs 2 more verdicts among hr's alerted calls and 2 more verdicts among default's alerted calls"
    )
