"""The spans stage's side of escalation: which of a batch's calls go to the judge, within each application's budget.

Per batch, each detected call the judge can read (an answer, and context beyond the question)
with its own flags and ``p_hallucination`` are put through the band
(:func:`pipeline.escalation.band.escalation`): a call whose route the judgment could change,
whose claims coverage left unverified, or that is among the first the review queue will serve
(``escalation.weigh_share``: their verdicts measure the judge) is a candidate.  Only the first
kind holds its trace's decision.  Each application's candidates go to
the judge most valuable first while its budget has room; the others are decided without a
judgment.  Either way an ``escalation`` finding joins the batch's findings (stored, and
published before the call's flags are acted on, in the same message), and the sent calls
become records for the consistency topic, where the judge answers them.
"""

from __future__ import annotations

import dataclasses
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from detectors.base import DetectorResult, DetectorStatus
from detectors.llm_call import LLMCall
from pipeline import metrics
from pipeline.agreement.rules import AgreementRule, counts_toward_agreement
from pipeline.config.escalation import EscalationSettings
from pipeline.config.policy_book import PolicyBook
from pipeline.escalation.band import Escalation, escalation, most_valuable
from pipeline.judge.asking import Judge
from pipeline.judge.budget import JudgeBudget
from pipeline.judge.records import DEADLINE_KEY, ESCALATION
from pipeline.rate.draw_order import drawn_early
from pipeline.sampled.sampled_call import SampledCall
from pipeline.sampled.stage import consistency_call
from pipeline.sinks.finding import Finding
from pipeline.sinks.rows import finding_record
from pipeline.spans.processor import BatchResult

_VERSION = "1"
_COVERAGE = "coverage"  # its flag: claims no source covers ("unverified"), which the judge reads


class Escalator:
    """Escalates the uncertain calls of each batch the spans stage detected."""

    def __init__(
        self,
        settings: EscalationSettings,
        agreement: AgreementRule,
        policies: PolicyBook,
        budget: JudgeBudget,
        judge: Judge,
        thresholds_version: str,
        review_seed: int = 0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._settings = settings
        self._agreement = agreement
        self._policies = policies
        self.budget = budget
        self._judge = judge
        self._thresholds_version = thresholds_version
        self._review_seed = review_seed
        self._clock = clock
        self.sent = 0  # calls this process sent to the judge

    def escalate(self, result: BatchResult) -> list[tuple[bytes, bytes]]:
        """Add the batch's escalation findings to ``result``; the records (key = trace id) the judge should answer."""
        by_call: dict[tuple[str, str], list[Finding]] = defaultdict(list)
        for finding in result.findings:
            by_call[(finding.trace_id, finding.span_id)].append(finding)
        by_app: dict[str, list[tuple[tuple[LLMCall, Finding], Escalation]]] = defaultdict(list)
        for call in result.llm_calls:
            findings = by_call.get((call.trace_id, call.span_id))
            if not findings or not call.has_content or not self._judge.can_judge(call):
                continue
            policy = findings[0].policy
            wanted = self._escalation(findings, policy)
            if wanted is not None:
                by_app[policy].append(((call, findings[0]), wanted))
        records: list[tuple[bytes, bytes]] = []
        for app, candidates in by_app.items():
            records += self._within_budget(app, candidates, result)
        return records

    def _escalation(self, findings: list[Finding], policy: str) -> Escalation | None:
        flags = {f.detector: f.severity for f in findings if counts_toward_agreement(f)}
        unverified = any(f.detector == _COVERAGE and f.status == "ok" and f.flagged for f in findings)
        first = findings[0]
        to_weigh = drawn_early(self._review_seed, first.trace_id, first.span_id, self._settings.weigh_share)
        weight = self._agreement.weight_of(policy)
        return escalation(self._agreement, flags, first.p_hallucination, weight, policy, unverified, to_weigh)

    def _within_budget(
        self, app: str, candidates: list[tuple[tuple[LLMCall, Finding], Escalation]], result: BatchResult
    ) -> list[tuple[bytes, bytes]]:
        """Send the most valuable candidates while the budget lasts (each: a call, one of its findings, why)."""
        records = []
        deadline = self._clock() + self._settings.deadline_seconds
        policy = self._policies.named(app)
        for (call, its_finding), wanted in most_valuable(candidates, len(candidates)):
            granted = self.budget.grant(app, 1, self._judge.estimated_tokens(call))
            over_budget = "" if granted else self._limit_reached(app)
            metrics.ESCALATIONS.labels(app, str(wanted.reason), "over_budget" if over_budget else "sent").inc()
            record = finding_record(call, _escalation_result(wanted, deadline, over_budget), self._thresholds_version,
                                    policy.content.findings, app)  # fmt: skip
            # The call's probability, as its detectors' findings carry it: the agreement stage reads it off each.
            probability, version = its_finding.p_hallucination, its_finding.verdict_version
            result.findings.append(dataclasses.replace(record, p_hallucination=probability, verdict_version=version))
            if not over_budget:
                self.sent += 1
                sent = SampledCall(consistency_call(call, policy.content.llm_calls), ESCALATION, app, deadline)
                records.append((call.trace_id.encode(), sent.to_json()))
        left = self.budget.left(app)
        for kind, amount in (("calls", left.calls), ("tokens", left.tokens)):
            if amount is not None:
                metrics.JUDGE_BUDGET_LEFT.labels(app, kind).set(amount)
        return records

    def _limit_reached(self, app: str) -> str:
        left = self.budget.left(app)
        if left.calls is not None and left.calls < 1:
            return "over the judge budget's calls per minute (escalation.budget.calls_per_minute)"
        return "over the judge budget's tokens per day (escalation.budget.tokens_per_day)"


def _escalation_result(wanted: Escalation, deadline: float, over_budget: str) -> DetectorResult:
    """The finding of an escalation: sent to the judge until ``deadline`` (unix seconds), or over budget."""
    evidence: dict[str, Any] = {
        "reason": str(wanted.reason),
        "value": round(wanted.value, 4),
        "route_now": wanted.route_now,
        "if_hallucinated": wanted.if_hallucinated,
        "if_faithful": wanted.if_faithful,
    }
    if over_budget:
        summary, status = f"not judged ({wanted.reason}): {over_budget}", DetectorStatus.SKIPPED
    elif wanted.could_change_route:  # the decision waits for the answer until the deadline
        evidence[DEADLINE_KEY] = deadline
        summary = f"sent to the judge ({wanted.reason}); its answer changes the route with chance {wanted.value:.2f}"
        status = DetectorStatus.OK
    else:
        summary, status = f"sent to the judge ({wanted.reason}); its answer cannot change the route", DetectorStatus.OK
    return DetectorResult(ESCALATION, _VERSION, wanted.value, False, 1.0, status, 0, summary, evidence)
