"""The table of destination types, and what it says about each route: its destinations and its words.

Routes, ``halluwatch doctor`` and ``policy explain`` all read :data:`DESTINATION_TYPES`; a new
kind of destination is its module (a ``Destination`` and its ``DestinationType``) and one line
here.
"""

from __future__ import annotations

import logging

from pipeline.alerting.console import ConsoleDestination
from pipeline.alerting.destinations import Destination, DestinationType
from pipeline.alerting.pagerduty import PAGERDUTY
from pipeline.alerting.slack import SLACK_BOT, SLACK_WEBHOOK
from pipeline.config.alerting import AlertingSettings

logger = logging.getLogger(__name__)

# In the order a route's destinations are tried and described.
DESTINATION_TYPES: tuple[DestinationType, ...] = (SLACK_BOT, SLACK_WEBHOOK, PAGERDUTY)

LOG = "the worker's log"


def wanted_types(config: AlertingSettings, route: str) -> list[DestinationType]:
    """The destination types ``route`` asks for, usable or not."""
    return [kind for kind in DESTINATION_TYPES if kind.wanted(config.routes[route])]


def usable_types(config: AlertingSettings, route: str) -> list[DestinationType]:
    """The destination types ``route`` asks for and has the credentials of."""
    return [kind for kind in wanted_types(config, route) if not kind.lacks(config, route)]


def describe_route(config: AlertingSettings, route: str) -> str:
    """Where a route asks to deliver, in words (``slack #ch, pagerduty (own service)``)."""
    return ", ".join(kind.describe(config, route) for kind in wanted_types(config, route)) or LOG


def build_destinations(config: AlertingSettings) -> dict[str, list[Destination]]:
    """Each route's destinations; a route with none usable logs its alerts instead.

    Destinations of the same identity (one Slack channel on two routes) are shared.
    """
    shared: dict[str, Destination] = {}
    table: dict[str, list[Destination]] = {}
    for route_name in config.routes:
        wanted: list[Destination] = [kind.build(config, route_name) for kind in usable_types(config, route_name)]
        if not wanted:
            if wanted_types(config, route_name):
                logger.warning(
                    "alert route %r has no Slack token or PagerDuty key: its alerts go to the log", route_name
                )
            wanted.append(ConsoleDestination(config))
        table[route_name] = [shared.setdefault(destination.name, destination) for destination in wanted]
    return table
