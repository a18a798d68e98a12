"""PagerDuty's V3 webhooks: an incident acknowledged, resolved or re-opened there shows on its alert here.

PagerDuty posts each event of a webhook subscription to ``POST /pagerduty/webhook`` as JSON,
signed in ``X-PagerDuty-Signature`` (``v1=<hex HMAC-SHA256 of the body>``, several
comma-separated while a secret is being rotated).  A request is believed only with a valid
signature.  The signature carries no timestamp, so a captured request could be sent again:
that is harmless, because a change is applied only when it is newer than what the alert's
row already says (:mod:`pipeline.sinks.alert_lifecycle`).  The incident's ``incident_key`` is
the dedup key we sent, ``<trace id>:<rule>``; incidents with any other key are not ours and
are answered 200 (PagerDuty retries anything else) and ignored.

Without a configured secret the endpoint answers 404 to everyone: there is no way to tell
PagerDuty from anybody else, and "not here" is what an unconfigured endpoint is.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import re
from datetime import datetime
from typing import Any

from flask import Blueprint, Response, request

from pipeline.sinks.alert_lifecycle import IncidentChange, IncidentState
from pipeline.sinks.labels import TRACE_ID
from pipeline.ui.queries import TriageStore

logger = logging.getLogger(__name__)

PATH = "/pagerduty/webhook"
MAX_BODY_BYTES = 1024 * 1024  # PagerDuty's events are a few KB
STATES = {
    "incident.acknowledged": IncidentState.ACKNOWLEDGED,
    "incident.resolved": IncidentState.RESOLVED,
    "incident.unacknowledged": IncidentState.TRIGGERED,  # the acknowledgement timed out
    "incident.reopened": IncidentState.TRIGGERED,
}
_RULE = re.compile(r"[A-Za-z0-9_.-]+")  # AlertRule.name's pattern


class BadEvent(ValueError):
    """A signed body that is not a V3 webhook event we can read (answered 400)."""


def signature_valid(body: bytes, header: str, secret: str) -> bool:
    """Whether any ``v1=`` signature in ``header`` is the HMAC-SHA256 of ``body`` under ``secret``."""
    expected = "v1=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return any(hmac.compare_digest(expected.encode(), part.strip().encode()) for part in header.split(","))


def incident_change(payload: Any) -> IncidentChange | None:
    """The change a V3 event reports on one of our alerts; None for other events and other incidents."""
    event = payload.get("event") if isinstance(payload, dict) else None
    if not isinstance(event, dict):
        raise BadEvent("no event object")
    state = STATES.get(str(event.get("event_type")))
    data = event.get("data")
    if state is None or not isinstance(data, dict):
        return None
    trace_id, _, rule = str(data.get("incident_key") or "").partition(":")
    if not TRACE_ID.fullmatch(trace_id) or not _RULE.fullmatch(rule):
        return None
    try:
        at = datetime.fromisoformat(str(event.get("occurred_at")))
    except ValueError as error:
        raise BadEvent("occurred_at is not an ISO 8601 time") from error
    if at.tzinfo is None:
        raise BadEvent("occurred_at has no time zone")
    url = data.get("html_url")
    return IncidentChange(
        trace_id,
        rule,
        state,
        by=_agent(event.get("agent")),
        at=at,
        url=url if isinstance(url, str) and url.startswith("https://") else "",
    )


def _agent(agent: Any) -> str:
    """Who made the change: the user's (or service's) name, else its id; PagerDuty itself for none."""
    found = agent if isinstance(agent, dict) else {}
    return next(
        (found[key] for key in ("summary", "id") if isinstance(found.get(key), str) and found[key]), "PagerDuty"
    )


def pagerduty_blueprint(store: TriageStore, secret: str | None) -> Blueprint:
    """``POST /pagerduty/webhook`` (endpoint ``pagerduty.webhook``), recording incident changes in ``store``."""
    blueprint = Blueprint("pagerduty", __name__)

    @blueprint.post(PATH)
    def webhook() -> Response:
        if secret is None:
            return _text("PagerDuty webhooks are not configured here (ui.pagerduty_webhook_secret)", 404)
        length = request.content_length
        if length is None or length > MAX_BODY_BYTES:
            return _text(f"a body of at most {MAX_BODY_BYTES} bytes, with its Content-Length, is expected", 413)
        body = request.get_data(cache=False)
        if not signature_valid(body, request.headers.get("X-PagerDuty-Signature", ""), secret):
            return _text("missing or invalid X-PagerDuty-Signature", 401)
        try:
            change = incident_change(json.loads(body))
        except (ValueError, BadEvent) as error:  # json's ValueError included
            return _text(f"not a PagerDuty V3 webhook event: {error}", 400)
        if change is None:
            return _text("ignored: not an incident change of a halluwatch alert", 200)
        recorded = store.record_incident_change(change)
        logger.info("PagerDuty: alert %s:%s %s by %s (%s)", change.trace_id, change.rule, change.state, change.by,
                    recorded, extra={"trace_id": change.trace_id})  # fmt: skip
        return _text(str(recorded), 200)

    return blueprint


def _text(message: str, status: int) -> Response:
    return Response(message, status=status, mimetype="text/plain")
