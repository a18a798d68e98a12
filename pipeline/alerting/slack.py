"""Slack destinations: a bot token (``chat.postMessage``) or an incoming webhook, Block Kit either way.

slack-sdk's own retry handlers are switched off (``retry_handlers=[]``) so that
``deliver_with_retries`` is the only retry loop, and its clients share the destination's
aiohttp session (whose timeout applies).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.webhook.async_client import AsyncWebhookClient

from pipeline.alerting.alert import Alert
from pipeline.alerting.destinations import HttpDestination, HttpReply
from pipeline.alerting.render import digest_blocks, digest_text, escape_mrkdwn, slack_blocks, slack_text
from pipeline.config.alerting import AlertingSettings


class _SlackDestination(HttpDestination):
    """Renders alerts and digests as Block Kit; subclasses only post."""

    async def send(self, alert: Alert) -> None:
        """Post one alert."""
        await self._post(slack_text(alert, self._config), slack_blocks(alert, self._config))

    async def send_digest(self, route: str, alerts: Sequence[Alert]) -> None:
        """Post one message listing the alerts."""
        await self._post(escape_mrkdwn(digest_text(route, alerts)), digest_blocks(route, alerts, self._config))

    async def _post(self, text: str, blocks: list[dict[str, Any]]) -> None:
        await self._deliver(lambda: self._request(text, blocks))

    @abstractmethod
    async def _request(self, text: str, blocks: list[dict[str, Any]]) -> HttpReply:
        """Post once and report what came back (connection errors propagate)."""


class SlackBotDestination(_SlackDestination):
    """Posts to a channel with the bot token (``config.slack_bot_token``) via ``chat.postMessage``."""

    def __init__(self, channel: str, config: AlertingSettings) -> None:
        if config.slack_bot_token is None:
            raise ValueError("SlackBotDestination needs alerting.slack_bot_token")
        super().__init__(f"slack:{channel}", config)
        self._channel = channel
        self._token = config.slack_bot_token.get_secret_value()

    async def _request(self, text: str, blocks: list[dict[str, Any]]) -> HttpReply:
        client = AsyncWebClient(
            token=self._token, base_url=self._config.slack_base_url, session=self._session(), retry_handlers=[]
        )
        try:
            await client.chat_postMessage(channel=self._channel, text=text, blocks=blocks, unfurl_links=False)
        except SlackApiError as error:
            return _reply_to(error)
        return HttpReply(status=200, ok=True)


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

    async def _request(self, text: str, blocks: list[dict[str, Any]]) -> HttpReply:
        client = AsyncWebhookClient(url=self._url, session=self._session(), retry_handlers=[])
        response = await client.send_dict({"text": text, "blocks": blocks, "unfurl_links": False})
        return HttpReply.of(response.status_code, response.headers, response.body)
