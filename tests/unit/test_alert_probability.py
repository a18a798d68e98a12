"""Choosing each route's p_hallucination minimum from labelled calls at its false-alarm target."""

from __future__ import annotations

import pytest

from pipeline.agreement.rules import AgreementRule
from pipeline.calibration.alert_probability import GatedCall, RouteTargets, choose_route_minimums, rates_on
from pipeline.config.alerting import AlertingSettings

ROUTING = RouteTargets.from_settings(AlertingSettings())  # page: 1 %, slack: 3 % (cumulative)
PAIR = {"grounding": 2, "contradiction": 2}  # the two-detectors rule: slack
SEVERE = {"contradiction": 4, "unsupported_spans": 2}  # severe-contradiction: page


def calls(flags: dict[str, int], faithful: list[float], hallucinated: list[float], **extra) -> list[GatedCall]:
    return [GatedCall(flags, p, False, **extra) for p in faithful] + [
        GatedCall(flags, p, True, **extra) for p in hallucinated
    ]


def test_each_route_gets_the_lowest_minimum_under_its_target_halfway_to_the_next_call():
    quiet = calls({}, [0.5] * 400, [])  # faithful calls no two detectors agree on
    slack = calls(PAIR, [0.6, 0.7, 0.8], [0.75, 0.9, 0.95])
    page = calls(SEVERE, [0.85], [0.86, 0.99])
    page_minimum, slack_minimum = choose_route_minimums(quiet + slack + page, ROUTING)
    # Page: 1 % of 404 faithful calls is 4.04, one more is tolerated: its one false alarm can stay.
    assert page_minimum.route == "page" and page_minimum.min_probability == 0.0
    # Slack counts the page's alarm too: 3 % of 404 is 12.12, so all four alarms stay.
    assert slack_minimum.min_probability == 0.0 and slack_minimum.fitting.false_alarm_rate == pytest.approx(4 / 404)


def test_a_small_target_pushes_the_minimum_past_the_false_alarms_with_a_margin():
    routing = RouteTargets(ROUTING.rules, ROUTING.signal_of, {"page": 0.01, "slack": 0.01})
    faithful = [0.6, 0.7, 0.8, 0.92]
    group = calls({}, [0.1] * 96, []) + calls(PAIR, faithful, [0.75, 0.9, 0.95])
    _, slack = choose_route_minimums(group, routing)
    # 100 faithful calls at 1 %: one alarm plus the one-call tolerance, so two may stay (0.8 and 0.92).
    assert slack.min_probability == pytest.approx((0.7 + 0.75) / 2)  # halfway past 0.7 to the next call
    assert slack.fitting.false_alarm_rate == pytest.approx(2 / 100) and slack.fitting.recall == 1.0


def test_the_target_holds_in_every_large_enough_group_and_held_out_calls_only_report():
    routing = RouteTargets(ROUTING.rules, ROUTING.signal_of, {"page": 0.01, "slack": 0.01})
    strict = calls({}, [0.1] * 100, [], group="a") + calls(PAIR, [0.8, 0.85, 0.9], [0.95], group="a")
    lenient = calls({}, [0.1] * 1000, [], group="b") + calls(PAIR, [0.5], [0.6], group="b")
    small = calls(PAIR, [0.99], [], group="c")  # too few faithful calls to say anything
    held = calls(PAIR, [0.97], [0.98], held_out=True)
    _, slack = choose_route_minimums(strict + lenient + small + held, routing)
    # Group a (103 faithful) may keep two alarms of its three: the minimum passes 0.8, halfway to 0.85.
    assert slack.worst_group == "a" and slack.min_probability == pytest.approx(0.825)
    assert slack.held_out is not None and slack.held_out.false_alarm_rate == 1.0  # reported, never fitted on
    entry = slack.to_dict()
    assert entry["false_alarm_target"] == 0.01 and entry["heldout_recall"] == 1.0


def test_a_call_without_probability_never_passes_a_gate_and_rates_count_routes():
    unjudged = GatedCall(PAIR, None, True)
    _, slack = choose_route_minimums([unjudged, *calls({}, [0.1] * 60, [])], ROUTING)
    assert slack.fitting.recall == 0.0  # gated rules need a probability
    opened = AgreementRule(
        [rule.resolved({"page": 0.0, "slack": 0.0}) for rule in ROUTING.rules], 600, ROUTING.signal_of
    )
    assert rates_on(opened, [GatedCall(PAIR, 0.5, True)], ["slack"]).recall == 1.0
    assert rates_on(opened, [GatedCall(PAIR, 0.5, True)], ["page"]).recall == 0.0


def test_cross_fitted_calls_keep_the_target_in_all_but_the_spare_folds_of_each_group():
    # Five folds of 100 faithful calls: four quiet, one whose documents draw six slack alarms at 0.6-0.85.
    quiet = [c for fold in range(4) for c in calls({}, [0.1] * 100, [0.95], fold=fold)]
    noisy = calls({}, [0.1] * 94, [], fold=4) + calls(PAIR, [0.6, 0.65, 0.7, 0.75, 0.8, 0.85], [0.95], fold=4)
    # In four folds of five the target holds with every alarm; pooled, 6 of 500 is 1.2 % (target 3 %).
    assert choose_route_minimums(quiet + noisy, ROUTING, spare_folds=1)[1].min_probability == 0.0
    # Every fold: fold 4 may keep 3 + 1 of its 100, so the minimum passes 0.65, halfway to 0.7.
    every = choose_route_minimums(quiet + noisy, ROUTING)[1]
    assert every.min_probability == pytest.approx(0.675) and every.fitting.false_alarm_rate == pytest.approx(4 / 500)


def test_pooled_over_folds_a_group_meets_its_target_outright():
    # Five folds of 40 faithful calls; seven slack alarms at 0.6-0.9, at most two in a fold.
    alarms = [[0.6, 0.65], [0.7, 0.75], [0.8], [0.85], [0.9]]
    group = [
        c
        for fold, ps in enumerate(alarms)
        for c in calls({}, [0.1] * (40 - len(ps)), [0.95], fold=fold) + calls(PAIR, ps, [], fold=fold)
    ]
    # Each fold keeps its alarms within one call of 3 % of 40 (1.2); pooled, 7 of 200 is over 6 (3 %),
    # so the lowest alarm goes: the minimum passes 0.6, halfway to 0.65.
    slack = choose_route_minimums(group, ROUTING, spare_folds=0)[1]
    assert slack.min_probability == pytest.approx(0.625) and slack.fitting.false_alarm_rate == pytest.approx(6 / 200)
    # Not cut into folds, the same calls are one count, known to one call: all seven alarms stay.
    unfolded = [GatedCall(c.flags, c.probability, c.hallucinated) for c in group]
    assert choose_route_minimums(unfolded, ROUTING)[1].min_probability == 0.0
