"""Per-trace alerts under an open incident join it instead of paging again.

The alert router asks :meth:`OpenIncidents.group` before it dispatches a batch.  An alert
whose service / model / operation / policy match an open incident's group goes to the
incident's route carrying the incident (:class:`~pipeline.alerting.alert.IncidentRef`):
PagerDuty gets it under the incident's dedup key, Slack in the incident's thread.  Open
incidents are read from ClickHouse at most every ``ttl_seconds``; when that read fails the
last list stands (an alert then pages on its own at worst) and one line is logged.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Collection, Sequence

from pipeline.alerting.alert import Alert
from pipeline.monitors.evaluate import Incident, group_key

logger = logging.getLogger(__name__)

CACHE_SECONDS = 5.0


def alert_group(alert: Alert, group_by: Sequence[str]) -> tuple[str, ...]:
    """The alert's values of the fields a monitor groups by."""
    values = {"service": alert.service, "model": alert.model, "operation": alert.operation, "policy": alert.policy}
    return group_key(values, group_by)


def grouped(alert: Alert, incidents: Sequence[Incident]) -> Alert:
    """The alert bound for the first open incident whose group it belongs to, or as it was."""
    for incident in incidents:
        if alert_group(alert, incident.group_by) == incident.key:
            return dataclasses.replace(alert, route=incident.route, incident=incident.ref)
    return alert


class OpenIncidents:
    """The configured monitors' open incidents, read through a short cache."""

    def __init__(
        self,
        read: Callable[[], Awaitable[list[Incident]]],
        monitors: Collection[str],
        ttl_seconds: float = CACHE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._read = read
        self._monitors = set(monitors)  # an incident left open by a monitor since removed groups nothing
        self._ttl_seconds = ttl_seconds
        self._clock = clock
        self._incidents: list[Incident] = []
        self._read_at: float | None = None

    async def group(self, alerts: Sequence[Alert]) -> list[Alert]:
        """The alerts, each bound for its group's open incident where there is one."""
        incidents = await self._current()
        return [grouped(alert, incidents) if alert.incident is None else alert for alert in alerts]

    async def _current(self) -> list[Incident]:
        now = self._clock()
        if self._read_at is None or now - self._read_at >= self._ttl_seconds:
            self._read_at = now  # a failed read, too, waits for the next turn
            try:
                incidents = await self._read()
            except Exception as exc:  # driver errors are many types; the last list stands
                logger.error("open incidents not read, alerts are grouped by the last list: %s", exc)
            else:
                self._incidents = [incident for incident in incidents if incident.monitor in self._monitors]
        return self._incidents
