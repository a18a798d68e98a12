"""Escalations as findings: stored beside the detectors' (why, what the answer could change), and read back.

An escalation is a finding of detector ``escalation`` on the call: status ``ok`` when the
judge was asked (its evidence holds the deadline the alert waits until), ``skipped`` when the
budget had no room (its summary says which limit).  It never flags: it is not evidence of a
hallucination, only of a decision waiting.  The judge's answer is a finding of detector
``judge`` (:mod:`pipeline.escalation.judge`).  Both reach ClickHouse's findings table, so what
was spent, on which calls and what it changed is one query away.
"""

from __future__ import annotations

from detectors.base import DetectorStatus
from pipeline.judge.weight import Judgment
from pipeline.sinks.finding import Finding

ESCALATION = "escalation"
DEADLINE_KEY = "deadline_unix"  # in a sent escalation's evidence
JUDGMENT_KEY = "judgment"  # in a judge finding's evidence


def deadline_of(finding: Finding) -> float | None:
    """Until when a sent escalation holds its trace's decision (None: not a sent escalation)."""
    if finding.detector != ESCALATION or finding.status != DetectorStatus.OK:
        return None
    deadline = finding.evidence.get(DEADLINE_KEY)
    return float(deadline) if isinstance(deadline, int | float) else None


def judgment_in(finding: Finding) -> Judgment:
    """The judgment a judge finding carries ("unknown" for anything else)."""
    try:
        return Judgment(str(finding.evidence.get(JUDGMENT_KEY, Judgment.UNKNOWN)))
    except ValueError:
        return Judgment.UNKNOWN
