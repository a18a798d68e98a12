"""The route table: which destinations each alert route delivers to, built from settings."""

from __future__ import annotations

import logging

from pipeline.alerting.console import ConsoleDestination
from pipeline.alerting.destinations import Destination
from pipeline.alerting.pagerduty import PagerDutyDestination
from pipeline.alerting.slack import SlackBotDestination, SlackWebhookDestination
from pipeline.config.alerting import AlertingSettings

logger = logging.getLogger(__name__)


def build_destinations(config: AlertingSettings) -> dict[str, list[Destination]]:
    """Each route's destinations; a route with none usable logs its alerts instead.

    Destinations of the same identity (one Slack channel on two routes) are shared.
    """
    shared: dict[str, Destination] = {}
    table: dict[str, list[Destination]] = {}
    for route_name, route in config.routes.items():
        wanted: list[Destination] = []
        if route.slack_channel and config.slack_bot_token is not None:
            wanted.append(SlackBotDestination(route.slack_channel, config))
        if route.slack_webhook_url is not None:
            wanted.append(SlackWebhookDestination(route_name, route.slack_webhook_url.get_secret_value(), config))
        if route.pagerduty and config.routing_key_of(route_name) is not None:
            wanted.append(PagerDutyDestination(config, route_name))
        if not wanted:
            if route.slack_channel or route.pagerduty:
                logger.warning(
                    "alert route %r has no Slack token or PagerDuty key: its alerts go to the log", route_name
                )
            wanted.append(ConsoleDestination(config))
        table[route_name] = [shared.setdefault(destination.name, destination) for destination in wanted]
    return table
