"""A call's escalation as the pages show it: why the judge was asked, what it answered on each claim, what it cost."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from detectors.models.chat import USAGE_KEY
from pipeline.config.alerting import JUDGE
from pipeline.judge.records import ESCALATION, JUDGMENT_KEY
from pipeline.ui.queries import FindingView

_FIRST = {"contradicted": 0, "unsupported": 1}  # the claims that decide a "hallucinated" first; supported ones last


@dataclass(frozen=True, slots=True)
class JudgedClaim:
    """One claim of the answer and the judge's verdict on it against the call's context."""

    claim: str
    verdict: str
    reason: str


@dataclass(frozen=True, slots=True)
class EscalationView:
    """Why the call was escalated and, once the judge answered, its judgment and claims."""

    reason: str  # the escalation's summary: what the answer could change
    sent: bool  # False: over budget, never asked
    judgment: str = ""  # '' while no answer is stored
    judge_status: str = ""
    judge_summary: str = ""
    claims: tuple[JudgedClaim, ...] = ()
    tokens: int | None = None
    seconds: float | None = None


def escalation_view(findings: Sequence[FindingView]) -> EscalationView | None:
    """The call's escalation and the judge's answer among its findings (None: it was not escalated)."""
    escalation = next((f for f in findings if f.detector == ESCALATION), None)
    if escalation is None:
        return None
    sent = EscalationView(escalation.summary, escalation.status == "ok")
    judge = next((f for f in findings if f.detector == JUDGE), None)
    if judge is None:
        return sent
    evidence = judge.evidence
    claims = sorted((_claim(c) for c in evidence.get("claims", []) if isinstance(c, dict)),
                    key=lambda c: _FIRST.get(c.verdict, len(_FIRST)))  # fmt: skip
    usage = evidence.get(USAGE_KEY)
    seconds = evidence.get("seconds")
    return EscalationView(
        sent.reason,
        sent.sent,
        str(evidence.get(JUDGMENT_KEY, "unknown")),
        judge.status,
        judge.summary,
        tuple(claims),
        int(usage.get("tokens", 0)) if isinstance(usage, dict) else None,
        float(seconds) if isinstance(seconds, int | float) else None,
    )


def _claim(stored: dict[str, Any]) -> JudgedClaim:
    return JudgedClaim(str(stored.get("claim", "")), str(stored.get("verdict", "")), str(stored.get("reason", "")))
