"""PagerDuty V3 webhooks: signatures, and which events say what about which alert."""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import UTC, datetime
from typing import Any

import pytest

from pipeline.sinks.alert_lifecycle import LIFECYCLE_VERSION_BASE, IncidentChange, IncidentState
from pipeline.ui.pagerduty_webhook import BadEvent, incident_change, signature_valid

SECRET = "whsec-0123456789abcdef"
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


def sign(body: bytes, secret: str = SECRET) -> str:
    return "v1=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def event(event_type: str = "incident.acknowledged", **changes: Any) -> dict[str, Any]:
    """A V3 webhook event shaped as PagerDuty sends it (trimmed to the fields that matter here)."""
    data = {
        "id": "PQ1K5C8",
        "type": "incident",
        "html_url": "https://acme.pagerduty.com/incidents/PQ1K5C8",
        "number": 10,
        "status": "acknowledged",
        "incident_key": f"{TRACE}:grounding-and-schema",
        "title": "grounding + schema_violation agree on support-bot chat",
    }
    body = {
        "id": "01BZYK8N47N5JG55J1EEEHPEJI",
        "event_type": event_type,
        "resource_type": "incident",
        "occurred_at": "2026-06-04T13:55:30.394Z",
        "agent": {"id": "PJ0LVEB", "summary": "Dana Oncall", "type": "user_reference"},
        "client": None,
        "data": data,
    }
    for key, value in changes.items():
        (data if key in data else body)[key] = value
    return {"event": body}


# --- signatures --------------------------------------------------------------------------------


def test_a_body_signed_with_the_secret_is_believed():
    body = json.dumps(event()).encode()
    assert signature_valid(body, sign(body), SECRET)


def test_one_good_signature_among_several_is_enough_while_a_secret_rotates():
    body = json.dumps(event()).encode()
    assert signature_valid(body, f"{sign(body, 'old-secret')}, {sign(body)}", SECRET)
    assert signature_valid(body, f"{sign(body)},{sign(body, 'new-secret')}", SECRET)


@pytest.mark.parametrize(
    "header",
    [
        "",  # unsigned
        "v1=",
        "v1=" + "0" * 64,
        sign(b"another body"),
        sign(b"{}", "wrong-secret"),
        "sha256=" + hmac.new(SECRET.encode(), b"{}", hashlib.sha256).hexdigest(),  # another format
        hmac.new(SECRET.encode(), b"{}", hashlib.sha256).hexdigest(),  # no version prefix
        "v0=" + hmac.new(SECRET.encode(), b"{}", hashlib.sha256).hexdigest(),  # an unknown version
        "v1=" + hmac.new(SECRET.encode(), b"{}", hashlib.sha1).hexdigest(),  # another hash
    ],
)
def test_anything_but_a_v1_hmac_sha256_of_the_body_is_refused(header):
    assert not signature_valid(b"{}", header, SECRET)


def test_a_body_changed_after_signing_is_refused():
    body = json.dumps(event()).encode()
    assert not signature_valid(body.replace(b"acknowledged", b"resolved"), sign(body), SECRET)


# --- events ------------------------------------------------------------------------------------


def test_an_acknowledgement_names_the_alert_by_its_dedup_key():
    change = incident_change(event())
    assert change == IncidentChange(
        TRACE,
        "grounding-and-schema",
        IncidentState.ACKNOWLEDGED,
        by="Dana Oncall",
        at=datetime(2026, 6, 4, 13, 55, 30, 394000, tzinfo=UTC),
        url="https://acme.pagerduty.com/incidents/PQ1K5C8",
    )


@pytest.mark.parametrize(
    ("event_type", "state"),
    [
        ("incident.resolved", IncidentState.RESOLVED),
        ("incident.unacknowledged", IncidentState.TRIGGERED),
        ("incident.reopened", IncidentState.TRIGGERED),
    ],
)
def test_resolving_and_reopening(event_type, state):
    change = incident_change(event(event_type))
    assert change is not None and change.state is state


@pytest.mark.parametrize(
    "payload",
    [
        event("incident.triggered"),  # our own trigger: the router records it
        event("incident.annotated"),
        event("pagey.ping"),
        event(incident_key="a-key-someone-else-sent"),
        event(incident_key=f"{TRACE.upper()}:grounding-and-schema"),
        event(incident_key=f"{TRACE}:"),
        event(incident_key=f"{TRACE}:rule with spaces"),
        event(incident_key=None),
        event(data=None),
    ],
)
def test_other_events_and_incidents_that_are_not_ours_are_ignored(payload):
    assert incident_change(payload) is None


@pytest.mark.parametrize(
    ("payload", "says"),
    [
        ([], "no event object"),
        ({"events": []}, "no event object"),
        (event(occurred_at="yesterday"), "not an ISO 8601 time"),
        (event(occurred_at=None), "not an ISO 8601 time"),
        (event(occurred_at="2026-06-04T13:55:30"), "no time zone"),
    ],
)
def test_unreadable_events_are_refused(payload, says):
    with pytest.raises(BadEvent, match=says):
        incident_change(payload)


def test_who_changed_it_falls_back_to_the_agents_id_then_pagerduty():
    by_id = incident_change(event(agent={"id": "PJ0LVEB", "type": "user_reference"}))
    automatic = incident_change(event("incident.resolved", agent=None))
    assert by_id is not None and by_id.by == "PJ0LVEB"
    assert automatic is not None and automatic.by == "PagerDuty"


def test_only_https_incident_links_are_kept():
    change = incident_change(event(html_url="javascript:alert(1)"))
    assert change is not None and change.url == ""


def test_later_changes_get_higher_row_versions_above_every_delivery():
    at = datetime(2026, 6, 4, 13, 55, 30, tzinfo=UTC)
    change = IncidentChange(TRACE, "r", IncidentState.ACKNOWLEDGED, "Dana", at)
    later = IncidentChange(TRACE, "r", IncidentState.RESOLVED, "Dana", at.replace(minute=56))
    assert LIFECYCLE_VERSION_BASE < change.state_version < later.state_version < 2**32
