"""Rate monitors' decisions, as pure functions: counts and the last incident in, what to do out.

Per group of calls a monitor sees three counts, each "calls with findings, and those flagged":
the window (the last ``window_minutes``), the same hour of day on each of the last
``baseline_days`` days, and that whole period.  The baseline is the same-hour count when
it holds ``min_calls`` calls (traffic and its flag rate follow the day), else the whole
period; with neither, the group has no baseline and nothing opens: a new service has no
"normal" yet, and its per-trace alerts still page.

With a baseline rate ``b`` an incident opens at ``max(min_ratio * b, b + min_increase)``
and resolves below ``b + recover_share * (open threshold - b)`` (hysteresis).  An open
incident whose window or baseline is too thin is held as it is: too few calls tell
neither that it got worse nor that it ended.  An update goes out at most once per window
length, when the rate moved by at least half the rate last sent (and by ``min_increase``),
so a noisy rate does not flood the thread.  After a resolve the group may not reopen for
``cooldown_minutes``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import StrEnum

from pipeline.alerting.alert import IncidentRef
from pipeline.alerting.incident import IncidentEvent, IncidentNote
from pipeline.config.monitors import MonitorConfig

GroupKey = tuple[str, ...]  # the group's values, in the monitor's group_by order
UPDATE_SHARE = 0.5  # of the rate last sent: a smaller move is noise, not news


@dataclass(frozen=True, slots=True)
class Counts:
    """Distinct LLM calls with findings, and how many of them a detector flagged."""

    calls: int = 0
    flagged: int = 0

    @property
    def rate(self) -> float:
        """The share flagged (0 without calls)."""
        return self.flagged / self.calls if self.calls else 0.0


@dataclass(frozen=True, slots=True)
class GroupRates:
    """One group's counts: the window, the same hour on past days, and the whole baseline period."""

    key: GroupKey
    window: Counts
    same_hour: Counts
    period: Counts


class IncidentStatus(StrEnum):
    """Whether the incident is still open."""

    OPEN = "open"
    RESOLVED = "resolved"


@dataclass(frozen=True, slots=True)
class Incident:
    """One incident of one group, as last decided (and stored: ``version`` orders its rows)."""

    incident_id: str
    monitor: str
    route: str
    group_by: tuple[str, ...]
    key: GroupKey
    status: IncidentStatus
    opened_at: datetime
    updated_at: datetime
    resolved_at: datetime | None
    rate: float  # as last sent
    baseline_rate: float
    calls: int
    flagged: int
    slack_channel: str = ""
    slack_ts: str = ""
    delivered: bool = False  # every destination took the last event
    version: int = 1

    @property
    def group(self) -> dict[str, str]:
        """Field name -> value."""
        return dict(zip(self.group_by, self.key, strict=True))

    @property
    def ref(self) -> IncidentRef:
        """What an alert grouped into this incident carries."""
        return IncidentRef(self.incident_id, self.slack_channel, self.slack_ts)


# What a decision does to the group's incident is the event its destinations are sent.
Action = IncidentEvent


@dataclass(frozen=True, slots=True)
class Decision:
    """An action and the incident as it stands after it (not yet delivered)."""

    action: Action
    incident: Incident
    summary: str = ""  # the headline, where the monitor words its own

    def note(self, config: MonitorConfig, severity: int) -> IncidentNote:
        """What the route's destinations are sent."""
        incident = self.incident
        return IncidentNote(
            event=self.action,
            ref=incident.ref,
            monitor=incident.monitor,
            group=incident.group,
            rate=incident.rate,
            baseline_rate=incident.baseline_rate,
            calls=incident.calls,
            flagged=incident.flagged,
            window_minutes=config.window_minutes,
            severity=severity,
            opened_at=incident.opened_at,
            at=incident.updated_at,
            summary=self.summary,
        )


def baseline(rates: GroupRates, min_calls: int) -> tuple[str, Counts] | None:
    """The group's baseline counts and their source ("same hour" or "period"), or None when both are too thin."""
    for source, counts in (("same hour", rates.same_hour), ("period", rates.period)):
        if counts.calls >= min_calls:
            return source, counts
    return None


def baseline_rate(rates: GroupRates, min_calls: int) -> float | None:
    """The group's baseline rate, or None without enough calls for one."""
    found = baseline(rates, min_calls)
    return found[1].rate if found else None


def open_threshold(config: MonitorConfig, baseline: float) -> float:
    """The window rate at which an incident opens."""
    return max(config.min_ratio * baseline, baseline + config.min_increase)


def resolve_threshold(config: MonitorConfig, baseline: float) -> float:
    """The window rate below which an open incident resolves."""
    return baseline + config.recover_share * (open_threshold(config, baseline) - baseline)


def incident_id(monitor: str, key: GroupKey, opened_at: datetime) -> str:
    """A stable id (the PagerDuty dedup key): the monitor, a digest of the group, the opening time."""
    digest = hashlib.sha256(json.dumps(list(key)).encode()).hexdigest()[:12]
    return f"{monitor}:{digest}:{opened_at:%Y%m%dT%H%M%SZ}"


def decide(
    monitor: str, config: MonitorConfig, rates: GroupRates, latest: Incident | None, now: datetime
) -> Decision | None:
    """What to do about one group now, given its counts and its latest incident (None: nothing)."""
    baseline = baseline_rate(rates, config.min_calls)
    window = rates.window
    is_open = latest is not None and latest.status is IncidentStatus.OPEN
    if baseline is None or window.calls < config.min_calls:
        if latest is not None and is_open and not latest.delivered:  # held, but its last event is sent again
            return Decision(Action.UPDATE, replace(latest, updated_at=now, version=latest.version + 1))
        return None
    if latest is not None and is_open:
        return _while_open(config, latest, window, baseline, now)
    if window.rate < open_threshold(config, baseline):
        return None
    if (
        latest is not None
        and latest.resolved_at
        and now < latest.resolved_at + timedelta(minutes=config.cooldown_minutes)
    ):
        return None
    opened = Incident(
        incident_id=incident_id(monitor, rates.key, now),
        monitor=monitor,
        route=config.route,
        group_by=tuple(config.group_by),
        key=rates.key,
        status=IncidentStatus.OPEN,
        opened_at=now,
        updated_at=now,
        resolved_at=None,
        rate=window.rate,
        baseline_rate=baseline,
        calls=window.calls,
        flagged=window.flagged,
    )
    return Decision(Action.OPEN, opened)


def _while_open(
    config: MonitorConfig, incident: Incident, window: Counts, baseline: float, now: datetime
) -> Decision | None:
    measured = replace(
        incident,
        rate=window.rate,
        baseline_rate=baseline,
        calls=window.calls,
        flagged=window.flagged,
        updated_at=now,
        delivered=False,
        version=incident.version + 1,
    )
    if window.rate < resolve_threshold(config, baseline):
        return Decision(Action.RESOLVE, replace(measured, status=IncidentStatus.RESOLVED, resolved_at=now))
    if not incident.delivered:  # the last event did not reach every destination: send it again
        return Decision(Action.UPDATE, measured)
    moved = abs(window.rate - incident.rate)
    material = moved >= max(config.min_increase, UPDATE_SHARE * incident.rate)
    if material and now - incident.updated_at >= timedelta(minutes=config.window_minutes):
        return Decision(Action.UPDATE, measured)
    return None


def decide_all(
    monitor: str,
    config: MonitorConfig,
    rates: Iterable[GroupRates],
    latest: Mapping[GroupKey, Incident],
    now: datetime,
) -> list[Decision]:
    """Decisions for every group with counts, and for every open incident's group (which may have none)."""
    by_key = {r.key: r for r in rates}
    for key, incident in latest.items():
        if incident.status is IncidentStatus.OPEN and key not in by_key:
            by_key[key] = GroupRates(key, Counts(), Counts(), Counts())
    decisions = (decide(monitor, config, r, latest.get(key), now) for key, r in sorted(by_key.items()))
    return [d for d in decisions if d is not None]


def group_key(values: Mapping[str, str], group_by: Sequence[str]) -> GroupKey:
    """The key of the group that ``values`` (field name -> value) belongs to."""
    return tuple(values.get(name, "") for name in group_by)
