"""The Slack digest "N calls to review": the review queue's next calls for an application, with verdict buttons.

The buttons post to the alerts' interaction endpoint (:mod:`pipeline.ui.slack_actions`) but
read "Hallucinated" / "Faithful", as on the review page: a call drawn at random was not flagged,
so a faithful one is no false alarm.  Their value also carries how the call was drawn, so a
verdict given in Slack joins the audit sample like one given on the review page; the message
itself names no stratum, which would tell the reviewer the call's probability before the verdict.
Each call's buttons sit in a block of their own, which the verdict replaces.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pipeline.alerting.render import CONFIRM_ACTION, FALSE_ALARM_ACTION, VERDICT_BLOCK_ID, button, escape_mrkdwn
from pipeline.rate.store import Drawn
from pipeline.words import counted


def digest_message(app: str, calls: Sequence[Drawn], ui_base_url: str) -> tuple[str, list[dict[str, Any]]]:
    """The message's fallback text and blocks: one section and one row of buttons per call."""
    text = f"{counted(len(calls), 'call')} to review for {app}"
    base = ui_base_url.rstrip("/")
    blocks: list[dict[str, Any]] = [{"type": "header", "text": {"type": "plain_text", "text": text}}]
    if base:
        blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": (
            f"Drawn at random for the hallucination-rate estimate; or judge them one by one on "
            f"<{base}/review?app={escape_mrkdwn(app)}|the review page>.")}]})  # fmt: skip
    for number, call in enumerate(calls, 1):
        where = f"<{base}/trace/{call.trace_id}|trace {call.trace_id[:12]}>" if base else f"trace `{call.trace_id}`"
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": (
            f"*{number}.* {where} · span `{call.span_id}`")}})  # fmt: skip
        value = json.dumps(
            {"trace_id": call.trace_id, "span_id": call.span_id, "detector": "", "stratum": call.stratum,
             "inclusion_probability": round(call.inclusion_probability, 6)},
            separators=(",", ":"),
        )  # fmt: skip
        blocks.append({"type": "actions", "block_id": f"{VERDICT_BLOCK_ID}:{number}", "elements": [
            button("Hallucinated", CONFIRM_ACTION, value, style="danger"),
            button("Faithful", FALSE_ALARM_ACTION, value),
        ]})  # fmt: skip
    return text, blocks
