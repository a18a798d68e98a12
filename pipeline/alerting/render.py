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
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from pipeline.alerting.alert import Alert, DetectorEvidence
from pipeline.alerting.incident import IncidentEvent, IncidentNote
from pipeline.config.alerting import AlertingSettings

SNIPPET_CHARS = 300  # one quoted sentence, window or value
WITHHELD = "(text withheld by content_mode)"
EVIDENCE_ITEMS = 5  # violations / claims / spans listed per detector
UNGROUNDED_SENTENCES = 2  # least-similar ungrounded sentences shown, each with its best window
DIGEST_LINES = 20  # alerts listed one per line in a digest; the rest are counted

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


# --- untrusted values -------------------------------------------------------------------


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _snippet(value: Any) -> str:
    """A one-line, clipped, quoted rendering of a text value ("" for anything else)."""
    if not isinstance(value, str) or not value.strip():
        return ""
    return f'"{_clip(" ".join(value.split()), SNIPPET_CHARS)}"'


def _quoted(value: Any) -> str:
    """A :func:`_snippet`, or :data:`WITHHELD` for the empty text a ``drop`` content mode leaves."""
    return WITHHELD if value == "" else _snippet(value)


def _word(value: Any) -> str:
    """A short scalar (id, kind, name) as text, or ""."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return ""
    return _clip(str(value), SNIPPET_CHARS)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def _records(value: Any) -> list[Mapping[str, Any]]:
    """The mapping items of a list (anything else: none)."""
    return [item for item in value if isinstance(item, Mapping)] if isinstance(value, list) else []


def _more(total: int, shown: int, what: str) -> list[str]:
    return [f"+{total - shown} more {what}"] if total > shown else []


# --- evidence, per detector ---------------------------------------------------------------


def _grounding_lines(evidence: Mapping[str, Any]) -> list[str]:
    lines: list[str] = []
    missing = [word for word in map(_word, evidence.get("missing_source_ids") or []) if word]
    if missing:
        lines.append(f"cites source(s) the call does not have: {', '.join(missing[:EVIDENCE_ITEMS])}")
    sentences = _records(evidence.get("sentences"))
    ungrounded = [s for s in sentences if s.get("grounded") is False and _quoted(s.get("text"))]
    ungrounded.sort(key=lambda s: _number(s.get("similarity")) or 0.0)  # least similar first
    for sentence in ungrounded[:UNGROUNDED_SENTENCES]:
        similarity = _number(sentence.get("similarity"))
        scored = f" (similarity {similarity:.2f})" if similarity is not None else ""
        lines.append(f"ungrounded sentence{scored}: {_quoted(sentence.get('text'))}")
        window = _quoted(sentence.get("best_window"))
        lines.append(f"best source window: {window}" if window else "no source window to compare with")
    count = _number(evidence.get("ungrounded_count"))
    total = max(int(count), len(ungrounded)) if count is not None else len(ungrounded)
    return lines + _more(total, min(len(ungrounded), UNGROUNDED_SENTENCES), "ungrounded sentence(s)")


def _schema_lines(evidence: Mapping[str, Any]) -> list[str]:
    messages = [message for message in map(_violation_line, _records(evidence.get("violations"))) if message]
    return messages[:EVIDENCE_ITEMS] + _more(len(messages), EVIDENCE_ITEMS, "violation(s)")


def _violation_line(violation: Mapping[str, Any]) -> str:
    """The violation's message, or (when the content mode withheld it) what and where it was."""
    message = _word(violation.get("message"))
    if message:
        return message
    where = [f"{name} {_word(violation.get(name))}" for name in ("tool", "path") if _word(violation.get(name))]
    return " ".join([_word(violation.get("kind")), *where]).strip()


def _contradiction_lines(evidence: Mapping[str, Any]) -> list[str]:
    conflicts: list[str] = []
    unsupported: list[str] = []
    for claim in _records(evidence.get("claims")):
        said = _quoted(claim.get("text"))
        if said and claim.get("verdict") == "conflict":
            other = _quoted(claim.get("context_text"))
            conflicts.append(f"answer says {said}, context says {other or 'something else'}")
        elif said and claim.get("verdict") == "unsupported":
            unsupported.append(f"answer says {said}, not found in the context")
    lines = conflicts + unsupported  # conflicts first: they are the stronger evidence
    return lines[:EVIDENCE_ITEMS] + _more(len(lines), EVIDENCE_ITEMS, "claim(s)")


def _tool_outcome_lines(evidence: Mapping[str, Any]) -> list[str]:
    claims = (_quoted(span.get("text")) for span in _records(evidence.get("spans")))
    lines = [f"answer claims: {said}" for said in claims if said]
    for run in _records(evidence.get("runs")):
        outcome, tool = _word(run.get("outcome")), _word(run.get("tool"))
        if outcome == "failed":
            reason = _snippet(run.get("reason"))
            lines.append(f"tool {tool} failed" + (f": {reason}" if reason else ""))
        elif outcome == "not_run":
            lines.append(f"tool {tool} has no recorded result")
    return lines[:EVIDENCE_ITEMS] + _more(len(lines), EVIDENCE_ITEMS, "line(s)")


def _confidence_lines(evidence: Mapping[str, Any]) -> list[str]:
    span = evidence.get("lowest_span")
    text = _quoted(span.get("text")) if isinstance(span, Mapping) else ""
    if text:
        prob = _number(span.get("mean_prob")) if isinstance(span, Mapping) else None
        scored = f" (mean token probability {prob:.3f})" if prob is not None else ""
        return [f"lowest-confidence span{scored}: {text}"]
    lowest = _number(evidence.get("min_token_prob"))
    return [f"lowest token probability {lowest:.3f}"] if lowest is not None else []


def _span_model_lines(evidence: Mapping[str, Any]) -> list[str]:
    lines: list[str] = []
    for span in _records(evidence.get("spans")):
        text = _quoted(span.get("text"))
        if text:
            prob = _number(span.get("probability"))
            lines.append(f"unsupported span{f' (p={prob:.2f})' if prob is not None else ''}: {text}")
    return lines[:EVIDENCE_ITEMS] + _more(len(lines), EVIDENCE_ITEMS, "span(s)")


def _self_consistency_lines(evidence: Mapping[str, Any]) -> list[str]:
    pair = evidence.get("most_divergent")
    answers = pair.get("answers") if isinstance(pair, Mapping) else None
    if not isinstance(pair, Mapping) or not isinstance(answers, list):
        return []
    similarity = _number(pair.get("similarity"))
    scored = f" (similarity {similarity:.2f})" if similarity is not None else ""
    return [f"least similar re-asked answer{scored}: {_quoted(answer)}" for answer in answers[:2]]


def _claims_lines(evidence: Mapping[str, Any]) -> list[str]:
    judged = [c for c in _records(evidence.get("claims")) if c.get("verdict") in ("contradicted", "unsupported")]
    judged.sort(key=lambda c: c.get("verdict") != "contradicted")  # contradictions first: the stronger evidence
    lines = []
    for claim in judged:
        reason = _snippet(claim.get("reason"))
        lines.append(f"{claim['verdict']} claim: {_quoted(claim.get('claim'))}" + (f" ({reason})" if reason else ""))
    return lines[:EVIDENCE_ITEMS] + _more(len(lines), EVIDENCE_ITEMS, "claim(s)")


_EVIDENCE: dict[str, Callable[[Mapping[str, Any]], list[str]]] = {
    "grounding": _grounding_lines,
    "schema_violation": _schema_lines,
    "tool_facts": _schema_lines,  # the same violations shape: a message per finding
    "tool_outcome": _tool_outcome_lines,
    "contradiction": _contradiction_lines,
    "confidence": _confidence_lines,
    "span_model": _span_model_lines,
    "self_consistency": _self_consistency_lines,
    "claims": _claims_lines,
}


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
    return {"type": "mrkdwn", "text": _clip(text, limit)}


def _header(text: str) -> dict[str, Any]:
    return {"type": "header", "text": {"type": "plain_text", "text": _clip(text, SLACK_HEADER_CHARS)}}


def _footer(config: AlertingSettings, *parts: str) -> dict[str, Any]:
    links = [*parts, _slack_link(config.dashboard_url, "Dashboard")] if config.dashboard_url else list(parts)
    return {"type": "context", "elements": [_mrkdwn(" · ".join(links) or "halluwatch")]}


def slack_text(alert: Alert, config: AlertingSettings) -> str:
    """The message's fallback text (notifications, screen readers): headline and trace id."""
    return escape_mrkdwn(f"{alert.headline} (trace {alert.trace_id})")


def _button(text: str, action_id: str, value: str, **style: str) -> dict[str, Any]:
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
        _button("Confirmed hallucination", CONFIRM_ACTION, value, style="danger"),
        _button("False alarm", FALSE_ALARM_ACTION, value),
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
    """Plain text summarising alerts sent together: the count, then one line per alert."""
    lines = [f"- {alert.headline} (trace {alert.trace_id})" for alert in alerts[:DIGEST_LINES]]
    return "\n".join([_digest_title(route, alerts), *lines, *_more(len(alerts), DIGEST_LINES, "alert(s)")])


def _pack(lines: Iterable[str], limit: int) -> list[str]:
    """Join lines into as few texts of at most ``limit`` characters as possible."""
    texts: list[str] = []
    for line in lines:
        if texts and len(texts[-1]) + 1 + len(line) <= limit:
            texts[-1] += "\n" + line
        else:
            texts.append(_clip(line, limit))
    return texts


def _digest_links(trace_id: str, config: AlertingSettings) -> str:
    return ", ".join([_trace_mrkdwn(trace_id, config), *_triage_mrkdwn(trace_id, config)])


def digest_blocks(route: str, alerts: Sequence[Alert], config: AlertingSettings) -> list[dict[str, Any]]:
    """Block Kit for a digest: the count, one line per alert (headline, trace and triage links), then "+N more"."""
    lines = [
        f"• {escape_mrkdwn(_clip(alert.headline, SLACK_HEADER_CHARS))} ({_digest_links(alert.trace_id, config)})"
        for alert in alerts[:DIGEST_LINES]
    ]
    lines += _more(len(alerts), DIGEST_LINES, "alert(s)")
    sections = [{"type": "section", "text": _mrkdwn(text)} for text in _pack(lines, SLACK_TEXT_CHARS)]
    return [_header(_digest_title(route, alerts)), *sections, _footer(config)]


# --- PagerDuty and the log ----------------------------------------------------------------


def pagerduty_event(alert: Alert, config: AlertingSettings, routing_key: str) -> dict[str, Any]:
    """An Events API v2 ``trigger``; the alert id is the dedup key, so re-sending is harmless."""
    payload: dict[str, Any] = {
        "summary": _clip(alert.headline, PAGERDUTY_SUMMARY_CHARS),
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
        "summary": _clip(note.headline, PAGERDUTY_SUMMARY_CHARS),
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
