"""Slack verdict buttons end to end: a signed click is stored in embedded ClickHouse, the message replaced locally."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

import pytest
from clickhouse_connect.driver.client import Client
from flask import Flask
from flask.testing import FlaskClient

from pipeline.alerting.alert import Alert, DetectorEvidence
from pipeline.alerting.render import VERDICT_BLOCK_ID, slack_blocks
from pipeline.config.alerting import AlertingSettings
from pipeline.sinks.clickhouse import migrate
from pipeline.ui.queries import TriageStore
from pipeline.ui.slack_actions import ReplayGuard, judged_blocks, slack_blueprint
from tests.servers import ScriptedServer, alerting_reply

pytestmark = pytest.mark.integration

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN = "00f067aa0ba902b7"
NOW = 1_795_000_000.0  # a fixed clock: 2026-11-18 11:06:40 UTC
RESPONSE_PATH = "/actions/T000/1234/abcd"


@dataclass
class Slack:
    """The app under test, its database, and a local stand-in for Slack's response_url."""

    http: FlaskClient
    client: Client
    database: str
    server: ScriptedServer

    def labels(self) -> list[tuple[Any, ...]]:
        return self.client.query(
            f"SELECT span_id, label, detector, labeller, source, toUnixTimestamp64Milli(labelled_at) "
            f"FROM {self.database}.labels FINAL WHERE trace_id = '{TRACE}'"
        ).result_rows


@pytest.fixture
def slack(clickhouse: tuple[Client, str]) -> Iterator[Slack]:
    client, database = clickhouse
    migrate(client, database)
    app = Flask(__name__)
    app.register_blueprint(slack_blueprint(TriageStore(client, database), SECRET, clock=lambda: NOW))
    with ScriptedServer(alerting_reply) as server:
        yield Slack(app.test_client(), client, database, server)


def alert_message() -> list[dict[str, Any]]:
    """The blocks halluwatch posted: an alert rendered with the triage pages configured."""
    detectors = (
        DetectorEvidence("grounding", 0.8, 0.6, 2, "1 sentence ungrounded", span_id=SPAN),
        DetectorEvidence("schema_violation", 1.0, 0.5, 3, "unknown tool", span_id=SPAN),
    )
    alert = Alert(TRACE, "two-detectors", "slack", 3, "support-bot", "gpt-4o", "chat", detectors, datetime.now(UTC))
    return slack_blocks(alert, AlertingSettings(ui_base_url="http://halluwatch.internal:9464"))


def click_payload(server: ScriptedServer, action_id: str = "halluwatch_confirm", **user: str) -> dict[str, Any]:
    """A block_actions payload as Slack sends it for a click on one of the alert's buttons."""
    blocks = alert_message()
    buttons = next(block for block in blocks if block.get("block_id") == VERDICT_BLOCK_ID)["elements"]
    button = next(b for b in buttons if b["action_id"] == action_id)
    return {
        "type": "block_actions",
        "user": user or {"id": "U0123", "username": "alice", "name": "alice"},
        "team": {"id": "T000"},
        "response_url": server.url + RESPONSE_PATH,
        "message": {"type": "message", "text": "grounding + schema_violation agree", "blocks": blocks},
        "actions": [{**button, "block_id": VERDICT_BLOCK_ID, "type": "button", "action_ts": "1795000000.1"}],
    }


def form(payload: dict[str, Any]) -> bytes:
    return urlencode({"payload": json.dumps(payload)}).encode()


def signed(body: bytes, timestamp: float = NOW, secret: str = SECRET) -> dict[str, str]:
    """Headers as Slack signs a request: v0=HMAC-SHA256(secret, "v0:{timestamp}:{body}")."""
    base = f"v0:{int(timestamp)}:".encode() + body
    digest = hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()
    return {"X-Slack-Request-Timestamp": str(int(timestamp)), "X-Slack-Signature": f"v0={digest}"}


def post(slack: Slack, body: bytes, headers: dict[str, str]) -> Any:
    return slack.http.post(
        "/slack/interactions", data=body, headers=headers, content_type="application/x-www-form-urlencoded"
    )


def test_signed_click_stores_the_label_and_replaces_the_message(slack: Slack) -> None:
    body = form(click_payload(slack.server))
    response = post(slack, body, signed(body))
    assert (response.status_code, response.data) == (200, b"")
    assert slack.labels() == [(SPAN, True, "grounding", "alice", "slack", int(NOW * 1000))]

    [update] = slack.server.wait_for(1, path_prefix=RESPONSE_PATH)
    assert update.body["replace_original"] is True
    verdict = "✅ Confirmed hallucination by @alice · 2026-11-18 11:06 UTC"
    assert verdict in update.body["text"]
    blocks = update.body["blocks"]
    assert not any(block.get("type") == "actions" for block in blocks)
    assert blocks[-2] == {"type": "context", "elements": [{"type": "mrkdwn", "text": verdict}]}
    assert blocks[0] == alert_message()[0]  # the alert itself stays


def test_false_alarm_falls_back_to_the_user_id_and_escapes_it(slack: Slack) -> None:
    body = form(click_payload(slack.server, "halluwatch_false_alarm", id="U<!channel>"))
    assert post(slack, body, signed(body)).status_code == 200
    assert [row[1:4] for row in slack.labels()] == [(False, "grounding", "U<!channel>")]
    [update] = slack.server.wait_for(1, path_prefix=RESPONSE_PATH)
    assert "❎ False alarm by @U&lt;!channel&gt; · " in update.body["text"]
    assert "<!channel>" not in json.dumps(update.body)


def test_a_failed_message_update_keeps_the_label(slack: Slack, caplog: pytest.LogCaptureFixture) -> None:
    slack.server.set_down(500)
    body = form(click_payload(slack.server))
    with caplog.at_level("WARNING", logger="pipeline.ui.slack_actions"):
        assert post(slack, body, signed(body)).status_code == 200
        slack.server.wait_for(1, path_prefix=RESPONSE_PATH)
        deadline = time.monotonic() + 10
        while "updating the message" not in caplog.text and time.monotonic() < deadline:
            time.sleep(0.05)
    assert "updating the message got HTTP 500" in caplog.text
    assert len(slack.labels()) == 1


def test_tampered_body_is_refused_and_stores_nothing(slack: Slack) -> None:
    body = form(click_payload(slack.server))
    tampered = body.replace(b"halluwatch_confirm", b"halluwatch_false_alarm")
    response = post(slack, tampered, signed(body))
    assert (response.status_code, response.data) == (401, b"invalid signature")
    assert post(slack, body, signed(body, secret="another-secret")).status_code == 401
    assert post(slack, body, {}).status_code == 401
    assert slack.labels() == []
    assert slack.server.requests() == []


def test_stale_timestamp_is_refused(slack: Slack) -> None:
    body = form(click_payload(slack.server))
    response = post(slack, body, signed(body, timestamp=NOW - 301))
    assert (response.status_code, response.data) == (401, b"stale request timestamp")
    assert slack.labels() == []


def test_the_same_signed_request_is_accepted_once(slack: Slack) -> None:
    body = form(click_payload(slack.server))
    headers = signed(body)
    assert post(slack, body, headers).status_code == 200
    second = post(slack, body, headers)
    assert (second.status_code, second.data) == (401, b"replayed request")
    assert len(slack.server.wait_for(1, path_prefix=RESPONSE_PATH)) == 1


@pytest.mark.parametrize(
    "body",
    [
        b"not a form",
        b"payload=%7Bnot+json",
        form({"type": "view_submission"}),
        form({"type": "block_actions", "user": {"id": "U1"}, "actions": [{"action_id": "other", "value": "{}"}]}),
    ],
)
def test_malformed_payload_is_a_bad_request(slack: Slack, body: bytes) -> None:
    response = post(slack, body, signed(body))
    assert response.status_code == 400
    assert slack.labels() == []


@pytest.mark.parametrize(
    "value",
    [
        "not json",
        json.dumps({"trace_id": TRACE, "span_id": "short", "detector": "grounding"}),
        json.dumps({"trace_id": "x" * 32, "span_id": SPAN, "detector": "grounding"}),
        json.dumps({"trace_id": TRACE, "span_id": SPAN, "detector": "'; DROP TABLE labels"}),
        json.dumps([TRACE, SPAN]),
    ],
)
def test_bad_button_values_are_bad_requests(slack: Slack, value: str) -> None:
    payload = click_payload(slack.server)
    payload["actions"][0]["value"] = value
    body = form(payload)
    assert post(slack, body, signed(body)).status_code == 400
    assert slack.labels() == []


def test_replay_guard_forgets_pairs_older_than_the_window() -> None:
    guard = ReplayGuard(window=300)
    assert guard.first_time("1000", "v0=a", now=1000)
    assert not guard.first_time("1000", "v0=a", now=1200)
    assert guard.first_time("1000", "v0=b", now=1200)
    assert guard.first_time("1250", "v0=c", now=1400)  # forgets both pairs stamped 1000
    assert len(guard._seen) == 1


def test_judged_blocks_append_the_line_when_the_buttons_are_gone() -> None:
    line = "✅ Confirmed hallucination by @bob · 2026-11-18 11:06 UTC"
    assert judged_blocks(None, line) == [{"type": "context", "elements": [{"type": "mrkdwn", "text": line}]}]
    kept = [{"type": "section", "text": {"type": "mrkdwn", "text": "x"}}]
    assert judged_blocks(kept, line)[0] == kept[0] and len(judged_blocks(kept, line)) == 2
