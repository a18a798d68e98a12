"""Decoding logs payloads made by the real SDK and OTLP encoder; picking out GenAI records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.logs.v1.logs_pb2 import LogsData

from pipeline.ingest.otlp_logs import GenAIRecord, decode_logs, encode_logs_json, genai_records
from pipeline.ingest.otlp_traces import Encoding, UndecodableMessage, decode_traces, iter_spans
from pipeline.tools.replay import TraceFileError, read_logs_file, write_json_lines, write_proto
from tests.genai_logs import QUESTION, Telemetry, deprecated_events, details_event


def _recorded() -> tuple[bytes, bytes]:
    telemetry = Telemetry()
    with telemetry.chat_span():
        deprecated_events(telemetry)
        telemetry.logger.emit(body="retrying request", attributes={"http.status": 503})  # an app log line
    with telemetry.chat_span():
        details_event(telemetry)
    telemetry.event("gen_ai.user.message", {"content": "outside any span"})  # no span to join
    return telemetry.payloads()


@pytest.mark.parametrize("encoding", [Encoding.OTLP_PROTO, Encoding.OTLP_JSON, None])
def test_genai_records_grouped_by_their_span(encoding: Encoding | None) -> None:
    spans_payload, logs_payload = _recorded()
    if encoding is Encoding.OTLP_JSON:
        logs_payload = encode_logs_json(decode_logs(logs_payload))
    grouped = genai_records(decode_logs(logs_payload, encoding))
    spans = {(ctx.trace_id, ctx.span.span_id.hex()) for ctx in iter_spans(decode_traces(spans_payload))}
    assert set(grouped) == spans
    names = sorted([record.event_name for record in records] for records in grouped.values())
    assert names == [
        ["gen_ai.client.inference.operation.details"],
        ["gen_ai.system.message", "gen_ai.user.message", "gen_ai.choice"],
    ]
    user = next(record for records in grouped.values() for record in records if "user" in record.event_name)
    assert user.body == {"content": QUESTION}
    assert user.attributes == {"gen_ai.system": "openai"}
    assert user.time_unix_nano > 0


@pytest.mark.parametrize("encoding", [Encoding.OTLP_JSON, None])
def test_bare_array_of_resource_logs_reads_as_the_object(encoding: Encoding | None) -> None:
    """Rotel's ``--kafka-exporter-format json``: the ``resourceLogs`` list without its object."""
    _, logs_payload = _recorded()
    document = json.loads(encode_logs_json(decode_logs(logs_payload)))
    logs = decode_logs(json.dumps(document["resourceLogs"]).encode(), encoding)
    assert logs == LogsData.FromString(logs_payload)
    assert len(genai_records(logs)) == 2


def test_otlp_json_ids_are_hex() -> None:
    _, logs_payload = _recorded()
    text = encode_logs_json(decode_logs(logs_payload)).decode()
    trace_id, span_id = next(iter(genai_records(decode_logs(logs_payload))))
    assert f'"traceId":"{trace_id}"' in text and f'"spanId":"{span_id}"' in text


def test_export_request_is_wire_identical_to_logs_data() -> None:
    _, logs_payload = _recorded()
    request = ExportLogsServiceRequest.FromString(logs_payload)
    assert decode_logs(request.SerializeToString()) == LogsData.FromString(logs_payload)


def test_event_name_attribute_and_unnamed_genai_records() -> None:
    """SDKs before the event_name field put it in ``event.name``; some records have gen_ai.* attributes only."""
    telemetry = Telemetry()
    with telemetry.chat_span():
        telemetry.logger.emit(body={"content": "hi"}, attributes={"event.name": "gen_ai.user.message"})
        telemetry.logger.emit(attributes={"gen_ai.prompt": "hi", "other": "x"})
        telemetry.logger.emit(body="not genai", attributes={"event.name": "http.request"})
    (records,) = genai_records(decode_logs(telemetry.payloads()[1])).values()
    assert records == [
        GenAIRecord("gen_ai.user.message", records[0].time_unix_nano, {"content": "hi"}, {}),
        GenAIRecord("", records[1].time_unix_nano, None, {"gen_ai.prompt": "hi"}),
    ]


def test_binary_values_are_dropped_so_records_stay_json() -> None:
    telemetry = Telemetry()
    with telemetry.chat_span():
        telemetry.event("gen_ai.user.message", {"content": "look", "image": b"\x89PNG"})
    (records,) = genai_records(decode_logs(telemetry.payloads()[1])).values()
    assert records[0].body == {"content": "look", "image": None}
    assert GenAIRecord.from_dict(records[0].to_dict()) == records[0]


@pytest.mark.parametrize("value", [b"", b"\x00\xffgarbage", b"{not json", b"[1, 2]"])
def test_garbage_is_undecodable(value: bytes) -> None:
    with pytest.raises(UndecodableMessage) as info:
        decode_logs(value)
    assert info.value.reason


def test_traces_payload_is_not_logs() -> None:
    """A traces message on the logs topic is refused, not misread (field numbers overlap)."""
    spans_payload, _ = _recorded()
    with pytest.raises(UndecodableMessage, match="LogsData"):
        decode_logs(spans_payload)


@pytest.mark.parametrize("name", ["logs.jsonl", "logs.jsonl.gz", "logs.pb"])
def test_collector_logs_files_round_trip(tmp_path: Path, name: str) -> None:
    """The file exporter writes logs like traces: JSON lines of {"resourceLogs": ...} or length-prefixed proto."""
    logs = decode_logs(_recorded()[1])
    path = tmp_path / name
    writer = write_proto if name.endswith(".pb") else write_json_lines
    assert writer(path, [logs, logs]) == 2
    if name == "logs.jsonl":
        assert path.read_text().startswith('{"resourceLogs":')
    assert list(read_logs_file(path)) == [logs, logs]


def test_damaged_logs_file_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "logs.jsonl"
    write_json_lines(path, [decode_logs(_recorded()[1])])
    with path.open("ab") as out:
        out.write(b'{"resourceLogs": [{"scopeLogs": 7}]}\n')
    with pytest.raises(TraceFileError, match="line 2"):
        list(read_logs_file(path))
