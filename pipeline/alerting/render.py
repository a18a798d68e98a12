"""How an alert reads: Slack Block Kit, PagerDuty Events v2, the log (docs/operations.md).

Pure functions, no I/O. Evidence arrived over Kafka as JSON, so it is untrusted: every
reader here tolerates missing keys and wrong types, and every text is clipped to the
destination's limits (a message Slack rejects would be a lost alert). Content in alerts
already follows the ``alerts`` content mode (pipeline/config/content_policy.py): hashes are shown as
they are, so they can be matched against stored rows, and text the mode dropped is shown
as withheld, the numbers beside it kept.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from detectors.registry import DETECTORS
from detectors.text.evidence import more
from detectors.text.passages import clip
from pipeline.alerting.alert import Alert, DetectorEvidence
from pipeline.alerting.incident import IncidentEvent, IncidentNote
from pipeline.config.alerting import AlertingSettings

DIGEST_LINES = 20  # alerts listed one per line in a digest; the rest by their traces' short ids
DIGEST_NAMED = 200  # short ids after those lines (2,000 characters: within one Slack text), then a count
SHORT_TRACE_ID = 8  # characters: the triage list finds a trace by them

# Slack Block Kit and PagerDuty limits.
SLACK_HEADER_CHARS = 150
SLACK_TEXT_CHARS = 3000
SLACK_FIELD_CHARS = 2000
SLACK_DETECTOR_SECTIONS = 20  # a message holds at most 50 blocks
SLACK_BUTTON_VALUE_CHARS = 2000
PAGERDUTY_SUMMARY_CHARS = 1024

# The verdict buttons of a Slack alert (answered by pipeline/ui/slack_actions.py).
VERDICT_BLOCK_ID = "halluwatch_verdict"
CONFIRM_ACTION = "halluwatch_confirm"
FALSE_ALARM_ACTION = "halluwatch_false_alarm"


# Each detector's own rendering of its evidence (``render_evidence`` of detectors/<name>/detector.py).
_EVIDENCE = {spec.name: spec.render for spec in DETECTORS}


def evidence_lines(d: DetectorEvidence) -> list[str]:
    """Human lines for one detector's evidence; none for unknown detectors or malformed evidence.

    A line repeating the summary is left out: every rendering shows the summary beside them.
    """
    render = _EVIDENCE.get(d.detector)
    lines = render(d.evidence) if render is not None and isinstance(d.evidence, Mapping) else []
    return [line for line in lines if line != d.summary]


def _verdict(d: DetectorEvidence) -> str:
    return f"score {d.score:.2f} (threshold {d.threshold:.2f}), severity {d.severity}"


# --- Slack ----------------------------------------------------------------------------------


def escape_mrkdwn(text: str) -> str:
    """Escape the characters Slack parses as markup (so ``<!channel>`` in an answer stays text)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _slack_link(url: str, label: str) -> str:
    return f"<{escape_mrkdwn(url).replace('|', '%7C')}|{escape_mrkdwn(label).replace('|', '/')}>"


def _trace_mrkdwn(trace_id: str, config: AlertingSettings) -> str:
    """The trace id, linked to the trace UI, else to the triage page, else as code."""
    url = config.trace_url(trace_id) or config.triage_url(trace_id)
    return _slack_link(url, trace_id) if url else f"`{escape_mrkdwn(trace_id)}`"


def _triage_mrkdwn(trace_id: str, config: AlertingSettings) -> list[str]:
    """A "Triage" link to the trace's triage page, or none when ``ui_base_url`` is unset."""
    url = config.triage_url(trace_id)
    return [_slack_link(url, "Triage")] if url else []


def _mrkdwn(text: str, limit: int = SLACK_TEXT_CHARS) -> dict[str, str]:
    return {"type": "mrkdwn", "text": clip(text, limit)}


def _header(text: str) -> dict[str, Any]:
    return {"type": "header", "text": {"type": "plain_text", "text": clip(text, SLACK_HEADER_CHARS)}}


def _footer(config: AlertingSettings, *parts: str) -> dict[str, Any]:
    links = [*parts, _slack_link(config.dashboard_url, "Dashboard")] if config.dashboard_url else list(parts)
    return {"type": "context", "elements": [_mrkdwn(" · ".join(links) or "halluwatch")]}


def slack_text(alert: Alert, config: AlertingSettings) -> str:
    """The message's fallback text (notifications, screen readers): headline and trace id."""
    return escape_mrkdwn(f"{alert.headline} (trace {alert.trace_id})")


def button(text: str, action_id: str, value: str, **style: str) -> dict[str, Any]:
    """A Slack button (the verdict buttons of alerts and of the review digest)."""
    return {
        "type": "button",
        "text": {"type": "plain_text", "text": text},
        "action_id": action_id,
        "value": value,
        **style,
    }


def _verdict_actions(alert: Alert, config: AlertingSettings) -> list[dict[str, Any]]:
    """The "Confirmed hallucination" / "False alarm" buttons, when the triage pages are reachable.

    Their value names the call judged: the first agreeing detector that reported a span. An
    alert with no such detector (or ids too long for a button) gets no buttons.
    """
    judged = next((d for d in alert.detectors if d.span_id), None)
    if not config.ui_base_url or judged is None:
        return []
    call = {"trace_id": alert.trace_id, "span_id": judged.span_id, "detector": judged.detector}
    value = json.dumps(call, separators=(",", ":"))
    if len(value) > SLACK_BUTTON_VALUE_CHARS:
        return []
    buttons = [
        button("Confirmed hallucination", CONFIRM_ACTION, value, style="danger"),
        button("False alarm", FALSE_ALARM_ACTION, value),
    ]
    return [{"type": "actions", "block_id": VERDICT_BLOCK_ID, "elements": buttons}]


def _detector_section(d: DetectorEvidence) -> dict[str, Any]:
    lines = [f"*{escape_mrkdwn(d.detector)}*: {_verdict(d)}"]
    if d.summary:
        lines.append(escape_mrkdwn(d.summary))
    lines += [f"• {escape_mrkdwn(line)}" for line in evidence_lines(d)]
    return {"type": "section", "text": _mrkdwn("\n".join(lines))}


def slack_blocks(alert: Alert, config: AlertingSettings) -> list[dict[str, Any]]:
    """Block Kit: headline, where it happened, each agreeing detector with its evidence, verdict buttons, links."""
    facts = {
        "Service": alert.service,
        "Model": alert.model,
        "Operation": alert.operation,
        "Rule": alert.rule,
        "Route": alert.route,
        "Severity": str(alert.severity),
    }
    fields = [_mrkdwn(f"*{name}*\n{escape_mrkdwn(value) or '-'}", SLACK_FIELD_CHARS) for name, value in facts.items()]
    return [
        _header(alert.headline),
        {"type": "section", "fields": fields},
        *(_detector_section(d) for d in alert.detectors[:SLACK_DETECTOR_SECTIONS]),
        *_verdict_actions(alert, config),
        _footer(config, f"Trace {_trace_mrkdwn(alert.trace_id, config)}", *_triage_mrkdwn(alert.trace_id, config)),
    ]


def _digest_title(route: str, alerts: Sequence[Alert]) -> str:
    return f"{len(alerts)} halluwatch alerts on route {route}"


def digest_text(route: str, alerts: Sequence[Alert]) -> str:
    """Plain text summarising alerts sent together: the count, one line per alert, then the rest's traces."""
    lines = [f"- {alert.headline} (trace {alert.trace_id})" for alert in alerts[:DIGEST_LINES]]
    return "\n".join([_digest_title(route, alerts), *lines, *_digest_rest(alerts)])


def _digest_rest(alerts: Sequence[Alert]) -> list[str]:
    """The alerts past the listed ones, by their traces' short ids: each can still be looked up."""
    rest = alerts[DIGEST_LINES:]
    if not rest:
        return []
    named = ", ".join(alert.trace_id[:SHORT_TRACE_ID] for alert in rest[:DIGEST_NAMED])
    return [f"+{len(rest)} more alert(s), traces {named}", *more(len(rest), DIGEST_NAMED, "alert(s)")]


def _pack(lines: Iterable[str], limit: int) -> list[str]:
    """Join lines into as few texts of at most ``limit`` characters as possible."""
    texts: list[str] = []
    for line in lines:
        if texts and len(texts[-1]) + 1 + len(line) <= limit:
            texts[-1] += "\n" + line
        else:
            texts.append(clip(line, limit))
    return texts


def _digest_links(trace_id: str, config: AlertingSettings) -> str:
    return ", ".join([_trace_mrkdwn(trace_id, config), *_triage_mrkdwn(trace_id, config)])


def digest_blocks(route: str, alerts: Sequence[Alert], config: AlertingSettings) -> list[dict[str, Any]]:
    """Block Kit for a digest: the count, a line per alert (headline, trace and triage links), the rest's traces."""
    lines = [
        f"• {escape_mrkdwn(clip(alert.headline, SLACK_HEADER_CHARS))} ({_digest_links(alert.trace_id, config)})"
        for alert in alerts[:DIGEST_LINES]
    ]
    lines += _digest_rest(alerts)
    sections = [{"type": "section", "text": _mrkdwn(text)} for text in _pack(lines, SLACK_TEXT_CHARS)]
    return [_header(_digest_title(route, alerts)), *sections, _footer(config)]


# --- PagerDuty and the log ----------------------------------------------------------------


def pagerduty_event(alert: Alert, config: AlertingSettings, routing_key: str) -> dict[str, Any]:
    """An Events API v2 ``trigger``; the alert id is the dedup key, so re-sending is harmless."""
    payload: dict[str, Any] = {
        "summary": clip(alert.headline, PAGERDUTY_SUMMARY_CHARS),
        "source": alert.service or "halluwatch",
        "severity": config.pagerduty_severity_for(alert.severity),
        "timestamp": alert.created_at.isoformat(),
        "class": alert.rule,
        "custom_details": {
            "trace_id": alert.trace_id,
            "operation": alert.operation,
            "route": alert.route,
            "detectors": alert.detector_names,
            "scores": {d.detector: {"score": d.score, "threshold": d.threshold} for d in alert.detectors},
            "evidence": {d.detector: [d.summary, *evidence_lines(d)] for d in alert.detectors},
        },
    }
    # Optional fields are left out rather than sent empty.
    payload |= {key: value for key, value in (("component", alert.model), ("group", alert.service)) if value}
    event: dict[str, Any] = {
        "routing_key": routing_key,
        "event_action": "trigger",
        "dedup_key": alert.dedup_key,  # an alert grouped into an incident joins it rather than paging
        "payload": payload,
    }
    links = [
        {"href": href, "text": text}
        for href, text in (
            (config.triage_url(alert.trace_id), "Triage page"),
            (config.trace_url(alert.trace_id), f"Trace {alert.trace_id}"),
            (config.dashboard_url, "Dashboard"),
        )
        if href
    ]
    if links:
        event["links"] = links
    return event


def console_text(alert: Alert, config: AlertingSettings) -> str:
    """Multi-line text for the worker's log: the same content as the Slack message."""
    facts = (("service", alert.service), ("model", alert.model), ("operation", alert.operation))
    where = ", ".join(f"{name} {value}" for name, value in facts if value) or "unknown service"
    lines = [f"ALERT [{alert.route} / {alert.rule}, severity {alert.severity}] {alert.headline}", f"  {where}"]
    if alert.incident:
        lines.append(f"  grouped into incident {alert.incident.incident_id}")
    for d in alert.detectors:
        lines.append(f"  {d.detector}: {_verdict(d)}" + (f": {d.summary}" if d.summary else ""))
        lines += [f"    - {line}" for line in evidence_lines(d)]
    url = config.trace_url(alert.trace_id)
    lines.append(f"  trace {alert.trace_id}" + (f" {url}" if url else ""))
    if config.ui_base_url:
        lines.append(f"  triage {config.triage_url(alert.trace_id)}")
    if config.dashboard_url:
        lines.append(f"  dashboard {config.dashboard_url}")
    return "\n".join(lines)


# --- rate-monitor incidents -----------------------------------------------------------------


def _incident_facts(note: IncidentNote) -> dict[str, str]:
    return {
        "Monitor": note.monitor,
        **{name.capitalize(): value or "(none)" for name, value in note.group.items()},
        "Flagged": f"{note.flagged} of {note.calls} calls in {note.window_minutes} min ({note.rate:.1%})",
        "Baseline": f"{note.baseline_rate:.1%}",
    }


def incident_text(note: IncidentNote) -> str:
    """A Slack incident message's fallback text."""
    return escape_mrkdwn(note.headline)


def incident_blocks(note: IncidentNote, config: AlertingSettings) -> list[dict[str, Any]]:
    """Block Kit for an incident event: headline, the group and its numbers, the incident id and links."""
    fields = [
        _mrkdwn(f"*{name}*\n{escape_mrkdwn(value)}", SLACK_FIELD_CHARS) for name, value in _incident_facts(note).items()
    ]
    opened = f"opened {note.opened_at:%Y-%m-%d %H:%M} UTC"
    return [
        _header(note.headline),
        {"type": "section", "fields": fields},
        _footer(config, f"Incident `{escape_mrkdwn(note.ref.incident_id)}` {opened}"),
    ]


def pagerduty_incident_event(note: IncidentNote, config: AlertingSettings, routing_key: str) -> dict[str, Any]:
    """An Events API v2 ``trigger`` (open, update) or ``resolve``; the incident id is the dedup key."""
    event: dict[str, Any] = {"routing_key": routing_key, "dedup_key": note.ref.incident_id}
    if note.event is IncidentEvent.RESOLVE:
        return event | {"event_action": "resolve"}
    payload: dict[str, Any] = {
        "summary": clip(note.headline, PAGERDUTY_SUMMARY_CHARS),
        "source": note.group.get("service") or "halluwatch",
        "severity": config.pagerduty_severity_for(note.severity),
        "timestamp": note.at.isoformat(),
        "class": f"monitor:{note.monitor}",
        "custom_details": {
            "monitor": note.monitor,
            "group": dict(note.group),
            "rate": note.rate,
            "baseline_rate": note.baseline_rate,
            "calls": note.calls,
            "flagged": note.flagged,
            "window_minutes": note.window_minutes,
            "opened_at": note.opened_at.isoformat(),
        },
    }
    links = [{"href": config.dashboard_url, "text": "Dashboard"}] if config.dashboard_url else []
    return event | {"event_action": "trigger", "payload": payload} | ({"links": links} if links else {})


def incident_console_text(note: IncidentNote) -> str:
    """One line for the worker's log."""
    return (
        f"INCIDENT {note.event} [{note.monitor}] {note.headline} "
        f"({note.flagged} of {note.calls} calls in {note.window_minutes} min; incident {note.ref.incident_id})"
    )
