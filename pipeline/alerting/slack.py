"""Slack destinations: a bot token (``chat.postMessage``) or an incoming webhook, Block Kit either way.

slack-sdk's own retry handlers are switched off (``retry_handlers=[]``) so that
``deliver_with_retries`` is the only retry loop, and its clients share the destination's
aiohttp session (whose timeout applies).  The bot posts a rate-monitor incident's follow-ups,
and the alerts grouped into it, in the thread of the incident's first message; a webhook
cannot thread, and posts them as plain messages.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.webhook.async_client import AsyncWebhookClient

from pipeline.alerting.alert import Alert, IncidentRef
from pipeline.alerting.destinations import DestinationType, HttpDestination, HttpReply
from pipeline.alerting.incident import IncidentNote
from pipeline.alerting.render import (
    digest_blocks,
    digest_text,
    escape_mrkdwn,
    incident_blocks,
    incident_text,
    slack_blocks,
    slack_text,
)
from pipeline.config.alerting import AlertingSettings


class _SlackDestination(HttpDestination):
    """Renders alerts and digests as Block Kit; subclasses only post."""

    async def send(self, alert: Alert) -> None:
        """Post one alert (in its incident's thread when it is grouped into one)."""
        await self._post(slack_text(alert, self._config), slack_blocks(alert, self._config), alert.incident)

    async def send_digest(self, route: str, alerts: Sequence[Alert]) -> None:
        """Post one message listing the alerts (in their incident's thread when they share one)."""
        incidents = {alert.incident for alert in alerts}
        incident = next(iter(incidents)) if len(incidents) == 1 else None
        text, blocks = escape_mrkdwn(digest_text(route, alerts)), digest_blocks(route, alerts, self._config)
        await self._post(text, blocks, incident)

    async def send_incident(self, note: IncidentNote) -> str:
        """Post the incident's event: the first one on its own, the rest in its thread where possible."""
        return await self._post(incident_text(note), incident_blocks(note, self._config), note.ref)

    async def _post(self, text: str, blocks: list[dict[str, Any]], incident: IncidentRef | None) -> str:
        """Post; returns the new message's ts when it started a thread ("" for a reply or a webhook)."""
        thread_ts = self._thread(incident)
        reply = await self._deliver(lambda: self._request(text, blocks, thread_ts))
        return "" if thread_ts else reply.message_id

    def _thread(self, incident: IncidentRef | None) -> str:
        """The ts of the incident thread this destination posts into, or "" to post on its own."""
        return ""

    @abstractmethod
    async def _request(self, text: str, blocks: list[dict[str, Any]], thread_ts: str) -> HttpReply:
        """Post once (as a reply in ``thread_ts`` unless it is "") and report what came back."""


class SlackBotDestination(_SlackDestination):
    """Posts to a channel with the bot token (``config.slack_bot_token``) via ``chat.postMessage``."""

    def __init__(self, channel: str, config: AlertingSettings) -> None:
        if config.slack_bot_token is None:
            raise ValueError("SlackBotDestination needs alerting.slack_bot_token")
        super().__init__(f"slack:{channel}", config)
        self._channel = channel
        self._token = config.slack_bot_token.get_secret_value()

    def _thread(self, incident: IncidentRef | None) -> str:
        if incident is None or incident.slack_channel != self._channel:
            return ""  # a thread of another channel cannot hold this post
        return incident.slack_ts

    async def _request(self, text: str, blocks: list[dict[str, Any]], thread_ts: str) -> HttpReply:
        client = AsyncWebClient(
            token=self._token, base_url=self._config.slack_base_url, session=self._session(), retry_handlers=[]
        )
        try:
            response = await client.chat_postMessage(
                channel=self._channel, text=text, blocks=blocks, unfurl_links=False, thread_ts=thread_ts or None
            )
        except SlackApiError as error:
            return _reply_to(error)
        return HttpReply(status=200, ok=True, message_id=str(response.get("ts") or ""))


def _reply_to(error: SlackApiError) -> HttpReply:
    """The reply behind a Slack API error: 429 / 5xx, or ``ok: false`` with an error code (not retryable)."""
    response = error.response
    # Usually an AsyncSlackResponse; a raw aiohttp response when the body was not JSON.
    status = getattr(response, "status_code", None) or getattr(response, "status", None)
    data = getattr(response, "data", None)
    detail = str(data.get("error", "")) if isinstance(data, dict) else ""
    headers = getattr(response, "headers", None) or {}
    return HttpReply.of(status if isinstance(status, int) else 0, headers, detail, ok=False)


class SlackWebhookDestination(_SlackDestination):
    """Posts to one route's Slack incoming webhook (the URL is a secret: the name shows the route only)."""

    def __init__(self, route: str, url: str, config: AlertingSettings) -> None:
        super().__init__(f"slack-webhook:{route}", config)
        self._url = url

    async def _request(self, text: str, blocks: list[dict[str, Any]], thread_ts: str) -> HttpReply:
        client = AsyncWebhookClient(url=self._url, session=self._session(), retry_handlers=[])
        response = await client.send_dict({"text": text, "blocks": blocks, "unfurl_links": False})
        return HttpReply.of(response.status_code, response.headers, response.body)


def _webhook_of(config: AlertingSettings, route: str) -> SlackWebhookDestination:
    url = config.routes[route].slack_webhook_url
    if url is None:
        raise ValueError(f"route {route!r} has no slack_webhook_url")
    return SlackWebhookDestination(route, url.get_secret_value(), config)


SLACK_BOT = DestinationType(
    fields=("slack_channel",),
    wanted=lambda route: bool(route.slack_channel),
    lacks=lambda config, route: "" if config.slack_bot_token is not None else "HALLUWATCH_ALERTING__SLACK_BOT_TOKEN",
    build=lambda config, route: SlackBotDestination(config.routes[route].slack_channel, config),
    describe=lambda config, route: f"slack {config.routes[route].slack_channel}",
)

SLACK_WEBHOOK = DestinationType(
    fields=("slack_webhook_url",),
    wanted=lambda route: route.slack_webhook_url is not None,
    lacks=lambda config, route: "",  # the URL is its credential
    build=_webhook_of,
    describe=lambda config, route: "slack webhook",
)
