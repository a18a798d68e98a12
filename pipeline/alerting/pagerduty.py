"""PagerDuty Events API v2: one ``trigger`` per alert, deduplicated by the alert id (or its incident's).

A rate-monitor incident is a ``trigger`` when it opens or changes and a ``resolve`` when
it ends, all with the incident id as the dedup key.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pipeline.alerting.alert import Alert
from pipeline.alerting.destinations import DestinationType, HttpDestination, HttpReply
from pipeline.alerting.incident import IncidentNote
from pipeline.alerting.render import pagerduty_event, pagerduty_incident_event
from pipeline.config.alerting import AlertingSettings


class PagerDutyDestination(HttpDestination):
    """Posts trigger events to ``config.pagerduty_url`` with one PagerDuty service's integration key.

    Routes without a key of their own share the global ``pagerduty_routing_key`` and one
    destination named ``pagerduty``; a route with its own is ``pagerduty:<route>``.
    """

    def __init__(self, config: AlertingSettings, route: str = "") -> None:
        key = config.routing_key_of(route) if route else config.pagerduty_routing_key
        if key is None:
            raise ValueError("PagerDutyDestination needs alerting.pagerduty_routing_key or the route's own")
        own = bool(route) and _has_own_key(config, route)
        super().__init__(f"pagerduty:{route}" if own else "pagerduty", config)
        self._routing_key = key.get_secret_value()

    async def send(self, alert: Alert) -> None:
        """Trigger (or, with the same dedup key, update) the alert's incident."""
        await self._post(pagerduty_event(alert, self._config, self._routing_key))

    async def send_digest(self, route: str, alerts: Sequence[Alert]) -> None:
        """One trigger per alert even here: each alert is its own incident, and dedup keys make resending safe."""
        for alert in alerts:
            await self.send(alert)

    async def send_incident(self, note: IncidentNote) -> str:
        """Trigger, update or resolve the monitor incident's PagerDuty incident."""
        await self._post(pagerduty_incident_event(note, self._config, self._routing_key))
        return ""

    async def _post(self, event: dict[str, Any]) -> None:
        async def attempt() -> HttpReply:
            async with self._session().post(self._config.pagerduty_url, json=event) as response:
                return HttpReply.of(response.status, response.headers, await response.text())

        await self._deliver(attempt)


def _has_own_key(config: AlertingSettings, route: str) -> bool:
    return config.routes[route].pagerduty_routing_key is not None


PAGERDUTY = DestinationType(
    fields=("pagerduty", "pagerduty_routing_key"),
    wanted=lambda route: route.pagerduty,
    lacks=lambda config, route: (
        "" if config.routing_key_of(route) is not None else "HALLUWATCH_ALERTING__PAGERDUTY_ROUTING_KEY"
    ),
    build=lambda config, route: PagerDutyDestination(config, route),
    describe=lambda config, route: "pagerduty (own service)" if _has_own_key(config, route) else "pagerduty",
)
