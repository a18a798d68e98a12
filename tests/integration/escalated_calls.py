"""Escalated calls in a test database as the worker stores them: the call, a detector's finding, the escalation,
the judge's answer, and a review verdict on it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from clickhouse_connect.driver.client import Client

from detectors.base import DetectorResult, DetectorStatus
from detectors.models.chat import USAGE_KEY
from detectors.verdict import CallJudgement, CallVerdict
from pipeline.config.content_policy import STORE_ALL
from pipeline.judge.records import ESCALATION
from pipeline.sinks.labels import Label, insert_labels
from pipeline.sinks.rows import FINDING_COLUMNS, LLM_CALL_COLUMNS, finding_record, finding_row, llm_call_row
from tests.calls import make_llm_call

APP = "default"


@dataclass(frozen=True, slots=True)
class Escalated:
    """One call sent to the judge: its p, what the judge answered (None: not answered), its claims' verdicts."""

    index: int
    p: float
    judgment: str | None = "faithful"
    claims: tuple[tuple[str, str, str], ...] = field(default=())  # (claim, verdict, reason)
    over_budget: bool = False  # the escalation was skipped: the budget had no room

    @property
    def trace_id(self) -> str:
        return f"{self.index + 1:032x}"

    @property
    def span_id(self) -> str:
        return f"{self.index + 1:016x}"


def insert_escalated(client: Client, database: str, calls: list[Escalated], now: datetime | None = None) -> None:
    """Store ``calls`` with a grounding finding, their escalation and (where answered) the judge's finding."""
    at = now or datetime.now(UTC)
    nanos = int(at.timestamp() * 1e9)
    findings, rows = [], []
    for c in calls:
        call = make_llm_call(f"Answer number {c.index}.", trace_id=c.trace_id, span_id=c.span_id,
                             start_time_unix_nano=nanos, end_time_unix_nano=nanos + 1)  # fmt: skip
        verdict = CallVerdict(c.p, "v-test")
        results = [DetectorResult("grounding", "1", c.p, False, 0.5, summary="grounded in the sources")]
        status = DetectorStatus.SKIPPED if c.over_budget else DetectorStatus.OK
        reason = "over the judge's token budget for today" if c.over_budget else "p 0.41 within the band of route page"
        results.append(DetectorResult(ESCALATION, "1", 0.0, False, 0.0, status, summary=reason,
                                      evidence={"reason": "band", "value": c.p, "route_now": "",
                                                "deadline_unix": at.timestamp() + 120}))  # fmt: skip
        if c.judgment is not None:
            counts = {
                v: sum(verdict == v for _, verdict, _ in c.claims) for v in ("supported", "contradicted", "unsupported")
            }
            claims = [{"claim": claim, "verdict": v, "reason": why} for claim, v, why in c.claims]
            evidence = {"judgment": c.judgment, "claims": claims, **counts, "seconds": 2.5,
                        USAGE_KEY: {"requests": 2, "tokens": 812}}  # fmt: skip
            flagged = c.judgment == "hallucinated"
            results.append(DetectorResult("judge", "1+claims.1", 0.5, flagged, 0.5, severity=2 if flagged else 0,
                                          summary="the judge's reason line", evidence=evidence))  # fmt: skip
        findings += [finding_row(finding_record(call, r, "t1", STORE_ALL.findings, APP, verdict), at) for r in results]
        rows.append(llm_call_row(call, STORE_ALL.llm_calls, at, CallJudgement(verdict, False)))
    client.insert(f"{database}.findings", findings, column_names=FINDING_COLUMNS)
    client.insert(f"{database}.llm_calls", rows, column_names=LLM_CALL_COLUMNS)


def insert_verdicts(client: Client, database: str, verdicts: list[tuple[Escalated, bool]]) -> None:
    """Blind review verdicts (hallucinated or not) on ``verdicts``' calls, drawn with inclusion probability 1."""
    at = datetime.now(UTC)
    labels = [Label(c.trace_id, c.span_id, hallucinated, "reviewer", at, inclusion_probability=1.0,
                    stratum="p 0.30-0.50", blind=True) for c, hallucinated in verdicts]  # fmt: skip
    insert_labels(client, database, labels, "review")
