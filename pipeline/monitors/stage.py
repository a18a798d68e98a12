"""The rate monitors in the worker: one leader-only timer per monitor, and the router's grouping.

Only the group leader evaluates (``on_leader``), so a fleet of workers opens each incident
once.  The incident state lives in ClickHouse, not in the worker: a new leader after a
rebalance or a restart carries on with the same incidents.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import faust

from pipeline.alerting.destinations import Destination
from pipeline.config.alerting import AlertingSettings
from pipeline.config.monitors import MonitorConfig
from pipeline.monitors.evaluate import Incident
from pipeline.monitors.grouping import OpenIncidents
from pipeline.monitors.runner import Blocking, FalseAlarmSource, MonitorRunner
from pipeline.monitors.store import IncidentStore, incident_row
from pipeline.stream.plumbing import RowStore


class MonitorStage:
    """Registers the monitors' timers on ``app``; ``open_incidents.group`` is the alert router's grouping."""

    def __init__(
        self,
        app: faust.App,
        monitors: Mapping[str, MonitorConfig],
        alerting: AlertingSettings,
        store: IncidentStore,
        blocking: Blocking,
        rows: RowStore,
        destinations: Callable[[str], Sequence[Destination]],
        false_alarms: FalseAlarmSource = lambda _now: (),
    ) -> None:
        async def save(incidents: Sequence[Incident]) -> None:
            await rows({"incidents": [incident_row(incident) for incident in incidents]})

        async def read_open() -> list[Incident]:
            return await blocking(store.open_incidents)

        self.open_incidents = OpenIncidents(read_open, monitors)
        self.runner = MonitorRunner(monitors, alerting, store, destinations, save, blocking, false_alarms=false_alarms)
        for name, config in monitors.items():
            app.timer(config.interval_seconds, on_leader=True, name=f"halluwatch.monitor.{name}")(self._timer(name))

    def _timer(self, name: str) -> Callable[[], object]:
        async def evaluate() -> None:
            await self.runner.evaluate(name)

        return evaluate
