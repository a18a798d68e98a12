"""The ``false_alarms`` monitor's decisions: an incident per application and route whose false alarms break its target.

The review verdicts measure each route's false alarms on an application's calls
(:mod:`pipeline.rate.false_alarms`).  An incident opens when the 95 % interval lies wholly
above the route's target (the verdicts show the promise broken, not noise), updates when the
estimate moves by half, and resolves once the estimate is back under the target: after a new
map is applied (``halluwatch calibrate --app``), its calls are judged and the estimate falls.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta

from pipeline.config.monitors import MonitorConfig
from pipeline.monitors.evaluate import (
    UPDATE_SHARE,
    Action,
    Decision,
    GroupKey,
    Incident,
    IncidentStatus,
    incident_id,
)
from pipeline.rate.false_alarms import RouteFalseAlarms

GROUP_BY = ("policy", "route")  # an application and one of its routes


def summary(app: str, measured: RouteFalseAlarms) -> str:
    """``recalibrate hr: page 2.4 % false alarms, 95 % CI 1.3-4.1 %, target 1 %; precision 0.62``."""
    return f"recalibrate {app}: {measured.words()}"


def decide_false_alarms(
    monitor: str,
    config: MonitorConfig,
    measured: Mapping[GroupKey, RouteFalseAlarms],
    latest: Mapping[GroupKey, Incident],
    now: datetime,
) -> list[Decision]:
    """What to do about each (application, route) now, given its verdicts' estimate and its latest incident."""
    decisions = []
    for key, route in sorted(measured.items()):
        decision = _decide(monitor, config, key, route, latest.get(key), now)
        if decision is not None:
            decisions.append(decision)
    return decisions


def _decide(
    monitor: str, config: MonitorConfig, key: GroupKey, route: RouteFalseAlarms, latest: Incident | None, now: datetime
) -> Decision | None:
    value = route.false_alarms.value
    if route.target is None:  # a route no longer configured promises nothing to hold it to
        return None
    words = summary(key[0], route)
    if latest is not None and latest.status is IncidentStatus.OPEN:
        if value is None:  # the verdicts left the window: nothing tells it got better
            return Decision(Action.UPDATE, _bump(latest, now), words) if not latest.delivered else None
        measured = replace(_bump(latest, now), rate=value, calls=route.false_alarms.verdicts)
        if value <= route.target:
            return Decision(Action.RESOLVE, replace(measured, status=IncidentStatus.RESOLVED, resolved_at=now), words)
        moved = abs(value - latest.rate) >= UPDATE_SHARE * latest.rate
        if not latest.delivered or moved:
            return Decision(Action.UPDATE, measured, words)
        return None
    if not route.over_target or value is None:
        return None
    cooldown = timedelta(minutes=config.cooldown_minutes)
    if latest is not None and latest.resolved_at and now < latest.resolved_at + cooldown:
        return None
    opened = Incident(
        incident_id=incident_id(monitor, key, now), monitor=monitor, route=config.route, group_by=GROUP_BY, key=key,
        status=IncidentStatus.OPEN, opened_at=now, updated_at=now, resolved_at=None, rate=value,
        baseline_rate=route.target, calls=route.false_alarms.verdicts, flagged=0,
    )  # fmt: skip
    return Decision(Action.OPEN, opened, words)


def _bump(incident: Incident, now: datetime) -> Incident:
    return replace(incident, updated_at=now, delivered=False, version=incident.version + 1)


def by_key(measured: Sequence[tuple[str, RouteFalseAlarms]]) -> dict[GroupKey, RouteFalseAlarms]:
    """``(application, estimate)`` pairs keyed as the monitor's incidents are."""
    return {(app, route.route): route for app, route in measured}
