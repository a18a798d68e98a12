"""PagerDuty's incident webhooks on the alerts table of embedded ClickHouse, through the triage app.

The alert rows are written as the router writes them (``alert_row`` through the ClickHouse
sink); PagerDuty's signed events arrive at ``POST /pagerduty/webhook`` through Flask's test
client, and the rows are read back with ``FINAL`` as the trace page reads them.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from clickhouse_connect.driver.client import Client
from flask.testing import FlaskClient
from pydantic import SecretStr

from pipeline.alerting.alert import DeliveryStatus
from pipeline.alerting.alert_row import alert_row
from pipeline.config.ui import UISettings
from pipeline.sinks.clickhouse import ClickHouseSink, migrate
from pipeline.ui.queries import TriageStore
from pipeline.ui.web import create_app
from tests.unit.test_alert_render import make_alert
from tests.unit.test_pagerduty_webhook import SECRET, TRACE, event, sign

pytestmark = pytest.mark.integration

TOKEN = "test-token-0123456789"
ALERT = make_alert(trace_id=TRACE)  # rule grounding-and-schema, the dedup key of event()
COLUMNS = "destination, status, attempts, error, incident_status, acknowledged_by, resolved_by, incident_url"


def _rows(client: Client, database: str) -> list[tuple[Any, ...]]:
    return [
        tuple(row)
        for row in client.query(
            f"SELECT {COLUMNS} FROM {database}.alerts FINAL WHERE trace_id = '{TRACE}' ORDER BY destination"
        ).result_rows
    ]


def _stored(client: Client, database: str) -> int:
    return int(client.query(f"SELECT count() FROM {database}.alerts").result_rows[0][0])


def _write(client: Client, database: str, destination: str, status: DeliveryStatus, attempts: int, error: str = ""):
    sink = ClickHouseSink(client, database)
    sink.add("alerts", [alert_row(ALERT, destination, status, attempts, error, datetime.now(UTC))])
    sink.flush()


def _post(http: FlaskClient, payload: dict[str, Any], signature: str | None = None) -> tuple[int, str]:
    body = json.dumps(payload).encode()
    headers = {"X-PagerDuty-Signature": sign(body) if signature is None else signature}
    response = http.post("/pagerduty/webhook", data=body, headers=headers, content_type="application/json")
    return response.status_code, response.get_data(as_text=True)


@pytest.fixture
def alerted(clickhouse: tuple[Client, str]) -> tuple[Client, str, FlaskClient]:
    """An alert delivered to Slack and, on its second attempt, to PagerDuty; the app with the webhook secret."""
    client, database = clickhouse
    migrate(client, database)
    _write(client, database, "slack:#halluwatch-alerts", DeliveryStatus.DELIVERED, 1)
    _write(client, database, "pagerduty", DeliveryStatus.RETRYING, 1, "pagerduty: HTTP 503")
    _write(client, database, "pagerduty", DeliveryStatus.DELIVERED, 2)
    settings = UISettings(token=SecretStr(TOKEN), pagerduty_webhook_secret=SecretStr(SECRET))
    return client, database, create_app(TriageStore(client, database), settings).test_client()


def test_acknowledge_resolve_and_reopen_land_on_the_pagerduty_row_and_keep_its_delivery(alerted):
    client, database, http = alerted
    url = "https://acme.pagerduty.com/incidents/PQ1K5C8"

    assert _post(http, event("incident.acknowledged")) == (200, "applied")
    pagerduty, slack = _rows(client, database)
    assert pagerduty == ("pagerduty", "delivered", 2, "", "acknowledged", "Dana Oncall", "", url)
    assert slack == ("slack:#halluwatch-alerts", "delivered", 1, "", "", "", "", "")  # PagerDuty's word only

    # A delivery retry the router writes afterwards (a replay past the dedup retention) does not undo it.
    _write(client, database, "pagerduty", DeliveryStatus.DELIVERED, 3)
    assert _rows(client, database)[0] == pagerduty

    resolved = event("incident.resolved", occurred_at="2026-06-04T14:10:00Z", agent={"summary": "Eve Lead"})
    assert _post(http, resolved) == (200, "applied")
    assert _rows(client, database)[0] == ("pagerduty", "delivered", 2, "", "resolved", "Dana Oncall", "Eve Lead", url)

    # The acknowledgement delivered again (PagerDuty retries, or someone replays it) changes nothing.
    assert _post(http, event("incident.acknowledged")) == (200, "stale")
    assert _rows(client, database)[0][4:7] == ("resolved", "Dana Oncall", "Eve Lead")

    reopened = event("incident.reopened", occurred_at="2026-06-04T14:30:00Z")
    assert _post(http, reopened) == (200, "applied")
    assert _rows(client, database)[0][4:7] == ("triggered", "", "")

    page = http.get(f"/trace/{TRACE}", headers={"Authorization": f"Bearer {TOKEN}"}).get_data(as_text=True)
    assert f'<a href="{url}">triggered</a>' in page and "2026-06-04 14:30:00 UTC" in page


def test_an_acknowledgement_of_a_delivery_still_retrying_records_it_delivered(clickhouse):
    client, database = clickhouse
    migrate(client, database)
    # A route with a PagerDuty service of its own delivers as "pagerduty:<route>".
    _write(client, database, "pagerduty:payments", DeliveryStatus.RETRYING, 1, "pagerduty: ClientTimeout")
    http = create_app(TriageStore(client, database), UISettings(pagerduty_webhook_secret=SecretStr(SECRET)))
    assert _post(http.test_client(), event()) == (200, "applied")
    # PagerDuty has the incident, so the trigger arrived even though our attempt timed out.
    (row,) = _rows(client, database)
    assert row[:6] == ("pagerduty:payments", "delivered", 1, "pagerduty: ClientTimeout", "acknowledged", "Dana Oncall")


def test_badly_signed_requests_are_refused_and_change_nothing(alerted):
    client, database, http = alerted
    before, stored = _rows(client, database), _stored(client, database)
    body = json.dumps(event()).encode()
    for signature in ("", sign(body, "not-the-secret"), sign(b"something else"), "sha256=" + sign(body)[3:]):
        status, text = _post(http, event(), signature)
        assert (status, text) == (401, "missing or invalid X-PagerDuty-Signature")
    assert _rows(client, database) == before and _stored(client, database) == stored


def test_events_of_incidents_that_are_not_our_alerts_are_answered_and_ignored(alerted):
    client, database, http = alerted
    stored = _stored(client, database)
    assert _post(http, event(incident_key="someone-else:rule")) == (
        200,
        "ignored: not an incident change of a halluwatch alert",
    )
    assert _post(http, event(incident_key=f"{'0' * 32}:grounding-and-schema")) == (200, "no such alert")
    assert _post(http, event("incident.annotated"))[0] == 200
    assert _post(http, {"not": "an event"}) == (400, "not a PagerDuty V3 webhook event: no event object")
    assert _stored(client, database) == stored


def test_without_a_secret_the_endpoint_is_not_there(clickhouse):
    client, database = clickhouse
    migrate(client, database)
    http = create_app(TriageStore(client, database), UISettings(token=SecretStr(TOKEN))).test_client()
    status, text = _post(http, event())
    assert status == 404 and "ui.pagerduty_webhook_secret" in text
    assert _stored(client, database) == 0
