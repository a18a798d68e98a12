"""Which of a batch's calls go to the judge: those whose route it could change, most valuable first, within budget."""

from __future__ import annotations

import dataclasses
from typing import Any

from pydantic import SecretStr

from detectors.claims import ClaimsConfig
from detectors.claims.detector import ClaimsDetector
from detectors.llm_call import Source
from pipeline.agreement.rules import AgreementRule
from pipeline.config.alerting import AlertingSettings
from pipeline.config.escalation import EscalationSettings, JudgeBudgetConfig
from pipeline.config.sampled import LLMEndpointConfig
from pipeline.escalation.escalator import Escalator
from pipeline.judge.asking import Judge
from pipeline.judge.budget import JudgeBudget, LocalCounter
from pipeline.judge.records import DEADLINE_KEY, ESCALATION
from pipeline.sampled.llm_client import LLMClient
from pipeline.sampled.sampled_call import SampledCall
from pipeline.spans.processor import BatchResult
from tests.calls import make_llm_call
from tests.unit.test_agreement import TRACE, book, finding

NOW = 1_700_000_000.0


def call_with(span: str, p: float, *detectors: str, unverified: bool = False) -> tuple[Any, list[Any]]:
    """A call and its findings: ``detectors`` flagged, coverage's "unverified" when asked, p on each."""
    call = make_llm_call("An answer.", "A question?", [Source("doc", "What the answer rests on.")], trace_id=TRACE,
                         span_id=span)  # fmt: skip
    findings = [finding(name, span_id=span, p_hallucination=p) for name in detectors]
    findings.append(finding("coverage", flagged=unverified, span_id=span, p_hallucination=p))
    return call, findings


def escalate(
    calls: list[tuple[Any, list[Any]]], calls_per_minute: float, weigh_share: float = 0.0
) -> tuple[BatchResult, list[Any]]:
    policies = book()
    budget_config = JudgeBudgetConfig(calls_per_minute=calls_per_minute)
    settings = EscalationSettings(enabled=True, budget=budget_config, weigh_share=weigh_share)
    budget = JudgeBudget(settings.apps, LocalCounter(), clock=lambda: NOW, default=settings.budget)
    agreement = AgreementRule.from_settings(AlertingSettings(), policies)
    judge = Judge(ClaimsDetector(ClaimsConfig(), 0.3, LLMClient(LLMEndpointConfig(api_key=SecretStr("unused")))))
    escalator = Escalator(settings, agreement, policies, budget, judge, "t", clock=lambda: NOW)
    result = BatchResult(llm_calls=[c for c, _ in calls], findings=[f for _, fs in calls for f in fs])
    return result, escalator.escalate(result)


def test_the_most_valuable_call_is_judged_and_the_one_over_budget_says_so():
    could_alert = call_with("a" * 16, 0.75, "grounding")  # slack at 0.8 once the judge's "hallucinated" is in
    out_of_reach = call_with("b" * 16, 0.6, "grounding")  # 0.74 even then: nothing to change
    could_hold_back = call_with("c" * 16, 0.82, "grounding", "contradiction")  # alerts now; "faithful": 0.71
    result, records = escalate([could_hold_back, out_of_reach, could_alert], calls_per_minute=1)

    escalations = {f.span_id: f for f in result.findings if f.detector == ESCALATION}
    assert set(escalations) == {"a" * 16, "c" * 16}
    sent, skipped = escalations["a" * 16], escalations["c" * 16]
    assert sent.status == "ok" and sent.evidence["reason"] == "could alert"
    assert sent.evidence[DEADLINE_KEY] == NOW + 180 and sent.p_hallucination == 0.75
    assert skipped.status == "skipped" and skipped.evidence["reason"] == "could hold back"
    assert "calls per minute" in skipped.summary and not skipped.flagged
    (record,) = records
    judged = SampledCall.from_json(record[1])
    assert (judged.call.span_id, judged.rule, judged.deadline) == ("a" * 16, ESCALATION, NOW + 180)


def test_unverified_claims_go_to_the_judge_even_where_the_route_cannot_move_and_nothing_waits():
    result, records = escalate([call_with("d" * 16, 0.2, unverified=True)], calls_per_minute=10)
    (escalated,) = [f for f in result.findings if f.detector == ESCALATION]
    assert escalated.evidence["reason"] == "unverified" and len(records) == 1
    assert DEADLINE_KEY not in escalated.evidence and "cannot change the route" in escalated.summary


def test_the_calls_the_review_queue_serves_first_are_judged_after_those_whose_route_could_change():
    could_alert = call_with("a" * 16, 0.75, "grounding")
    out_of_reach = call_with("b" * 16, 0.6, "grounding")
    result, records = escalate([out_of_reach, could_alert], calls_per_minute=1, weigh_share=1.0)
    reasons = {f.span_id: (f.status, f.evidence["reason"]) for f in result.findings if f.detector == ESCALATION}
    assert reasons == {"a" * 16: ("ok", "could alert"), "b" * 16: ("skipped", "to weigh the judge")}
    result, records = escalate([out_of_reach], calls_per_minute=1, weigh_share=1.0)
    (weighed,) = [f for f in result.findings if f.detector == ESCALATION]
    assert weighed.status == "ok" and DEADLINE_KEY not in weighed.evidence and len(records) == 1


def test_an_application_without_budget_is_never_judged():
    result, records = escalate([call_with("e" * 16, 0.75, "grounding")], calls_per_minute=0)
    (escalated,) = [f for f in result.findings if f.detector == ESCALATION]
    assert escalated.status == "skipped" and records == []


def test_a_call_the_judge_cannot_read_is_not_escalated():
    call, findings = call_with("f" * 16, 0.75, "grounding")
    bare = dataclasses.replace(call, sources=())  # the question is all the context there is
    result, records = escalate([(bare, findings)], calls_per_minute=10)
    assert [f for f in result.findings if f.detector == ESCALATION] == [] and records == []
