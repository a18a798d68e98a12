"""One evaluation of one monitor: read rates and incidents, decide, notify the route, record.

Delivery before record: an incident is written after its event went out, with the Slack
thread the first post started.  A destination that failed (after its own quick retries)
is tried again at the next evaluation: an open or update event is recorded as not
delivered and sent again (PagerDuty deduplicates by the incident id; Slack may show a
repeat), a resolve is not recorded at all, so the incident stays open and resolves again.
A ClickHouse query that fails logs one line and waits for the next evaluation.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Protocol, TypeVar

from pipeline import metrics
from pipeline.alerting.destinations import Destination
from pipeline.config.alerting import AlertingSettings
from pipeline.config.monitors import MonitorConfig
from pipeline.monitors.evaluate import Action, Decision, Incident, decide_all
from pipeline.monitors.false_alarms import by_key, decide_false_alarms
from pipeline.monitors.store import IncidentStore
from pipeline.rate.false_alarms import RouteFalseAlarms

logger = logging.getLogger(__name__)

T = TypeVar("T")


class Blocking(Protocol):
    """Runs a blocking ClickHouse call off the event loop (the worker: in its sink thread)."""

    def __call__(self, call: Callable[[], T], /) -> Awaitable[T]:
        """The call's result, once it ran."""
        ...


# Makes incidents durable (the worker: its ClickHouse sink, retried until written).
SaveIncidents = Callable[[Sequence[Incident]], Awaitable[None]]
# Each application's routes' false alarms from its review verdicts, for ``false_alarms`` monitors (blocking).
FalseAlarmSource = Callable[[datetime], Sequence[tuple[str, RouteFalseAlarms]]]


async def run_inline(call: Callable[[], T]) -> T:
    """A :data:`Blocking` that just calls: for a command or a test that has no event loop to keep free."""
    return call()


class MonitorRunner:
    """Evaluates the configured monitors against one incident store."""

    def __init__(
        self,
        monitors: Mapping[str, MonitorConfig],
        alerting: AlertingSettings,
        store: IncidentStore,
        destinations: Callable[[str], Sequence[Destination]],
        save: SaveIncidents,
        blocking: Blocking = run_inline,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        false_alarms: FalseAlarmSource = lambda _now: (),
    ) -> None:
        self._monitors = dict(monitors)
        self._alerting = alerting
        self._store = store
        self._destinations = destinations
        self._save = save
        self._blocking = blocking
        self._clock = clock
        self._false_alarms = false_alarms

    async def evaluate(self, name: str) -> list[Decision]:
        """Evaluate monitor ``name`` now; returns the decisions acted on (none when ClickHouse failed)."""
        config = self._monitors[name]
        now = self._clock()
        try:
            if config.kind == "false_alarms":
                measured = await self._blocking(lambda: by_key(self._false_alarms(now)))
            else:
                rates = await self._blocking(lambda: self._store.rates(config, now))
            latest = await self._blocking(lambda: self._store.latest(name))
        except Exception as exc:  # driver errors are many types; all mean "try next time"
            metrics.MONITOR_EVALUATIONS.labels(name, "error").inc()
            logger.error("monitor %s: ClickHouse query failed, next try in %gs: %s", name, config.interval_seconds, exc)
            return []
        metrics.MONITOR_EVALUATIONS.labels(name, "ok").inc()
        if config.kind == "false_alarms":
            decisions = decide_false_alarms(name, config, measured, latest, now)
        else:
            decisions = decide_all(name, config, rates, latest, now)
        recorded = []
        for decision in decisions:
            incident = await self._deliver(decision, config)
            if incident is not None:
                recorded.append(incident)
            metrics.MONITOR_INCIDENT_EVENTS.labels(name, str(decision.action)).inc()
        await self._save(recorded)
        return decisions

    async def _deliver(self, decision: Decision, config: MonitorConfig) -> Incident | None:
        """Send the decision's event to the route; the incident to record (None: record nothing)."""
        incident = decision.incident
        if decision.action is Action.OPEN:  # the thread, if the route's Slack bot starts one, is in this channel
            incident = dataclasses.replace(incident, slack_channel=self._alerting.routes[config.route].slack_channel)
        note = dataclasses.replace(decision, incident=incident).note(config, config.severity)
        delivered, thread = True, incident.slack_ts
        for destination in self._destinations(config.route):
            try:
                thread = await destination.send_incident(note) or thread
            except Exception as exc:  # a failed destination is tried again next evaluation, never a crash
                delivered = False
                logger.error("monitor %s: incident %s %s to %s failed: %s", incident.monitor, incident.incident_id,
                             decision.action, destination.name, exc)  # fmt: skip
        if decision.action is Action.RESOLVE and not delivered:
            return None
        return dataclasses.replace(incident, slack_ts=thread, delivered=delivered)
