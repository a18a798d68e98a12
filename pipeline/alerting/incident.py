"""What a rate monitor tells its route's destinations: an incident opened, changed, or resolved.

The monitor (:mod:`pipeline.monitors`) decides; destinations only render and send a
note.  Every note of one incident carries the incident's :class:`IncidentRef`, whose id is
the PagerDuty dedup key, so the trigger, its updates and the resolve act on one PagerDuty
incident, and whose Slack thread keeps the follow-ups under the first post.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from pipeline.alerting.alert import IncidentRef


class IncidentEvent(StrEnum):
    """What happened to the incident."""

    OPEN = "open"
    UPDATE = "update"
    RESOLVE = "resolve"


@dataclass(frozen=True, slots=True)
class IncidentNote:
    """One event of one incident, with the numbers that caused it."""

    event: IncidentEvent
    ref: IncidentRef  # slack_ts is empty until the opening post went out
    monitor: str
    group: Mapping[str, str]  # the monitor's group_by fields and this group's values
    rate: float  # share of the window's calls flagged
    baseline_rate: float
    calls: int
    flagged: int
    window_minutes: int
    severity: int  # as an alert's: mapped through alerting.pagerduty_severity
    opened_at: datetime
    at: datetime
    summary: str = ""  # the monitor's own sentence for the headline ('': the flag rate's)

    @property
    def where(self) -> str:
        """The group in words: ``service checkout, model gpt-4o``."""
        return ", ".join(f"{name} {value or '(none)'}" for name, value in self.group.items())

    @property
    def headline(self) -> str:
        """What happened, in one line."""
        if self.summary:
            return f"Resolved: {self.summary}" if self.event is IncidentEvent.RESOLVE else self.summary
        numbers = f"{self.rate:.1%} of calls flagged vs {self.baseline_rate:.1%} baseline"
        if self.event is IncidentEvent.RESOLVE:
            return f"Resolved: flag rate back to normal on {self.where} ({numbers})"
        verb = "up" if self.event is IncidentEvent.OPEN else "still up"
        return f"Hallucination flag rate {verb} on {self.where}: {numbers}"
