"""The delivery policy: rate limits with digests, retry outcomes, dead letters, replays."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import replace

import pytest

from pipeline.alerting.alert import Alert, DeliveryStatus
from pipeline.alerting.destinations import Destination
from pipeline.alerting.dispatch import Dispatcher, Outcome
from pipeline.alerting.routes import build_destinations
from pipeline.config.alerting import AlertingSettings
from tests.servers import PAGERDUTY_PATH, SLACK_POST_PATH, AlertingServer, Reply
from tests.unit.test_alert_render import make_alert


class FakeClock:
    """Time that passes only when the dispatcher sleeps."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


@pytest.fixture
def server() -> Iterator[AlertingServer]:
    with AlertingServer() as fake:
        yield fake


def config(server: AlertingServer, **overrides) -> AlertingSettings:
    values = {
        "slack_bot_token": "xoxb-test",
        "slack_base_url": server.slack_base_url,
        "pagerduty_routing_key": "pd-key",
        "pagerduty_url": server.pagerduty_url,
        "request_retries": 0,
        "retry_initial_seconds": 5,
        "delivery_attempts": 3,
        **overrides,
    }
    return AlertingSettings.model_validate(values)


def limited(per_minute: int) -> dict:
    return {"slack": {"slack_channel": "#c", "max_per_minute": per_minute}, "page": {}, "log": {}}


def alerts(count: int, route: str = "slack") -> list[Alert]:
    return [replace(make_alert(trace_id=f"{i:032x}"), route=route, rule="two-detectors") for i in range(count)]


def dispatch(dispatcher: Dispatcher, route: str, batch: list[Alert], done=lambda alert, destination: False):
    async def run() -> list[Outcome]:
        try:
            return await dispatcher.dispatch(route, batch, done)
        finally:
            await dispatcher.close()

    return asyncio.run(run())


async def redelivered(dispatcher: Dispatcher, route: str, name: str, retries: list[tuple[Alert, int]]) -> list[Outcome]:
    destination = dispatcher.destination(name)
    assert destination is not None
    try:
        return await dispatcher.redeliver(route, destination, retries)
    finally:
        await dispatcher.close()


def make(settings: AlertingSettings, clock: FakeClock | None = None) -> Dispatcher:
    clock = clock or FakeClock()
    return Dispatcher(settings, build_destinations(settings), clock=clock, sleep=clock.sleep)


def statuses(outcomes: list[Outcome]) -> list[tuple[str, str, DeliveryStatus]]:
    return [(o.alert.trace_id[-1], o.destination.name, o.status) for o in outcomes]


def test_within_the_limit_every_alert_is_its_own_message(server):
    outcomes = dispatch(make(config(server)), "slack", alerts(3))
    assert [o.status for o in outcomes] == [DeliveryStatus.DELIVERED] * 3
    assert len(server.requests(SLACK_POST_PATH)) == 3


def test_over_the_limit_the_overflow_is_one_digest_never_dropped(server):
    settings = config(server, routes=limited(2))
    outcomes = dispatch(make(settings), "slack", alerts(5))
    assert statuses(outcomes) == [
        ("0", "slack:#c", DeliveryStatus.DELIVERED),
        *[(str(i), "slack:#c", DeliveryStatus.DIGESTED) for i in range(1, 5)],
    ]
    posts = server.requests(SLACK_POST_PATH)
    assert len(posts) == 2  # the limit: one alert, one digest of the other four
    assert "4 halluwatch alerts on route slack" in json.dumps(posts[1].body)


def test_with_the_limit_spent_the_digest_waits_for_the_next_slot(server):
    settings = config(server, routes=limited(1))
    clock = FakeClock()
    dispatcher = make(settings, clock)
    dispatch(dispatcher, "slack", alerts(1))
    outcomes = dispatch(dispatcher, "slack", alerts(3)[1:])
    assert [o.status for o in outcomes] == [DeliveryStatus.DIGESTED] * 2
    assert clock.slept == [60.0]  # waited for the one slot of the minute, then sent
    assert len(server.requests(SLACK_POST_PATH)) == 2


def test_a_page_goes_to_every_destination_of_its_route(server):
    outcomes = dispatch(make(config(server)), "page", alerts(1, route="page"))
    assert {o.destination.name for o in outcomes} == {"pagerduty", "slack:#halluwatch-alerts"}
    assert len(server.requests(PAGERDUTY_PATH)) == 1


def test_deliveries_already_done_are_skipped(server):
    done = {"slack:#halluwatch-alerts"}
    outcomes = dispatch(make(config(server)), "page", alerts(1, route="page"), lambda a, d: d.name in done)
    assert [o.destination.name for o in outcomes] == ["pagerduty"]
    assert server.requests(SLACK_POST_PATH) == []


def test_an_alert_twice_in_one_batch_is_sent_once(server):
    """A record read again (the dropped-records watchdog) can land in the batch that holds its first copy."""
    (alert,) = alerts(1, route="page")
    outcomes = dispatch(make(config(server)), "page", [alert, alert])
    assert sorted(o.destination.name for o in outcomes) == ["pagerduty", "slack:#halluwatch-alerts"]
    assert len(server.requests(PAGERDUTY_PATH)) == len(server.requests(SLACK_POST_PATH)) == 1


def test_a_retry_twice_in_one_batch_is_made_once(server):
    dispatcher = make(config(server))
    (alert,) = alerts(1)
    name = dispatcher.destinations("slack")[0].name
    outcomes = asyncio.run(redelivered(dispatcher, "slack", name, [(alert, 2), (alert, 2)]))
    assert [o.status for o in outcomes] == [DeliveryStatus.DELIVERED]
    assert len(server.requests(SLACK_POST_PATH)) == 1


def test_failures_retry_with_backoff_then_fail_for_good(server):
    server.set_down()
    dispatcher = make(config(server))
    alert = alerts(1)[0]
    (first,) = dispatch(dispatcher, "slack", [alert])
    assert (first.status, first.attempt, first.retry_in_seconds) == (DeliveryStatus.RETRYING, 1, 5.0)
    assert "503" in first.error

    async def redeliver(attempt: int) -> Outcome:
        (outcome,) = await redelivered(dispatcher, "slack", first.destination.name, [(alert, attempt)])
        return outcome

    second = asyncio.run(redeliver(2))
    assert (second.status, second.retry_in_seconds) == (DeliveryStatus.RETRYING, 10.0)
    assert asyncio.run(redeliver(3)).status is DeliveryStatus.FAILED  # delivery_attempts = 3
    server.set_up()
    assert asyncio.run(redeliver(2)).status is DeliveryStatus.DELIVERED


def test_retries_over_the_limit_go_out_as_one_digest_keeping_their_attempts(server):
    """A backlog after an outage: one retry per slot would take minutes and then flood the channel."""
    clock = FakeClock()
    dispatcher = make(config(server, routes=limited(2), delivery_attempts=9), clock)
    backlog = [(alert, 2 + i % 3) for i, alert in enumerate(alerts(6))]
    outcomes = asyncio.run(redelivered(dispatcher, "slack", "slack:#c", backlog))
    assert [(o.status, o.attempt) for o in outcomes] == [
        (DeliveryStatus.DELIVERED, 2),
        *[(DeliveryStatus.DIGESTED, attempt) for _, attempt in backlog[1:]],
    ]
    posts = server.requests(SLACK_POST_PATH)
    assert len(posts) == 2 and "5 halluwatch alerts on route slack" in json.dumps(posts[1].body)
    assert clock.slept == []


def test_a_failed_retry_digest_leaves_each_alert_its_next_attempt(server):
    server.set_down()
    dispatcher = make(config(server, routes=limited(1), delivery_attempts=3), FakeClock())
    backlog = [(alert, attempt) for alert, attempt in zip(alerts(3), (2, 3, 2), strict=True)]
    outcomes = asyncio.run(redelivered(dispatcher, "slack", "slack:#c", backlog))
    assert [(o.status, o.attempt) for o in outcomes] == [
        (DeliveryStatus.RETRYING, 2),
        (DeliveryStatus.FAILED, 3),  # its budget spent
        (DeliveryStatus.RETRYING, 2),
    ]


def test_a_refusal_no_retry_can_fix_fails_at_once(server):
    server.script(SLACK_POST_PATH, Reply(200, body={"ok": False, "error": "invalid_auth"}))
    (outcome,) = dispatch(make(config(server)), "slack", alerts(1))
    assert (outcome.status, outcome.attempt) == (DeliveryStatus.FAILED, 1)
    assert "invalid_auth" in outcome.error


def test_a_long_retry_after_sets_the_retry_time(server):
    server.script(SLACK_POST_PATH, Reply(429, {"Retry-After": "120"}, {"ok": False, "error": "ratelimited"}))
    (outcome,) = dispatch(make(config(server)), "slack", alerts(1))
    assert (outcome.status, outcome.retry_in_seconds) == (DeliveryStatus.RETRYING, 120.0)


def test_a_failed_digest_leaves_each_alert_to_retry_on_its_own(server):
    settings = config(server, routes=limited(1))
    server.set_down()
    outcomes = dispatch(make(settings), "slack", alerts(3))
    assert [o.status for o in outcomes] == [DeliveryStatus.RETRYING] * 3


def test_unknown_routes_fall_back_to_the_log_route(server, caplog):
    dispatcher = make(config(server))
    assert [d.name for d in dispatcher.destinations("gone")] == [d.name for d in dispatcher.destinations("log")]
    outcomes = dispatch(dispatcher, "gone", alerts(1, route="gone"))
    assert [(o.destination.name, o.status) for o in outcomes] == [("console", DeliveryStatus.DELIVERED)]
    assert isinstance(outcomes[0].destination, Destination)


def test_the_log_is_never_rate_limited(server, caplog):
    settings = AlertingSettings.model_validate({"routes": {"slack": {"max_per_minute": 1}, "page": {}, "log": {}}})
    clock = FakeClock()
    outcomes = dispatch(make(settings, clock), "slack", alerts(5))
    assert [(o.destination.name, o.status) for o in outcomes] == [("console", DeliveryStatus.DELIVERED)] * 5
    assert clock.slept == []
