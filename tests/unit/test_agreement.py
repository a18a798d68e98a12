"""The agreement rule: two distinct detectors make one alert per trace per rule, gated by the call's probability."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from pydantic import ValidationError

from detectors.thresholds import Thresholds
from detectors.verdict import PlattScaling
from pipeline.agreement.rules import AgreementRule, TraceState, counts_toward_agreement
from pipeline.config.alerting import AlertingSettings, AlertRule, default_rules
from pipeline.config.policy_book import PolicyBook
from pipeline.config.settings import Settings
from pipeline.rate.maps import AppMap, AppMaps
from pipeline.sinks.finding import Finding
from pipeline.untrusted import MalformedRecord

TRACE = "ab" * 16


def finding(detector: str, *, flagged: bool = True, severity: int = 2, score: float = 0.8, **extra: Any) -> Finding:
    """A findings record as the agreement stage reads it off the topic."""
    return Finding.from_json(
        {
            "trace_id": TRACE,
            "span_id": "cd" * 8,
            "service": "support-bot",
            "model": "gpt-4o",
            "operation": "chat",
            "detector": detector,
            "status": "ok",
            "score": score,
            "threshold": 0.5,
            "flagged": flagged,
            "severity": severity if flagged else 0,
            "summary": f"{detector} says so",
            "evidence": {"spans": []},
            "p_hallucination": 0.95,
            **extra,
        }
    )


def run(rule: AgreementRule, findings: list[Finding], start: float = 1000.0) -> tuple[TraceState | None, list]:
    state, alerts = None, []
    for offset, record in enumerate(findings):
        decision = rule.apply(state, [record], start + offset)
        if decision.state is not None:
            state = TraceState.from_dict(decision.state.to_dict())  # through JSON, as the table stores it
        if decision.alert is not None:
            alerts.append(decision.alert)
    return state, alerts


MINIMUMS = {"page": 0.9, "slack": 0.8}
GATED = [rule.resolved(MINIMUMS) for rule in default_rules()]
DEFAULT = AgreementRule(GATED, window_seconds=600)


def book(**alerting: Any) -> PolicyBook:
    thresholds = Thresholds("t", {"grounding": 0.5}, alert_probability=MINIMUMS)
    return PolicyBook(Settings(alerting=AlertingSettings(**alerting)), thresholds)


def test_one_detector_alone_never_alerts():
    state, alerts = run(DEFAULT, [finding("grounding"), finding("grounding", score=0.9)])
    assert alerts == []
    assert state is not None and list(state.flags) == ["grounding"]


def test_two_detectors_make_one_slack_alert_with_both_as_evidence():
    _, alerts = run(DEFAULT, [finding("grounding"), finding("contradiction", severity=2)])
    assert [(a.rule, a.route) for a in alerts] == [("two-detectors", "slack")]
    alert = alerts[0]
    assert alert.trace_id == TRACE and alert.alert_id == f"{TRACE}:two-detectors"
    assert set(alert.detector_names) == {"grounding", "contradiction"}
    assert (alert.service, alert.model, alert.operation) == ("support-bot", "gpt-4o", "chat")


def test_redelivered_findings_do_not_fire_again():
    records = [finding("grounding"), finding("contradiction")]
    _, alerts = run(DEFAULT, records + records + records)
    assert len(alerts) == 1


def test_grounding_and_schema_page():
    _, alerts = run(DEFAULT, [finding("schema_violation", severity=4), finding("grounding")])
    assert [(a.rule, a.route, a.severity) for a in alerts] == [("grounding-and-schema", "page", 4)]


def test_a_later_finding_escalates_to_a_higher_rule_but_never_adds_a_lower_one():
    _, alerts = run(DEFAULT, [finding("confidence"), finding("grounding"), finding("schema_violation", severity=4)])
    assert [a.rule for a in alerts] == ["two-detectors", "grounding-and-schema"]
    _, alerts = run(DEFAULT, [finding("grounding"), finding("schema_violation"), finding("confidence")])
    assert [a.rule for a in alerts] == ["grounding-and-schema"]


def test_findings_that_arrive_together_fire_the_highest_rule_they_make():
    together = [finding("schema_violation", severity=4), finding("contradiction"), finding("grounding")]
    decision = DEFAULT.apply(None, together, 1000.0)
    assert decision.alert is not None and decision.alert.rule == "grounding-and-schema"
    assert decision.state is not None and decision.state.fired == ["grounding-and-schema"]
    assert DEFAULT.apply(decision.state, together, 1001.0).alert is None


def test_severe_contradiction_needs_severity_four_plus_any_other():
    _, mild = run(DEFAULT, [finding("contradiction", severity=2), finding("confidence")])
    _, severe = run(DEFAULT, [finding("contradiction", severity=4), finding("confidence")])
    assert [a.rule for a in mild] == ["two-detectors"]
    assert [a.rule for a in severe] == ["severe-contradiction"]


@pytest.mark.parametrize(
    "other",
    [
        {"detector": "sentinel"},  # its flag means "unverified", not "hallucinated"
        {"detector": "confidence", "flagged": False},
        {"detector": "confidence", "status": "error"},
        {"detector": "confidence", "status": "skipped"},
    ],
)
def test_findings_that_are_not_flags_do_not_count(other):
    record = finding(**other) if "detector" in other and len(other) == 1 else replace(finding("x"), **other)
    assert not counts_toward_agreement(record)
    _, alerts = run(DEFAULT, [finding("grounding"), record])
    assert alerts == []


def test_findings_outside_the_window_do_not_agree():
    rule = AgreementRule(GATED, window_seconds=10)
    state = rule.apply(None, [finding("grounding")], 1000.0).state
    decision = rule.apply(state, [finding("contradiction")], 1011.0)
    assert decision.alert is None
    assert decision.state is not None and list(decision.state.flags) == ["contradiction"]
    assert rule.expired(1000.0, 1011.0) and not rule.expired(1000.0, 1009.0)


def test_the_strongest_flag_of_a_detector_is_kept():
    state, _ = run(DEFAULT, [finding("grounding", score=0.6), finding("grounding", score=0.9)])
    assert state is not None and state.flags["grounding"].score == 0.9
    decision = DEFAULT.apply(state, [finding("grounding", score=0.7)], 1100.0)
    assert decision.state is None  # nothing to store: weaker than what is held


def test_odd_records_are_read_as_empty_fields_or_refused():
    with pytest.raises(MalformedRecord, match="trace_id"):  # the stage dead-letters a record without a trace id
        Finding.from_json({"detector": "grounding"})
    with pytest.raises(MalformedRecord, match="invalid trace id"):  # an all-zero id is every id-less producer's
        Finding.from_json({"trace_id": "0" * 32, "detector": "grounding"})
    with pytest.raises(MalformedRecord, match="high"):
        Finding.from_json({"trace_id": TRACE, "score": "high"})
    with pytest.raises(MalformedRecord, match="severity"):  # a UInt8 column downstream
        Finding.from_json({"trace_id": TRACE, "severity": 256})
    odd = finding("grounding", score=None, evidence="not a mapping", p_hallucination=1.5, flagged="yes")
    assert (odd.score, odd.evidence, odd.p_hallucination, odd.flagged) == (0.0, {}, None, False)
    decision = DEFAULT.apply(None, [replace(odd, flagged=True)], 1.0)
    assert decision.state is not None and decision.state.flags["grounding"].evidence == {}


def test_custom_rules_from_yaml_shape():
    config = AlertingSettings.model_validate(
        {"rules": [{"name": "any-single-flag", "route": "log", "min_detectors": 1}]}
    )
    rule = AgreementRule(config.rules, config.window_seconds)
    _, alerts = run(rule, [finding("grounding", p_hallucination=None)])
    assert [(a.rule, a.route) for a in alerts] == [("any-single-flag", "log")]


def test_rules_must_name_configured_routes_and_be_unique():
    with pytest.raises(ValidationError, match="not configured: pager"):
        AlertingSettings.model_validate({"rules": [{"name": "x", "route": "pager"}]})
    with pytest.raises(ValidationError, match="unique"):
        AlertingSettings.model_validate({"rules": [{"name": "x", "route": "log"}, {"name": "x", "route": "slack"}]})


def test_rule_matching():
    rule = AlertRule(name="r", route="page", all_of=["contradiction"], min_severity=4)
    assert rule.matches({"contradiction": 4, "grounding": 2})
    assert not rule.matches({"contradiction": 2, "grounding": 4})
    assert not rule.matches({"contradiction": 4})


def test_detectors_reading_one_signal_count_once():
    rule = AgreementRule.from_settings(AlertingSettings(), book())
    _, alerts = run(rule, [finding("grounding"), finding("unsupported_spans")])
    assert alerts == []  # both compare the answer with the sources through one embedding model
    _, alerts = run(rule, [finding("unsupported_spans"), finding("contradiction")])
    assert [a.rule for a in alerts] == ["two-detectors"]
    ungrouped = AgreementRule.from_settings(AlertingSettings(same_signal=[]), book(same_signal=[]))
    _, alerts = run(ungrouped, [finding("grounding"), finding("unsupported_spans")])
    assert [a.rule for a in alerts] == ["two-detectors"]


def test_rules_on_guesses_need_the_probability_of_their_route_and_rules_on_facts_do_not():
    def call(p: float | None, first: str = "contradiction", severity: int = 4) -> list[dict]:
        return [finding(first, severity=severity, p_hallucination=p), finding("grounding", p_hallucination=p)]

    assert [a.rule for a in run(DEFAULT, call(0.95))[1]] == ["severe-contradiction"]
    assert [a.rule for a in run(DEFAULT, call(0.85))[1]] == ["two-detectors"]  # under page's 0.9, over slack's 0.8
    assert run(DEFAULT, call(0.7))[1] == []
    assert run(DEFAULT, call(None))[1] == []  # a call nothing weighed has no probability to pass
    assert [a.rule for a in run(DEFAULT, call(None, "tool_outcome"))[1]] == ["claimed-failed-tool"]


def test_a_trace_keeps_its_highest_probability_and_the_alert_carries_it():
    first = finding("contradiction", severity=4, p_hallucination=0.5)
    state, alerts = run(DEFAULT, [first, finding("grounding", p_hallucination=0.93, span_id="ef" * 8)])
    assert state is not None and state.probability == 0.93
    assert [(a.rule, a.p_hallucination) for a in alerts] == [("severe-contradiction", 0.93)]


def test_route_minimums_come_from_the_thresholds_file_and_must_be_there():
    rule = AgreementRule.from_settings(AlertingSettings(), book())
    assert [r.min_probability for r in rule.rules] == [None, 0.9, None, 0.8]
    with pytest.raises(ValueError, match="resolve their route"):
        AgreementRule(default_rules(), window_seconds=600)
    with pytest.raises(ValueError, match="route page's calibrated probability"):
        PolicyBook(Settings(), Thresholds("t", {"grounding": 0.5}))


def test_an_applied_map_brings_its_own_route_minimums_and_a_new_version_replaces_them():
    maps = AppMaps()
    rule = AgreementRule.from_settings(AlertingSettings(), book(), maps)
    pair = [finding("contradiction", severity=2, p_hallucination=0.85), finding("grounding", p_hallucination=0.85)]
    assert [a.rule for a in run(rule, pair)[1]] == ["two-detectors"]  # over the file's slack minimum, 0.8
    maps.update({"default": AppMap("default", "v1", PlattScaling(), {"slack": 0.88})})
    assert run(rule, pair)[1] == []  # the map's minimum, on its own scale of p
    maps.update({"default": AppMap("default", "v2", PlattScaling(), {"slack": 0.6})})
    assert [a.rule for a in run(rule, pair)[1]] == ["two-detectors"]
    # A route the map sets no minimum for keeps the file's, carried through the map: the same calls pass it.
    doubled = PlattScaling(slope=2.0)
    maps.update({"default": AppMap("default", "v3", doubled, {})})
    page = next(r for r in rule.rules_of("default").rules if r.name == "severe-contradiction")
    assert page.min_probability == pytest.approx(doubled.apply_one(MINIMUMS["page"]))
    assert [r.min_probability for r in rule.rules_of("another-app").rules] == [None, 0.9, None, 0.8]


def test_a_fact_among_the_agreeing_detectors_needs_no_probability():
    pair = [finding("schema_violation", p_hallucination=0.2), finding("contradiction", p_hallucination=0.2)]
    assert [a.rule for a in run(DEFAULT, pair)[1]] == ["two-detectors"]


def test_a_sampled_detector_the_verdict_never_weighed_agrees_without_a_probability():
    pair = [finding("grounding", p_hallucination=0.3), finding("self_consistency", p_hallucination=None)]
    assert [a.rule for a in run(DEFAULT, pair)[1]] == ["two-detectors"]
