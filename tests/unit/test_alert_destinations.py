"""Alert destinations against local fakes: real slack-sdk and aiohttp clients, scripted replies (docs/operations.md)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import aiohttp
import pytest
from pydantic import SecretStr

from pipeline.alerting.console import ConsoleDestination
from pipeline.alerting.destinations import DeliveryError, Destination, parse_retry_after
from pipeline.alerting.pagerduty import PagerDutyDestination
from pipeline.alerting.render import digest_blocks, pagerduty_event, slack_blocks, slack_text
from pipeline.alerting.routes import build_destinations
from pipeline.alerting.slack import SlackBotDestination, SlackWebhookDestination
from pipeline.config.alerting import AlertingSettings, RouteConfig
from tests.servers import PAGERDUTY_PATH, SLACK_POST_PATH, SLACK_WEBHOOK_PREFIX, AlertingServer, Reply, ScriptedServer
from tests.unit.test_alert_render import make_alert

ALERT = make_alert()
MakeDestination = Callable[[AlertingServer, AlertingSettings], Destination]
# Each destination, and where its requests land on the fake.
DESTINATIONS: dict[str, tuple[MakeDestination, str]] = {
    "slack-bot": (lambda server, config: SlackBotDestination("#alerts", config), SLACK_POST_PATH),
    "slack-webhook": (
        lambda server, config: SlackWebhookDestination("slack", server.webhook_url(), config),
        SLACK_WEBHOOK_PREFIX,
    ),
    "pagerduty": (lambda server, config: PagerDutyDestination(config), PAGERDUTY_PATH),
}


@pytest.fixture
def server() -> Iterator[AlertingServer]:
    with AlertingServer() as fake:
        yield fake


def settings(server: AlertingServer, **overrides: Any) -> AlertingSettings:
    fields: dict[str, Any] = {
        "slack_bot_token": SecretStr("xoxb-test"),
        "slack_base_url": server.slack_base_url,
        "pagerduty_routing_key": SecretStr("pd-routing-key"),
        "pagerduty_url": server.pagerduty_url,
        "request_timeout_seconds": 5.0,
    }
    return AlertingSettings(**(fields | overrides))


def deliver(destination: Destination, *, digest_of: list[Any] | None = None) -> None:
    """Send (or send a digest) inside one event loop, then close the destination."""

    async def run() -> None:
        try:
            if digest_of is None:
                await destination.send(ALERT)
            else:
                await destination.send_digest("slack", digest_of)
        finally:
            await destination.close()

    asyncio.run(run())


def failure_of(destination: Destination) -> DeliveryError:
    with pytest.raises(DeliveryError) as raised:
        deliver(destination)
    return raised.value


def test_bot_posts_channel_text_and_blocks(server: AlertingServer) -> None:
    config = settings(server)
    deliver(SlackBotDestination("#alerts", config))
    [post] = server.requests(SLACK_POST_PATH)
    assert post.headers["authorization"] == "Bearer xoxb-test"
    assert post.body["channel"] == "#alerts"
    assert post.body["text"] == slack_text(ALERT, config)
    assert post.body["blocks"] == slack_blocks(ALERT, config)
    assert post.body["unfurl_links"] is False


def test_webhook_posts_text_and_blocks(server: AlertingServer) -> None:
    config = settings(server)
    destination = SlackWebhookDestination("slack", server.webhook_url("T1/B1/secret"), config)
    assert destination.name == "slack-webhook:slack"  # the secret URL stays out of names and logs
    deliver(destination)
    [post] = server.requests()
    assert post.path == "/services/T1/B1/secret"
    assert (post.body["text"], post.body["blocks"]) == (slack_text(ALERT, config), slack_blocks(ALERT, config))


def test_pagerduty_triggers_with_the_alert_id_as_dedup_key(server: AlertingServer) -> None:
    config = settings(server)
    deliver(PagerDutyDestination(config))
    [event] = server.requests(PAGERDUTY_PATH)
    assert event.body == pagerduty_event(ALERT, config, "pd-routing-key")
    assert event.body["dedup_key"] == ALERT.alert_id


def test_slack_digest_is_one_message_and_pagerduty_digest_one_trigger_per_alert(server: AlertingServer) -> None:
    config = settings(server)
    alerts = [make_alert(trace_id=f"trace{i}") for i in range(3)]
    deliver(SlackBotDestination("#alerts", config), digest_of=alerts)
    deliver(PagerDutyDestination(config), digest_of=alerts)
    [post] = server.requests(SLACK_POST_PATH)
    assert post.body["blocks"] == digest_blocks("slack", alerts, config)
    assert [event.body["dedup_key"] for event in server.requests(PAGERDUTY_PATH)] == [a.alert_id for a in alerts]


RATE_LIMITED = {
    SLACK_POST_PATH: {"ok": False, "error": "ratelimited"},
    SLACK_WEBHOOK_PREFIX: "rate_limited",
    PAGERDUTY_PATH: {"status": "throttle event", "message": "Requests for this service are arriving too quickly"},
}


@pytest.mark.parametrize("kind", DESTINATIONS)
def test_429_waits_out_a_short_retry_after(server: AlertingServer, kind: str) -> None:
    make, path = DESTINATIONS[kind]
    server.script(path, Reply(429, {"Retry-After": "1"}, RATE_LIMITED[path]))
    deliver(make(server, settings(server)))
    first, second = server.requests(path)
    assert second.received_at - first.received_at >= 0.9


@pytest.mark.parametrize("kind", DESTINATIONS)
def test_429_with_a_long_retry_after_is_handed_back_at_once(server: AlertingServer, kind: str) -> None:
    make, path = DESTINATIONS[kind]
    server.script(path, Reply(429, {"Retry-After": "120"}, RATE_LIMITED[path]))
    started = time.monotonic()
    error = failure_of(make(server, settings(server)))
    assert time.monotonic() - started < 5  # not waited out here: the caller reschedules
    assert error.retryable and error.retry_after_seconds == 120
    assert len(server.requests(path)) == 1


def test_pagerduty_429_without_retry_after_backs_off(server: AlertingServer) -> None:
    server.script(PAGERDUTY_PATH, Reply(429, body=RATE_LIMITED[PAGERDUTY_PATH]))
    deliver(PagerDutyDestination(settings(server)))
    first, second = server.requests(PAGERDUTY_PATH)
    assert second.received_at - first.received_at >= 0.4


@pytest.mark.parametrize("kind", DESTINATIONS)
def test_a_5xx_is_retried(server: AlertingServer, kind: str) -> None:
    make, path = DESTINATIONS[kind]
    server.script(path, Reply(500, body="internal error"))
    deliver(make(server, settings(server)))
    assert len(server.requests(path)) == 2


@pytest.mark.parametrize("kind", DESTINATIONS)
def test_a_persistent_5xx_fails_retryable_after_the_quick_retries(server: AlertingServer, kind: str) -> None:
    make, path = DESTINATIONS[kind]
    config = settings(server, request_retries=1)
    server.set_down(503)
    error = failure_of(make(server, config))
    assert error.retryable and error.retry_after_seconds is None
    assert "503" in str(error)
    assert len(server.requests(path)) == config.request_retries + 1


REJECTED = {
    SLACK_POST_PATH: Reply(200, body={"ok": False, "error": "invalid_auth"}),
    SLACK_WEBHOOK_PREFIX: Reply(400, body="invalid_payload"),
    PAGERDUTY_PATH: Reply(400, body={"status": "invalid event", "message": "Event object is invalid"}),
}


@pytest.mark.parametrize("kind", DESTINATIONS)
def test_a_rejected_request_is_not_retried(server: AlertingServer, kind: str) -> None:
    make, path = DESTINATIONS[kind]
    server.script(path, REJECTED[path])
    error = failure_of(make(server, settings(server)))
    assert not error.retryable
    assert len(server.requests(path)) == 1


def test_slack_error_code_is_in_the_message(server: AlertingServer) -> None:
    server.script(SLACK_POST_PATH, Reply(200, body={"ok": False, "error": "channel_not_found"}))
    error = failure_of(SlackBotDestination("#gone", settings(server)))
    assert str(error) == "slack:#gone: HTTP 200: channel_not_found"


@pytest.mark.parametrize("kind", DESTINATIONS)
def test_connection_refused_is_retryable(kind: str) -> None:
    with AlertingServer() as gone:
        config = settings(gone, request_retries=0)
    make, _ = DESTINATIONS[kind]
    error = failure_of(make(gone, config))
    assert error.retryable
    assert "Connect" in str(error)


@pytest.mark.parametrize("kind", DESTINATIONS)
def test_a_timeout_is_retryable(server: AlertingServer, kind: str) -> None:
    make, path = DESTINATIONS[kind]
    server.script(path, Reply(200, body="late", delay=0.5))
    error = failure_of(make(server, settings(server, request_timeout_seconds=0.1, request_retries=0)))
    assert error.retryable
    assert "Timeout" in str(error)


def test_without_credentials_every_route_logs(caplog: pytest.LogCaptureFixture) -> None:
    table = build_destinations(AlertingSettings())
    assert set(table) == {"page", "slack", "log"}
    [console] = {id(d): d for destinations in table.values() for d in destinations}.values()
    assert isinstance(console, ConsoleDestination)
    with caplog.at_level(logging.WARNING, logger="halluwatch.alerts"):
        deliver(console)
    assert ALERT.headline in caplog.text
    assert ALERT.trace_id in caplog.text


def test_routes_share_destinations_of_the_same_identity(server: AlertingServer) -> None:
    config = settings(
        server,
        routes={
            "page": RouteConfig(pagerduty=True, slack_channel="#alerts"),
            "slack": RouteConfig(slack_channel="#alerts"),
            "team": RouteConfig(slack_webhook_url=SecretStr(server.webhook_url())),
            "log": RouteConfig(),
        },
    )
    table = build_destinations(config)
    assert {route: [d.name for d in ds] for route, ds in table.items()} == {
        "page": ["slack:#alerts", "pagerduty"],
        "slack": ["slack:#alerts"],
        "team": ["slack-webhook:team"],
        "log": ["console"],
    }
    assert table["page"][0] is table["slack"][0]


def test_parse_retry_after() -> None:
    soon = format_datetime(datetime.now(UTC) + timedelta(seconds=90), usegmt=True)
    assert parse_retry_after("1") == 1.0
    assert parse_retry_after("-3") == 0.0
    assert 80 < (parse_retry_after(soon) or 0) <= 90
    assert parse_retry_after("soon") is None
    assert parse_retry_after("nan") is None
    assert parse_retry_after(None) is None


def test_scripted_server_outage_and_scripts() -> None:
    """The fake itself: scripts are used in order, then the default; an outage answers 503 to everything."""

    async def post(url: str) -> int:
        async with aiohttp.ClientSession() as session, session.post(url, json={"n": 1}) as response:
            return response.status

    with ScriptedServer() as fake:
        fake.script("/a", Reply(201), Reply(202))
        fake.set_down()
        assert asyncio.run(post(fake.url + "/a")) == 503
        fake.set_up()
        assert [asyncio.run(post(fake.url + path)) for path in ("/a/x", "/a", "/a", "/b")] == [201, 202, 404, 404]
        assert fake.wait_for(5)[1].body == {"n": 1}
