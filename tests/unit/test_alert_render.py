"""Alert rendering: Block Kit, PagerDuty events, log text, evidence lines (docs/operations.md)."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from pipeline.alerting.alert import Alert, DetectorEvidence
from pipeline.alerting.render import (
    CONFIRM_ACTION,
    DIGEST_LINES,
    DIGEST_NAMED,
    FALSE_ALARM_ACTION,
    PAGERDUTY_SUMMARY_CHARS,
    SLACK_HEADER_CHARS,
    SLACK_TEXT_CHARS,
    VERDICT_BLOCK_ID,
    console_text,
    digest_blocks,
    digest_text,
    evidence_lines,
    pagerduty_event,
    slack_blocks,
    slack_text,
)
from pipeline.config.alerting import AlertingSettings

GROUNDING = DetectorEvidence(
    detector="grounding",
    score=0.81,
    threshold=0.6,
    severity=2,
    summary="1 of 2 sentences not supported by any source window (lowest similarity 0.19)",
    evidence={
        "sentences": [
            {
                "start": 0,
                "end": 30,
                "text": "The refund window is 30 days.",
                "similarity": 0.91,
                "best_window": "Refunds are accepted within 30 days.",
                "source_id": "doc-1",
                "grounded": True,
                "cited": False,
            },
            {
                "start": 31,
                "end": 70,
                "text": "Shipping is free to Mars.",
                "similarity": 0.19,
                "best_window": "Shipping is free within the EU.",
                "source_id": "doc-2",
                "grounded": False,
                "cited": False,
            },
        ],
        "ungrounded_count": 1,
        "missing_source_ids": [],
        "spans": [{"start": 31, "end": 70, "text": "Shipping is free to Mars."}],
    },
)
SCHEMA = DetectorEvidence(
    detector="schema_violation",
    score=1.0,
    threshold=0.5,
    severity=3,
    summary="tool 'refund_ordr' is not defined (did you mean 'refund_order'?)",
    evidence={
        "violations": [
            {
                "kind": "unknown_tool",
                "message": "tool 'refund_ordr' is not defined (did you mean 'refund_order'?)",
                "tool": "refund_ordr",
                "suggestion": "refund_order",
            },
            {"kind": "type", "message": "argument 'amount' is a string, expected number", "path": "$.amount"},
        ]
    },
)
CONTRADICTION = DetectorEvidence(
    detector="contradiction",
    score=0.8,
    threshold=0.5,
    severity=4,
    summary="answer states 45 days where the context says 30 days",
    evidence={
        "claims": [
            {"kind": "duration", "text": "7 days", "start": 3, "end": 9, "verdict": "unsupported"},
            {
                "kind": "duration",
                "text": "45 days",
                "start": 20,
                "end": 27,
                "verdict": "conflict",
                "context_text": "30 days",
            },
            {"kind": "money", "text": "$10", "start": 40, "end": 43, "verdict": "supported"},
        ],
        "conflicts": 1,
        "unsupported": 1,
    },
)


def make_alert(*detectors: DetectorEvidence, trace_id: str = "4bf92f3577b34da6a3ce929d0e0e4736") -> Alert:
    return Alert(
        trace_id=trace_id,
        rule="grounding-and-schema",
        route="page",
        severity=3,
        service="support-bot",
        model="gpt-4o-mini",
        operation="chat",
        detectors=detectors or (GROUNDING, SCHEMA),
        created_at=datetime.now(UTC).replace(microsecond=0),  # recent: the alerts table keeps retention.days
    )


def linked_config(**overrides: Any) -> AlertingSettings:
    return AlertingSettings(
        trace_url_template="https://jaeger.example/trace/{trace_id}",
        dashboard_url="https://grafana.example/d/halluwatch",
        **overrides,
    )


def _texts(blocks: list[dict[str, Any]]) -> list[str]:
    """Every text in a Block Kit message."""
    found: list[str] = []
    for block in blocks:
        for text in [block.get("text"), *block.get("fields", []), *block.get("elements", [])]:
            if text:
                found.append(text["text"])
    return found


def test_grounding_lines_show_the_ungrounded_sentence_and_its_best_window() -> None:
    assert evidence_lines(GROUNDING) == [
        'ungrounded sentence (similarity 0.19): "Shipping is free to Mars."',
        'best source window: "Shipping is free within the EU."',
    ]


def test_grounding_lines_name_missing_sources_and_count_the_rest() -> None:
    sentence = {"text": "x", "similarity": 0.5, "grounded": False, "best_window": None}
    evidence = {"sentences": [sentence] * 3, "ungrounded_count": 7, "missing_source_ids": ["doc-9"]}
    lines = evidence_lines(DetectorEvidence("grounding", 1.0, 0.6, 4, "", evidence=evidence))
    assert lines[0] == "cites source doc-9, which the call does not include"
    assert "no source window to compare with" in lines
    assert lines[-1] == "+5 more ungrounded sentence(s)"


def test_schema_lines_list_the_violation_messages_the_summary_does_not() -> None:
    assert evidence_lines(SCHEMA) == ["argument 'amount' is a string, expected number"]
    assert evidence_lines(replace(SCHEMA, summary="2 violations")) == [
        "tool 'refund_ordr' is not defined (did you mean 'refund_order'?)",
        "argument 'amount' is a string, expected number",
    ]


def test_contradiction_lines_show_conflicting_numbers_first() -> None:
    assert evidence_lines(CONTRADICTION) == [
        'answer says "45 days", context says "30 days"',
        'answer says "7 days", not found in the context',
    ]


def test_confidence_lines_show_the_lowest_span() -> None:
    evidence = {
        "mean_entropy": 2.1,
        "z": 3.2,
        "min_token_prob": 0.01,
        "lowest_span": {"text": "Mars", "mean_prob": 0.02},
    }
    confidence = DetectorEvidence("confidence", 0.9, 0.5, 2, "high entropy", evidence=evidence)
    assert evidence_lines(confidence) == ['lowest-confidence span (mean token probability 0.020): "Mars"']


def test_long_lists_and_texts_are_capped() -> None:
    claims = [{"text": "9" * 5000, "verdict": "conflict", "context_text": "1"} for _ in range(12)]
    lines = evidence_lines(DetectorEvidence("contradiction", 1.0, 0.5, 4, "", evidence={"claims": claims}))
    assert len(lines) == 6 and lines[-1] == "+7 more claim(s)"
    assert all(len(line) < 400 for line in lines)


@pytest.mark.parametrize(
    "evidence",
    [
        {},
        {"sentences": "nope", "violations": 3, "claims": [None, 1, "x"], "lowest_span": "x", "spans": {}},
        {"sentences": [{"grounded": False, "text": 5, "similarity": "high"}, {"grounded": False, "text": "t"}]},
        {"sentences": [{"grounded": False, "text": "t", "similarity": float("nan")}], "ungrounded_count": "many"},
        {"missing_source_ids": [None, {"a": 1}, 7], "violations": [{"message": None}, {"kind": ["x"]}]},
        {"claims": [{"text": "1", "verdict": "conflict", "context_text": {"x": 1}}], "lowest_span": {"text": None}},
        {"min_token_prob": True, "spans": [{"text": "s", "probability": "p"}]},
        {"runs": [{"outcome": ["failed"], "tool": None, "reason": 3}, "x"], "spans": [{"text": {"a": 1}}]},
    ],
)
@pytest.mark.parametrize(
    "detector",
    ["grounding", "schema_violation", "contradiction", "confidence", "span_model", "tool_outcome", "unknown"],
)
def test_malformed_evidence_never_breaks_rendering(detector: str, evidence: dict[str, Any]) -> None:
    odd = DetectorEvidence(detector, 0.9, 0.5, 2, "summary <!channel>", evidence=evidence)
    alert = make_alert(odd, GROUNDING)
    config = linked_config()
    assert all(isinstance(line, str) for line in evidence_lines(odd))
    assert "summary" in console_text(alert, config)
    assert slack_blocks(alert, config) and pagerduty_event(alert, config, "key")


def test_tool_outcome_evidence_names_the_claim_and_the_failed_tool() -> None:
    evidence = {
        "runs": [
            {"tool": "search_flights", "outcome": "ok"},
            {"tool": "book_flight", "outcome": "failed", "call_id": "c1", "reason": "error: Card was declined"},
            {"tool": "send_receipt", "outcome": "not_run"},
        ],
        "spans": [{"start": 0, "end": 22, "text": "Your flight is booked."}],
    }
    tool = DetectorEvidence("tool_outcome", 1.0, 0.5, 4, "answer claims book_flight succeeded", evidence=evidence)
    assert evidence_lines(tool) == [
        'answer claims: "Your flight is booked."',
        'tool book_flight failed: "error: Card was declined"',
        "tool send_receipt has no recorded result",
    ]


def test_unknown_detector_renders_its_summary_only() -> None:
    other = DetectorEvidence("sentinel", 0.7, 0.5, 1, "judge says non-factual", evidence={"label": "non-factual"})
    assert evidence_lines(other) == []
    assert "judge says non-factual" in "\n".join(_texts(slack_blocks(make_alert(other, GROUNDING), linked_config())))


def test_slack_blocks_carry_headline_facts_detectors_and_links() -> None:
    alert = make_alert()
    blocks = slack_blocks(alert, linked_config())
    assert blocks[0] == {"type": "header", "text": {"type": "plain_text", "text": alert.headline}}
    fields = [field["text"] for field in blocks[1]["fields"]]
    assert fields == [
        "*Service*\nsupport-bot",
        "*Model*\ngpt-4o-mini",
        "*Operation*\nchat",
        "*Rule*\ngrounding-and-schema",
        "*Route*\npage",
        "*Severity*\n3",
    ]
    grounding, schema = blocks[2]["text"]["text"], blocks[3]["text"]["text"]
    assert grounding.startswith("*grounding*: score 0.81 (threshold 0.60), severity 2")
    assert '• best source window: "Shipping is free within the EU."' in grounding
    assert "• argument 'amount' is a string, expected number" in schema
    footer = blocks[-1]["elements"][0]["text"]
    assert f"<https://jaeger.example/trace/{alert.trace_id}|{alert.trace_id}>" in footer
    assert "<https://grafana.example/d/halluwatch|Dashboard>" in footer


def test_slack_without_links_shows_the_plain_trace_id() -> None:
    alert = make_alert()
    footer = slack_blocks(alert, AlertingSettings())[-1]["elements"][0]["text"]
    assert footer == f"Trace `{alert.trace_id}`"
    assert slack_text(alert, AlertingSettings()) == f"{alert.headline} (trace {alert.trace_id})"


def test_slack_limits_and_escaping() -> None:
    shouting = DetectorEvidence("contradiction", 1.0, 0.5, 4, "<!channel> " + "x" * 10_000, evidence={})
    blocks = slack_blocks(make_alert(shouting, GROUNDING), AlertingSettings())
    assert len(blocks[0]["text"]["text"]) == SLACK_HEADER_CHARS
    assert all(len(text) <= SLACK_TEXT_CHARS for text in _texts(blocks))
    assert "&lt;!channel&gt;" in blocks[2]["text"]["text"] and "<!channel>" not in blocks[2]["text"]["text"]
    assert "<!channel>" not in slack_text(make_alert(shouting), AlertingSettings())


def test_digest_lists_capped_lines_with_trace_links_then_names_the_rest_by_short_trace_id() -> None:
    alerts = [make_alert(trace_id=f"{i:08x}" * 4) for i in range(DIGEST_LINES + 5)]
    blocks = digest_blocks("slack", alerts, linked_config())
    assert blocks[0]["text"]["text"] == f"{DIGEST_LINES + 5} halluwatch alerts on route slack"
    body = "\n".join(_texts(blocks[1:-1]))
    first, rest = alerts[0].trace_id, [alert.trace_id[:8] for alert in alerts[DIGEST_LINES:]]
    assert body.count("• ") == DIGEST_LINES and body.endswith(f"+5 more alert(s), traces {', '.join(rest)}")
    assert f"<https://jaeger.example/trace/{first}|{first}>" in body and alerts[-1].trace_id not in body
    assert all(len(text) <= SLACK_TEXT_CHARS for text in _texts(blocks))
    text = digest_text("slack", alerts)
    assert text.splitlines()[1] == f"- {alerts[0].headline} (trace {first})"
    assert text.splitlines()[-1] == f"+5 more alert(s), traces {', '.join(rest)}"


def test_a_huge_digest_names_as_many_traces_as_a_slack_text_holds_and_counts_the_rest() -> None:
    alerts = [make_alert(trace_id=f"{i:032x}") for i in range(DIGEST_LINES + DIGEST_NAMED + 7)]
    blocks = digest_blocks("slack", alerts, linked_config())
    assert all(len(text) <= SLACK_TEXT_CHARS for text in _texts(blocks))
    assert "\n".join(_texts(blocks[1:-1])).endswith("+7 more alert(s)")


def test_pagerduty_event_is_a_deduplicated_trigger() -> None:
    alert = make_alert()
    event = pagerduty_event(alert, linked_config(), "routing-key")
    assert event["routing_key"] == "routing-key"
    assert event["event_action"] == "trigger"
    assert event["dedup_key"] == alert.alert_id == f"{alert.trace_id}:grounding-and-schema"
    payload = event["payload"]
    assert payload["summary"] == alert.headline
    assert (payload["source"], payload["component"], payload["group"], payload["class"]) == (
        "support-bot",
        "gpt-4o-mini",
        "support-bot",
        "grounding-and-schema",
    )
    assert payload["severity"] == "error"  # severity 3 -> the {2: "error"} entry
    details = payload["custom_details"]
    assert details["detectors"] == ["grounding", "schema_violation"]
    assert details["scores"]["grounding"] == {"score": 0.81, "threshold": 0.6}
    assert 'best source window: "Shipping is free within the EU."' in details["evidence"]["grounding"]
    assert (details["trace_id"], details["operation"]) == (alert.trace_id, "chat")
    assert event["links"] == [
        {"href": f"https://jaeger.example/trace/{alert.trace_id}", "text": f"Trace {alert.trace_id}"},
        {"href": "https://grafana.example/d/halluwatch", "text": "Dashboard"},
    ]


@pytest.mark.parametrize(("severity", "expected"), [(0, "warning"), (1, "warning"), (2, "error"), (4, "critical")])
def test_pagerduty_severity_mapping(severity: int, expected: str) -> None:
    alert = replace(make_alert(), severity=severity)
    assert pagerduty_event(alert, AlertingSettings(), "k")["payload"]["severity"] == expected


def test_pagerduty_event_limits_and_fallbacks() -> None:
    long = DetectorEvidence("grounding", 1.0, 0.6, 2, "y" * 5000, evidence={})
    alert = Alert("t", "r", "page", 2, "", "", "", (long, SCHEMA), datetime(2025, 1, 1, tzinfo=UTC))
    event = pagerduty_event(alert, AlertingSettings(), "k")
    assert len(event["payload"]["summary"]) == PAGERDUTY_SUMMARY_CHARS
    assert event["payload"]["source"] == "halluwatch"
    assert "component" not in event["payload"] and "group" not in event["payload"]
    assert "links" not in event


def test_console_text_reads_like_the_message() -> None:
    alert = make_alert(GROUNDING, CONTRADICTION)
    text = console_text(alert, linked_config())
    assert text.splitlines()[0] == f"ALERT [page / grounding-and-schema, severity 3] {alert.headline}"
    assert "service support-bot, model gpt-4o-mini, operation chat" in text
    assert "contradiction: score 0.80 (threshold 0.50), severity 4: answer states 45 days" in text
    assert '    - answer says "45 days", context says "30 days"' in text
    assert f"trace {alert.trace_id} https://jaeger.example/trace/{alert.trace_id}" in text
    assert "dashboard https://grafana.example/d/halluwatch" in text


TRIAGE_BASE = "http://halluwatch.internal:9464"
SPANNED = (replace(GROUNDING, span_id="00f067aa0ba902b7"), replace(SCHEMA, span_id="00f067aa0ba902b7"))


def _verdict_block(blocks: list[dict[str, Any]]) -> dict[str, Any] | None:
    return next((block for block in blocks if block["type"] == "actions"), None)


def test_slack_alert_with_triage_pages_carries_verdict_buttons_and_links() -> None:
    alert = make_alert(replace(CONTRADICTION, span_id=""), *SPANNED)  # the first detector with a span is judged
    blocks = slack_blocks(alert, linked_config(ui_base_url=TRIAGE_BASE))
    actions = _verdict_block(blocks)
    assert actions is not None and actions["block_id"] == VERDICT_BLOCK_ID
    confirm, false_alarm = actions["elements"]
    assert (confirm["text"]["text"], confirm["action_id"], confirm["style"]) == (
        "Confirmed hallucination",
        CONFIRM_ACTION,
        "danger",
    )
    assert (false_alarm["text"]["text"], false_alarm["action_id"]) == ("False alarm", FALSE_ALARM_ACTION)
    assert "style" not in false_alarm
    for button in (confirm, false_alarm):
        assert json.loads(button["value"]) == {
            "trace_id": alert.trace_id,
            "span_id": "00f067aa0ba902b7",
            "detector": "grounding",
        }
        assert " " not in button["value"]  # compact
    footer = blocks[-1]["elements"][0]["text"]
    assert f"<https://jaeger.example/trace/{alert.trace_id}|{alert.trace_id}>" in footer  # the template wins
    assert f"<{TRIAGE_BASE}/trace/{alert.trace_id}|Triage>" in footer


def test_slack_trace_id_links_to_the_triage_page_without_a_trace_template() -> None:
    alert = make_alert(*SPANNED)
    footer = slack_blocks(alert, AlertingSettings(ui_base_url=TRIAGE_BASE + "/"))[-1]["elements"][0]["text"]
    triage = f"{TRIAGE_BASE}/trace/{alert.trace_id}"
    assert footer == f"Trace <{triage}|{alert.trace_id}> · <{triage}|Triage>"


def test_slack_alert_without_triage_pages_or_spans_has_no_buttons() -> None:
    plain = slack_blocks(make_alert(*SPANNED), linked_config())
    assert _verdict_block(plain) is None
    assert "Triage" not in plain[-1]["elements"][0]["text"]
    spanless = slack_blocks(make_alert(), linked_config(ui_base_url=TRIAGE_BASE))  # nothing to label
    assert _verdict_block(spanless) is None
    assert "|Triage>" in spanless[-1]["elements"][0]["text"]


def test_digest_links_each_alert_to_its_triage_page_without_buttons() -> None:
    alerts = [make_alert(*SPANNED, trace_id=f"trace{i:02}") for i in range(3)]
    blocks = digest_blocks("slack", alerts, linked_config(ui_base_url=TRIAGE_BASE))
    body = "\n".join(_texts(blocks[1:-1]))
    assert f"(<https://jaeger.example/trace/trace01|trace01>, <{TRIAGE_BASE}/trace/trace01|Triage>)" in body
    assert _verdict_block(blocks) is None
    assert "Triage" not in "\n".join(_texts(digest_blocks("slack", alerts, linked_config())))


def test_pagerduty_links_lead_with_the_triage_page() -> None:
    alert = make_alert()
    assert pagerduty_event(alert, linked_config(ui_base_url=TRIAGE_BASE), "k")["links"] == [
        {"href": f"{TRIAGE_BASE}/trace/{alert.trace_id}", "text": "Triage page"},
        {"href": f"https://jaeger.example/trace/{alert.trace_id}", "text": f"Trace {alert.trace_id}"},
        {"href": "https://grafana.example/d/halluwatch", "text": "Dashboard"},
    ]
    assert pagerduty_event(alert, AlertingSettings(ui_base_url=TRIAGE_BASE), "k")["links"] == [
        {"href": f"{TRIAGE_BASE}/trace/{alert.trace_id}", "text": "Triage page"}
    ]


def test_console_text_names_the_triage_page() -> None:
    alert = make_alert()
    assert f"  triage {TRIAGE_BASE}/trace/{alert.trace_id}" in console_text(
        alert, linked_config(ui_base_url=TRIAGE_BASE)
    )
    assert "triage" not in console_text(alert, linked_config())
