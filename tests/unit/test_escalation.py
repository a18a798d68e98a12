"""Escalation to the application's own model: the band its answer could move, its weight, the budget."""

from __future__ import annotations

import math

import pytest

from pipeline.calibration.alert_probability import RouteTargets
from pipeline.config.alerting import JUDGE, AlertingSettings
from pipeline.escalation.band import Escalation, Reason, decided_route, escalation, most_valuable
from pipeline.judge.budget import BudgetLimits, JudgeBudget, LocalCounter
from pipeline.judge.weight import (
    SHIPPED_PRIOR,
    JudgedVerdict,
    JudgeWeight,
    Judgment,
    balanced_accuracy_floor,
    fit_weight,
)

# The default rules with page at 0.93 and slack at 0.90, as the shipped thresholds set them.
AGREEMENT = RouteTargets.from_settings(AlertingSettings()).agreement({"page": 0.93, "slack": 0.90})
PAIR = {"grounding": 2, "contradiction": 2}  # two signals: slack when p reaches its minimum
ONE = {"grounding": 2, "unsupported_spans": 2}  # one signal read twice: never alerts alone
SEVERE = {"contradiction": 4}  # with a second signal, a page
GOOD = JudgeWeight(0.85, 0.85)  # a shift of 1.73 in logit either way


def logit(p: float) -> float:
    return math.log(p / (1 - p))


def test_the_judges_answer_moves_p_by_its_log_likelihood_ratio_and_unknown_moves_nothing():
    asymmetric = JudgeWeight(sensitivity=0.9, specificity=0.6)
    up = asymmetric.apply(0.5, Judgment.HALLUCINATED)
    down = asymmetric.apply(0.5, Judgment.FAITHFUL)
    assert up is not None and logit(up) == pytest.approx(math.log(0.9 / 0.4))
    assert down is not None and logit(down) == pytest.approx(math.log(0.1 / 0.6))
    assert asymmetric.apply(0.3, Judgment.UNKNOWN) == pytest.approx(0.3)
    assert asymmetric.apply(None, Judgment.HALLUCINATED) is None
    assert not JudgeWeight.none().weighs and SHIPPED_PRIOR.weighs


def test_a_hallucinated_answer_is_one_more_agreeing_signal_and_still_needs_the_routes_minimum():
    # One signal at p 0.7: the judge's "hallucinated" makes two, and lifts p to 0.93 (over slack's 0.90).
    assert decided_route(AGREEMENT, ONE, 0.7, GOOD) is None
    assert decided_route(AGREEMENT, ONE, 0.7, GOOD, Judgment.HALLUCINATED) == "slack"
    # At p 0.5 it lifts p only to 0.85: agreement alone is not enough.
    assert decided_route(AGREEMENT, ONE, 0.5, GOOD, Judgment.HALLUCINATED) is None
    # A judge with no weight is no signal: a single flag at a high p stays a single flag.
    assert decided_route(AGREEMENT, ONE, 0.95, JudgeWeight.none(), Judgment.HALLUCINATED) is None
    # A flag of the judge alone is one signal.
    assert AGREEMENT.first_match({JUDGE: 2}, 0.99) is None


def test_the_band_goes_both_ways_and_says_why():
    to_alert = escalation(AGREEMENT, ONE, 0.7, GOOD)
    assert to_alert is not None and to_alert.reason == Reason.COULD_ALERT
    assert (to_alert.route_now, to_alert.if_hallucinated, to_alert.if_faithful) == (None, "slack", None)
    held_back = escalation(AGREEMENT, PAIR, 0.92, GOOD)
    assert held_back is not None and held_back.reason == Reason.COULD_HOLD_BACK
    assert (held_back.route_now, held_back.if_faithful) == ("slack", None)
    # A severe contradiction and a second signal at p 0.92: slack now; a weak judge's "hallucinated" lifts it to a
    # page, its "faithful" keeps it over slack's minimum.
    rerouted = escalation(AGREEMENT, {"contradiction": 4, "grounding": 2}, 0.92, JudgeWeight(0.55, 0.55))
    assert rerouted is not None and rerouted.reason == Reason.COULD_REROUTE
    assert (rerouted.route_now, rerouted.if_hallucinated, rerouted.if_faithful) == ("slack", "page", "slack")
    # With a strong judge the same call could go either way from slack: its "faithful" would withdraw it.
    either = escalation(AGREEMENT, {"contradiction": 4, "grounding": 2}, 0.92, GOOD)
    assert either is not None and either.reason == Reason.COULD_HOLD_BACK and either.value == pytest.approx(1.0)


def test_calls_the_answer_cannot_move_stay_out_unless_coverage_says_unverified():
    assert escalation(AGREEMENT, {}, 0.95, GOOD) is None  # no signal: the judge's makes one
    assert escalation(AGREEMENT, PAIR, 0.999, GOOD) is None  # far over: "faithful" keeps it over
    assert escalation(AGREEMENT, ONE, 0.1, GOOD) is None  # far under: "hallucinated" cannot lift it
    unverified = escalation(AGREEMENT, {}, 0.2, GOOD, unverified=True)
    assert unverified == Escalation(Reason.UNVERIFIED, 0.0, None, None, None)


def test_the_band_follows_the_judges_weight_and_the_apps_minimums():
    assert escalation(AGREEMENT, ONE, 0.7, JudgeWeight.none()) is None  # a judge with no weight moves nothing
    assert escalation(AGREEMENT, ONE, 0.7, SHIPPED_PRIOR) is None  # 0.62 in logit: 0.7 only reaches 0.82
    assert escalation(AGREEMENT, ONE, 0.85, SHIPPED_PRIOR) is not None
    lower = RouteTargets.from_settings(AlertingSettings()).agreement({"page": 0.93, "slack": 0.75})
    assert escalation(AGREEMENT, ONE, 0.65, SHIPPED_PRIOR) is None
    assert escalation(lower, ONE, 0.65, SHIPPED_PRIOR) is not None  # an app whose map lowered slack's minimum


def test_value_is_the_chance_the_answer_changes_the_route_and_ranks_a_short_budget():
    near = escalation(AGREEMENT, ONE, 0.85, GOOD)
    far = escalation(AGREEMENT, ONE, 0.65, GOOD)
    assert near is not None and far is not None
    # The route changes only on "hallucinated": as likely as the judge says so on a call of that p.
    assert near.value == pytest.approx(0.85 * 0.85 + 0.15 * 0.15)
    assert far.value == pytest.approx(0.65 * 0.85 + 0.35 * 0.15)
    held = escalation(AGREEMENT, PAIR, 0.92, GOOD)
    assert held is not None and held.value == pytest.approx(0.08 * 0.85 + 0.92 * 0.15)  # changes on "faithful"
    ranked = most_valuable([("far", far), ("held", held), ("near", near)], 2)
    assert [name for name, _ in ranked] == ["near", "far"]
    assert most_valuable([("near", near)], 0) == []


def test_the_weight_starts_at_the_prior_and_follows_the_verdicts_per_label():
    assert fit_weight([]) == SHIPPED_PRIOR
    # A judge that calls every hallucinated call but half the faithful ones too.
    verdicts = [JudgedVerdict(Judgment.HALLUCINATED, True)] * 40 + [
        JudgedVerdict(Judgment.HALLUCINATED, False),
        JudgedVerdict(Judgment.FAITHFUL, False),
    ] * 20
    fitted = fit_weight(verdicts + [JudgedVerdict(Judgment.UNKNOWN, True)] * 5)
    assert fitted.verdicts == 80  # unknown answers say nothing about the judge
    assert fitted.sensitivity == pytest.approx((40 + 10 * 0.65) / 50)
    assert fitted.specificity == pytest.approx((20 + 10 * 0.65) / 50)
    # Its "hallucinated" is worth less than its "faithful": it over-calls.
    assert abs(fitted.shift(Judgment.HALLUCINATED)) < abs(fitted.shift(Judgment.FAITHFUL))


def test_a_judge_no_better_than_chance_gets_no_weight_once_the_verdicts_can_tell():
    coin = [JudgedVerdict(Judgment.HALLUCINATED, label) for label in (True, False)] * 6 + [
        JudgedVerdict(Judgment.FAITHFUL, label) for label in (True, False)
    ] * 6
    weight = fit_weight(coin)
    assert not weight.weighs and weight.verdicts == 24 and "chance" in weight.note
    # Fewer than ten of a label: the prior still tempers what few verdicts say.
    assert fit_weight(coin[:8]).weighs
    good = [JudgedVerdict(Judgment.HALLUCINATED, True)] * 9 + [JudgedVerdict(Judgment.FAITHFUL, False)] * 9
    good += [JudgedVerdict(Judgment.FAITHFUL, True), JudgedVerdict(Judgment.HALLUCINATED, False)]
    assert fit_weight(good).sensitivity == pytest.approx((9 + 6.5) / 20)
    assert balanced_accuracy_floor(9, 10, 9, 10) > 0.5 >= balanced_accuracy_floor(5, 10, 5, 10)
    with pytest.raises(ValueError, match="both labels"):
        balanced_accuracy_floor(1, 1, 0, 0)


def test_a_judge_that_mostly_gives_no_usable_answer_gets_no_weight():
    silent = [JudgedVerdict(Judgment.UNKNOWN, label) for label in (True, False)] * 10
    weight = fit_weight(silent)
    assert not weight.weighs and "no usable answer on 20 of 20" in weight.note
    # A few unknowns among answers say nothing against it.
    good = [JudgedVerdict(Judgment.HALLUCINATED, True)] * 12 + [JudgedVerdict(Judgment.FAITHFUL, False)] * 12
    assert fit_weight(good + silent).weighs
    assert fit_weight(silent[:19]).weighs  # too few to tell: the prior stands


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_the_budget_grants_calls_per_minute_and_tokens_per_day_per_application():
    clock = Clock(1_700_000_000.0)  # 22:13 UTC
    budget = JudgeBudget({"shop": BudgetLimits(calls_per_minute=3, tokens_per_day=1000)}, LocalCounter(), clock)
    assert budget.grant("shop", 5, tokens_each=100) == 3
    assert budget.grant("shop", 1, tokens_each=100) == 0  # this minute's calls are spent
    assert budget.grant("other", 1, tokens_each=100) == 0  # an application with no budget is never judged
    clock.now += 60
    assert budget.left("shop").calls == 3 and budget.left("shop").tokens == 700
    budget.settle("shop", reserved=300, used=950)  # the judge used more than reserved
    assert budget.grant("shop", 3, tokens_each=100) == 0 and budget.left("shop").tokens == pytest.approx(50)
    clock.now += 2 * 3600  # past midnight UTC: a new day's tokens
    assert budget.grant("shop", 3, tokens_each=100) == 3


def test_a_workers_share_of_the_budget_is_its_share_of_the_partitions():
    limits = {"shop": BudgetLimits(calls_per_minute=10)}
    counter = LocalCounter()
    budget = JudgeBudget(limits, counter, Clock(0.0), share=0.25)  # owns 3 of 12 partitions
    assert budget.grant("shop", 10, tokens_each=0) == 2  # 2.5 calls a minute: two now
    assert budget.left("shop").tokens is None
    with pytest.raises(ValueError, match="share"):
        JudgeBudget(limits, counter, share=1.5)
    unlimited = JudgeBudget({}, LocalCounter(), Clock(0.0), default=BudgetLimits())
    assert unlimited.grant("any", 7, tokens_each=500) == 7
