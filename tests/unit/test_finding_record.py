"""The findings record: one typed shape inside, the same JSON on the findings topic and row in ClickHouse."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime

import pytest

from detectors.base import DetectorResult
from detectors.verdict import CallVerdict
from pipeline.config.content_policy import ContentPolicy
from pipeline.sinks.finding import MAX_MESSAGE_BYTES, Finding, findings_in_message, findings_messages
from pipeline.sinks.rows import FINDING_COLUMNS, finding_record, finding_row
from tests.calls import make_llm_call

CALL = make_llm_call("The tower is 500 m tall.", "How tall is the tower?")
RESULT = DetectorResult(
    "contradiction", "3", 0.8, True, 0.25, severity=4, summary="500 m vs 330 m", evidence={"claims": [{"text": "500"}]}
)
# The findings topic's JSON keys, in the order consumers have always seen them.
WIRE_KEYS = [
    "trace_id", "span_id", "service", "model", "operation", "policy", "detector", "detector_version",
    "thresholds_version", "status", "score", "threshold", "flagged", "severity", "summary", "evidence",
    "span_start_time_unix_nano", "p_hallucination", "verdict_version",
]  # fmt: skip


def record(verdict: CallVerdict | None = None) -> Finding:
    return finding_record(CALL, RESULT, "builtin-4", ContentPolicy("store"), "medbot", verdict)


def test_the_json_form_keeps_the_wire_keys_and_values():
    wire = json.loads(json.dumps(record().to_json()))
    assert list(wire) == WIRE_KEYS
    assert wire["status"] == "ok" and wire["flagged"] is True and wire["severity"] == 4
    assert (wire["policy"], wire["thresholds_version"], wire["p_hallucination"]) == ("medbot", "builtin-4", None)
    assert wire["evidence"] == {"claims": [{"text": "500"}]}


@pytest.mark.parametrize("verdict", [None, CallVerdict(0.93, "verdict-2")])
def test_a_record_read_back_from_the_topic_is_the_record_written(verdict: CallVerdict | None):
    written = record(verdict)
    assert Finding.from_json(json.loads(json.dumps(written.to_json()))) == written


def test_a_message_holds_one_traces_records_in_order_and_reads_back_whole():
    first, second = record(), record(CallVerdict(0.93, "verdict-2"))
    other = dataclasses.replace(first, trace_id="f" * 32, detector="grounding")
    messages = findings_messages([first, other, second])
    assert [key for key, _ in messages] == [first.trace_id.encode(), other.trace_id.encode()]
    assert [findings_in_message(value) for _, value in messages] == [[first, second], [other]]
    assert [list(wire) for wire in json.loads(messages[0][1])] == [WIRE_KEYS, WIRE_KEYS]


def test_a_trace_with_many_records_takes_several_messages_under_the_limit():
    many = [dataclasses.replace(record(), span_id=f"{i:016x}") for i in range(2_000)]
    messages = findings_messages(many)
    assert len(messages) > 1 and all(len(value) <= MAX_MESSAGE_BYTES for _, value in messages)
    assert [finding for _, value in messages for finding in findings_in_message(value)] == many


def test_a_single_record_object_as_earlier_workers_wrote_it_still_reads():
    written = record()
    assert findings_in_message(json.dumps(written.to_json()).encode()) == [written]


@pytest.mark.parametrize("value", [b"{not json", b"[1, 2]", json.dumps([{"trace_id": "t", "score": "high"}]).encode()])
def test_a_malformed_message_raises_and_returns_no_records(value: bytes):
    with pytest.raises((ValueError, KeyError, TypeError)):
        findings_in_message(value)


def test_the_row_follows_the_table_columns():
    now = datetime(2026, 1, 1, tzinfo=UTC)
    row = dict(zip(FINDING_COLUMNS, finding_row(record(), now), strict=True))
    assert (row["trace_id"], row["detector"], row["score"], row["policy"]) == (
        CALL.trace_id,
        "contradiction",
        0.8,
        "medbot",
    )
    assert json.loads(row["evidence"]) == {"claims": [{"text": "500"}]}
    assert row["span_start_time"] == datetime.fromtimestamp(CALL.start_time_unix_nano / 1e9, tz=UTC)
    assert row["created_at"] == now
