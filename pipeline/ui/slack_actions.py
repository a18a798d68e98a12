"""Slack's "Confirmed hallucination" / "False alarm" buttons: the clicks become labels.

Slack posts each click to ``POST /slack/interactions`` as a form with one ``payload`` field
(JSON), signed with the app's signing secret.  A click is believed only with a valid
signature less than five minutes old, and only once: a signed request seen before is a
replay.  The verdict is stored like one given on the triage page (``source='slack'``), then
the message is replaced through the payload's ``response_url``: the buttons give way to a
line naming who judged it and when.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs

from flask import Blueprint, Response, request
from slack_sdk.signature import Clock, SignatureVerifier
from slack_sdk.webhook import WebhookClient

from pipeline.alerting.render import CONFIRM_ACTION, FALSE_ALARM_ACTION, VERDICT_BLOCK_ID, escape_mrkdwn
from pipeline.sinks.labels import SPAN_ID, TRACE_ID, Label, to_utc_ms
from pipeline.ui.queries import TriageStore

logger = logging.getLogger(__name__)

MAX_AGE_SECONDS = 300  # Slack's own rule, which SignatureVerifier applies too
UPDATE_TIMEOUT_SECONDS = 5
VERDICTS = {CONFIRM_ACTION: True, FALSE_ALARM_ACTION: False}
DETECTOR = re.compile(r"[A-Za-z0-9_.-]{0,100}")
STRATUM = re.compile(r"[A-Za-z0-9_. -]{0,40}")  # an audit stratum's name (pipeline/rate/sampler.py)


class BadPayload(ValueError):
    """The signed request does not hold a verdict click we understand (answered 400)."""


class _Clock(Clock):
    """SignatureVerifier's clock, reading the blueprint's (tests move it)."""

    def __init__(self, now: Callable[[], float]) -> None:
        self._now = now

    def now(self) -> float:
        return self._now()


class ReplayGuard:
    """Signed requests seen in the last ``window`` seconds, keyed by (timestamp, signature).

    Older ones are forgotten: the signature check refuses them anyway, so memory holds at
    most one window of genuine clicks.
    """

    def __init__(self, window: float = MAX_AGE_SECONDS) -> None:
        self._window = window
        self._seen: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()

    def first_time(self, timestamp: str, signature: str, now: float) -> bool:
        """Record the pair; whether it was new."""
        with self._lock:
            self._seen = {key: ts for key, ts in self._seen.items() if ts >= now - self._window}
            if (timestamp, signature) in self._seen:
                return False
            self._seen[(timestamp, signature)] = int(timestamp)
            return True


def slack_blueprint(
    store: TriageStore,
    signing_secret: str,
    clock: Callable[[], float] = time.time,
    after_audit_verdict: Callable[[Label], object] | None = None,
) -> Blueprint:
    """``POST /slack/interactions`` (endpoint ``slack.interactions``), storing verdicts in ``store``.

    ``after_audit_verdict``: called, after the answer, with each verdict on a review digest's drawn
    call (an automatic refit of the application's map may be due).
    """
    verifier = SignatureVerifier(signing_secret, _Clock(clock))
    replays = ReplayGuard()
    # Slack wants an answer within 3 s, and the response_url may be slow: the label is stored
    # before answering (a 200 means it is kept), the message is replaced afterwards, here.
    updates = ThreadPoolExecutor(max_workers=2, thread_name_prefix="slack-update")
    blueprint = Blueprint("slack", __name__)

    @blueprint.post("/slack/interactions")
    def interactions() -> Response:
        body = request.get_data(cache=False)
        timestamp = request.headers.get("X-Slack-Request-Timestamp", "")
        signature = request.headers.get("X-Slack-Signature", "")
        refusal = _refusal(verifier, replays, body, timestamp, signature, clock())
        if refusal:
            return _text(refusal, 401)
        try:
            payload, label = _verdict(body, _now(clock))
        except BadPayload as error:
            return _text(str(error), 400)
        store.add_label(label, source="slack")
        updates.submit(_replace_message, payload, label)
        if after_audit_verdict is not None and label.inclusion_probability > 0:
            updates.submit(after_audit_verdict, label)
        return Response(status=200)

    return blueprint


def _text(message: str, status: int) -> Response:
    return Response(message, status=status, mimetype="text/plain")


def _now(clock: Callable[[], float]) -> datetime:
    return to_utc_ms(datetime.fromtimestamp(clock(), UTC))


def _refusal(
    verifier: SignatureVerifier, replays: ReplayGuard, body: bytes, timestamp: str, signature: str, now: float
) -> str:
    """Why the request is not believed, or "" when it is."""
    if not (timestamp.isascii() and timestamp.isdigit()) or not signature:
        return "missing or malformed Slack signature headers"
    if abs(now - int(timestamp)) > MAX_AGE_SECONDS:
        return "stale request timestamp"
    if not verifier.is_valid(body, timestamp, signature):
        return "invalid signature"
    if not replays.first_time(timestamp, signature, now):
        return "replayed request"
    return ""


def _verdict(body: bytes, now: datetime) -> tuple[dict[str, Any], Label]:
    """The payload and the label its verdict click makes; :class:`BadPayload` otherwise."""
    try:
        payload = json.loads(parse_qs(body.decode())["payload"][0])
    except (UnicodeDecodeError, KeyError, ValueError) as error:
        raise BadPayload("no JSON payload field") from error
    if not isinstance(payload, dict) or payload.get("type") != "block_actions":
        raise BadPayload("not a block_actions payload")
    actions = [a for a in payload.get("actions") or [] if isinstance(a, dict) and a.get("action_id") in VERDICTS]
    if not actions:
        raise BadPayload("no verdict action")
    call, probability = _call(actions[0].get("value"))
    label = Label(
        trace_id=call["trace_id"],
        span_id=call["span_id"],
        hallucinated=VERDICTS[actions[0]["action_id"]],
        labeller=_user(payload.get("user")),
        labelled_at=now,
        detector=call["detector"],
        inclusion_probability=probability,
        stratum=call["stratum"],
    )
    return payload, label


def _call(value: Any) -> tuple[dict[str, str], float]:
    """The button's value: which call, judged from which detector's finding; for a review digest's, how it was drawn."""
    try:
        call = json.loads(value)
    except (TypeError, ValueError) as error:
        raise BadPayload("button value is not JSON") from error
    if not isinstance(call, dict):
        raise BadPayload("button value is not an object")
    fields = {name: call.get(name, "") for name in ("trace_id", "span_id", "detector", "stratum")}
    for name, pattern in (("trace_id", TRACE_ID), ("span_id", SPAN_ID), ("detector", DETECTOR), ("stratum", STRATUM)):
        if not isinstance(fields[name], str) or not pattern.fullmatch(fields[name]):
            raise BadPayload(f"bad {name} in button value")
    probability = call.get("inclusion_probability", 0.0)
    if isinstance(probability, bool) or not isinstance(probability, int | float) or not 0 <= probability <= 1:
        raise BadPayload("bad inclusion_probability in button value")
    return fields, float(probability)


def _user(user: Any) -> str:
    """The Slack user who clicked: their username, else name, else id."""
    found = user if isinstance(user, dict) else {}
    name = next(
        (found[key] for key in ("username", "name", "id") if isinstance(found.get(key), str) and found[key]), ""
    )
    if not name:
        raise BadPayload("no Slack user")
    return name


def verdict_line(label: Label) -> str:
    """What replaces the buttons: the verdict, who gave it, when (mrkdwn, escaped).

    A verdict on a review digest's call (drawn for the audit, so with a stratum) is about a call
    that may not have been flagged: it reads "Hallucinated" / "Faithful", an alert's as a confirmation.
    """
    if label.stratum:
        verdict = "✅ Hallucinated" if label.hallucinated else "❎ Faithful"
    else:
        verdict = "✅ Confirmed hallucination" if label.hallucinated else "❎ False alarm"
    when = label.labelled_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return f"{verdict} by @{escape_mrkdwn(label.labeller)} · {when}"


def judged_blocks(blocks: Any, line: str, clicked: str = VERDICT_BLOCK_ID) -> list[dict[str, Any]]:
    """The message's blocks with the clicked block of verdict buttons replaced by ``line``."""
    judged = {"type": "context", "elements": [{"type": "mrkdwn", "text": line}]}
    kept = [block for block in blocks if isinstance(block, dict)] if isinstance(blocks, list) else []
    replaced = [judged if block.get("block_id") == clicked else block for block in kept]
    return replaced if judged in replaced else [*replaced, judged]


def _clicked_block(payload: dict[str, Any]) -> str:
    """The block holding the button clicked (a review digest has one per call; an alert, one)."""
    clicked = next(a for a in payload["actions"] if isinstance(a, dict) and a.get("action_id") in VERDICTS)
    block = clicked.get("block_id")
    return block if isinstance(block, str) and block else VERDICT_BLOCK_ID


def _replace_message(payload: dict[str, Any], label: Label) -> None:
    """Replace the clicked message through ``response_url``; a failure is logged, the label stays."""
    url = payload.get("response_url")
    message = payload.get("message")
    message = message if isinstance(message, dict) else {}
    line = verdict_line(label)
    # The URL comes from the signed payload: Slack's own, so it is believed.
    if not isinstance(url, str) or not url.startswith(("https://", "http://")):
        logger.warning("Slack verdict on trace %s stored; no response_url to update the message", label.trace_id)
        return
    try:
        response = WebhookClient(url, timeout=UPDATE_TIMEOUT_SECONDS).send(
            replace_original=True,
            text=" · ".join(part for part in (str(message.get("text") or ""), line) if part),
            blocks=judged_blocks(message.get("blocks"), line, _clicked_block(payload)),
        )
    except Exception as error:  # the label is stored either way; nothing to answer Slack with
        logger.warning("Slack verdict on trace %s stored; updating the message failed: %s", label.trace_id, error)
        return
    if response.status_code != 200:
        logger.warning(
            "Slack verdict on trace %s stored; updating the message got HTTP %s: %s",
            label.trace_id,
            response.status_code,
            response.body[:200],
        )
