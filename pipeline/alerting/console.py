"""The fallback destination: alerts written to the worker's log, for routes without credentials."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from pipeline.alerting.alert import Alert, DeliveryStatus
from pipeline.alerting.destinations import Destination
from pipeline.alerting.incident import IncidentNote
from pipeline.alerting.render import console_text, digest_text, incident_console_text
from pipeline.config.alerting import AlertingSettings

logger = logging.getLogger("halluwatch.alerts")


class ConsoleDestination(Destination):
    """Logs alerts at WARNING on ``halluwatch.alerts``; never fails."""

    name = "console"
    rate_limited = False

    def __init__(self, config: AlertingSettings) -> None:
        self._config = config

    async def send(self, alert: Alert) -> None:
        """Log the alert."""
        logger.warning("%s", console_text(alert, self._config), extra={"trace_id": alert.trace_id})

    async def send_digest(self, route: str, alerts: Sequence[Alert]) -> None:
        """Log one summary of the alerts."""
        logger.warning("%s", digest_text(route, alerts))

    async def send_incident(self, note: IncidentNote) -> str:
        """Log the incident event in one line."""
        logger.warning("%s", incident_console_text(note))
        return ""


def delivery_words(status: str, destination: str) -> str:
    """A delivery status as people read it: an alert "delivered" to the worker's log was logged, not sent."""
    return "logged" if destination == ConsoleDestination.name and status == DeliveryStatus.DELIVERED else status
