"""PagerDuty Events API v2: one ``trigger`` per alert, deduplicated by the alert id."""

from __future__ import annotations

from collections.abc import Sequence

from pipeline.alerting.alert import Alert
from pipeline.alerting.destinations import HttpDestination, HttpReply
from pipeline.alerting.render import pagerduty_event
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
        own = bool(route) and config.routes[route].pagerduty_routing_key is not None
        super().__init__(f"pagerduty:{route}" if own else "pagerduty", config)
        self._routing_key = key.get_secret_value()

    async def send(self, alert: Alert) -> None:
        """Trigger (or, with the same dedup key, update) the alert's incident."""
        event = pagerduty_event(alert, self._config, self._routing_key)

        async def attempt() -> HttpReply:
            async with self._session().post(self._config.pagerduty_url, json=event) as response:
                return HttpReply.of(response.status, response.headers, await response.text())

        await self._deliver(attempt)

    async def send_digest(self, route: str, alerts: Sequence[Alert]) -> None:
        """One trigger per alert even here: each alert is its own incident, and dedup keys make resending safe."""
        for alert in alerts:
            await self.send(alert)
