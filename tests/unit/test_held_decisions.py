"""An escalated call's decision waits for the judge, weighs its answer in, and is made exactly once."""

from __future__ import annotations

from typing import Any

from detectors.verdict import PlattScaling
from pipeline.agreement.rules import AgreementRule, Decision, TraceState
from pipeline.config.alerting import AlertingSettings
from pipeline.judge.records import DEADLINE_KEY, JUDGMENT_KEY
from pipeline.judge.weight import SHIPPED_PRIOR, Judgment
from pipeline.rate.maps import JUDGE_REPORT_KEY, AppMap, AppMaps
from tests.unit.test_agreement import DEFAULT, book, finding

START = 1000.0
DEADLINE = START + 180


def escalated(p: float, deadline: float = DEADLINE) -> Any:
    """The escalation finding of a call sent to the judge."""
    return finding("escalation", flagged=False, p_hallucination=p, evidence={DEADLINE_KEY: deadline})


def judged(judgment: Judgment, p: float) -> Any:
    return finding("judge", flagged=judgment is Judgment.HALLUCINATED, p_hallucination=p,
                   evidence={JUDGMENT_KEY: str(judgment)})  # fmt: skip


def folded(rule: AgreementRule, batches: list[tuple[float, list[Any]]]) -> tuple[TraceState | None, list[Any]]:
    """Each batch applied at its time, the state through JSON as the table keeps it; the alerts made."""
    state: TraceState | None = None
    alerts = []
    for at, batch in batches:
        decision = rule.apply(state, batch, at)
        state, alerts = _kept(state, decision), alerts + ([decision.alert] if decision.alert else [])
    return state, alerts


def _kept(state: TraceState | None, decision: Decision) -> TraceState | None:
    return TraceState.from_dict(decision.state.to_dict()) if decision.state is not None else state


def test_a_single_signal_waits_and_alerts_once_the_judge_says_hallucinated():
    p = 0.7  # under slack's 0.8 alone; the prior's "hallucinated" (+0.62 in logit) takes it to 0.82
    call = [finding("grounding", p_hallucination=p), escalated(p)]
    state, alerts = folded(DEFAULT, [(START, call)])
    assert alerts == [] and state is not None and state.holding(START + 1)
    state, alerts = folded(DEFAULT, [(START, call), (START + 20, [judged(Judgment.HALLUCINATED, p)])])
    assert [(a.rule, a.route) for a in alerts] == [("two-detectors", "slack")]
    (alert,) = alerts
    assert {d.detector for d in alert.detectors} == {"grounding", "judge"}
    assert alert.p_hallucination == SHIPPED_PRIOR.apply(p, Judgment.HALLUCINATED)
    # Redelivered: the judgment, the call's findings and the escalation again change nothing.
    again = [(START + 30, [judged(Judgment.HALLUCINATED, p)]), (START + 31, call)]
    assert folded(DEFAULT, [(START, call), (START + 20, [judged(Judgment.HALLUCINATED, p)]), *again])[1] == alerts


def test_an_alert_barely_over_its_minimum_waits_and_a_faithful_answer_holds_it_back():
    p = 0.82  # over slack's 0.8 with two signals; the prior's "faithful" takes it to 0.71
    pair = [finding("grounding", p_hallucination=p), finding("contradiction", p_hallucination=p), escalated(p)]
    assert folded(DEFAULT, [(START, pair)])[1] == []
    assert folded(DEFAULT, [(START, pair), (START + 5, [judged(Judgment.FAITHFUL, p)])])[1] == []
    # An unusable answer moves nothing: the detectors' alert goes out as soon as it is in.
    _, alerts = folded(DEFAULT, [(START, pair), (START + 5, [judged(Judgment.UNKNOWN, p)])])
    assert [(a.rule, a.p_hallucination) for a in alerts] == [("two-detectors", p)]


def test_past_the_deadline_the_decision_is_made_once_without_the_judgment_and_a_late_one_changes_nothing():
    p = 0.82
    pair = [finding("grounding", p_hallucination=p), finding("contradiction", p_hallucination=p), escalated(p)]
    state, _ = folded(DEFAULT, [(START, pair)])
    assert state is not None
    assert DEFAULT.release(state, DEADLINE - 1) == Decision(None)  # not yet
    decision = DEFAULT.release(state, DEADLINE)
    assert decision.alert is not None and decision.alert.rule == "two-detectors"
    state = _kept(state, decision)
    assert state is not None and state.judgment == "unknown" and not state.holding(DEADLINE)
    assert DEFAULT.release(state, DEADLINE + 5) == Decision(None)  # released once
    late = DEFAULT.apply(state, [judged(Judgment.FAITHFUL, p)], DEADLINE + 10)
    assert late.alert is None and late.state is None  # the decision stands


def test_a_judge_without_weight_adds_no_flag_and_moves_no_probability():
    maps = AppMaps()
    rule = AgreementRule.from_settings(AlertingSettings(), book(), maps)
    chance = {"sensitivity": 0.5, "specificity": 0.5, "verdicts": 40, "note": "no better than chance"}
    maps.update({"default": AppMap("default", "v1", PlattScaling(), {}, 40, {JUDGE_REPORT_KEY: chance})})
    assert not rule.weight_of("default").weighs
    p = 0.95
    call = [finding("grounding", p_hallucination=p), escalated(p), judged(Judgment.HALLUCINATED, p)]
    assert folded(rule, [(START, call)])[1] == []  # one signal stays one signal
    assert rule.weight_of("another-app") == SHIPPED_PRIOR


def test_the_hold_survives_the_table_and_odd_values_read_as_none():
    p = 0.7
    state, _ = folded(DEFAULT, [(START, [finding("grounding", p_hallucination=p), escalated(p)])])
    assert state is not None and state.awaiting_until == DEADLINE and state.judgment == ""
    odd = {**state.to_dict(), "awaiting_until": "soon", "judgment": "maybe"}
    read = TraceState.from_dict(odd)
    assert read.awaiting_until is None and read.judgment == ""
