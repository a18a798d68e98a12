from __future__ import annotations

import struct
import time
import uuid

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Message, TopicPartition
from opentelemetry.proto.trace.v1.trace_pb2 import TracesData

from pipeline.broker import free_port
from pipeline.examples import example_traces
from pipeline.otlp import Encoding, decode_traces, iter_spans
from pipeline.replay import ReplayError, TraceFileError, read_file, replay, write_json_lines, write_proto

WRITERS = {"json": write_json_lines, "proto": write_proto}


@pytest.fixture(scope="module")
def traces() -> list[TracesData]:
    return example_traces()


@pytest.mark.parametrize("suffix", ["", ".gz"])
@pytest.mark.parametrize("fmt", sorted(WRITERS))
def test_round_trip_is_byte_identical(tmp_path, traces, fmt, suffix):
    path = tmp_path / f"traces.{fmt}{suffix}"
    assert WRITERS[fmt](path, traces) == len(traces)
    back = list(read_file(path))
    assert [t.SerializeToString() for t in back] == [t.SerializeToString() for t in traces]


def test_format_is_detected_from_content_not_name(tmp_path, traces):
    write_proto(tmp_path / "looks.json", traces[:2])
    write_json_lines(tmp_path / "looks.bin", traces[:2])
    assert list(read_file(tmp_path / "looks.json")) == traces[:2]
    assert list(read_file(tmp_path / "looks.bin")) == traces[:2]


def test_json_lines_are_what_the_file_exporter_writes(tmp_path, traces):
    path = tmp_path / "traces.json"
    write_json_lines(path, traces[:1])
    line = path.read_bytes()
    assert line.startswith(b'{"resourceSpans"') and line.endswith(b"}\n") and line.count(b"\n") == 1
    assert traces[0].resource_spans[0].scope_spans[0].spans[0].trace_id.hex().encode() in line


def test_proto_records_are_length_prefixed_big_endian(tmp_path, traces):
    path = tmp_path / "traces.bin"
    write_proto(path, traces[:1])
    data = path.read_bytes()
    (length,) = struct.unpack(">I", data[:4])
    assert data[4:] == traces[0].SerializeToString() and length == len(data) - 4


def test_empty_file_has_no_traces(tmp_path):
    (tmp_path / "empty").write_bytes(b"")
    assert list(read_file(tmp_path / "empty")) == []


def test_blank_lines_are_skipped(tmp_path, traces):
    path = tmp_path / "traces.json"
    write_json_lines(path, traces[:2])
    path.write_bytes(path.read_bytes().replace(b"}\n", b"}\n\n", 1))
    assert list(read_file(path)) == traces[:2]


def test_corrupted_json_line_names_file_and_line(tmp_path, traces):
    path = tmp_path / "traces.json"
    write_json_lines(path, traces[:3])
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(lines[0] + b'{"resourceSpans": [oops\n' + lines[2])
    reader = read_file(path)
    assert next(reader) == traces[0]
    with pytest.raises(TraceFileError, match=rf"{path}: line 2: "):
        next(reader)


@pytest.mark.parametrize(("cut", "message"), [(2, "truncated length prefix"), (40, "truncated message")])
def test_truncated_proto_names_file_and_offset(tmp_path, traces, cut, message):
    path = tmp_path / "traces.bin"
    write_proto(path, traces[:2])
    data = path.read_bytes()
    first_record = 4 + len(traces[0].SerializeToString())
    path.write_bytes(data[: first_record + cut])
    with pytest.raises(TraceFileError, match=rf"{path}: offset {first_record}: {message}"):
        list(read_file(path))


def test_undecodable_proto_record(tmp_path):
    path = tmp_path / "garbage.bin"
    path.write_bytes(struct.pack(">I", 8) + b"garbage!")
    with pytest.raises(TraceFileError, match="offset 0: not an OTLP protobuf TracesData"):
        list(read_file(path))


def test_damaged_gzip_is_a_trace_file_error(tmp_path, traces):
    path = tmp_path / "traces.json.gz"
    write_json_lines(path, traces)
    path.write_bytes(path.read_bytes()[:-30])
    with pytest.raises(TraceFileError, match="damaged compressed stream"):
        list(read_file(path))


# --- replay against the real Tansu broker of tests/conftest.py (fails, never skips, without it) ---


def batches(traces: list[TracesData], size: int) -> list[TracesData]:
    """Merge traces into mixed batches, as a collector without partition_traces_by_id sends them."""
    out = []
    for start in range(0, len(traces), size):
        batch = TracesData()
        for payload in traces[start : start + size]:
            batch.resource_spans.extend(payload.resource_spans)
        out.append(batch)
    return out


def consume_all(bootstrap: str, topic: str, expected: int, timeout_seconds: float = 30) -> list[Message]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"g{uuid.uuid4().hex[:8]}", "enable.auto.commit": False}
    )
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        messages: list[Message] = []
        deadline = time.monotonic() + timeout_seconds
        while len(messages) < expected and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None:
                assert message.error() is None, message.error()
                messages.append(message)
        return messages
    finally:
        consumer.close()


def spans_by_id(payloads: list[TracesData]) -> dict[bytes, bytes]:
    return {sc.span.span_id: sc.span.SerializeToString() for p in payloads for sc in iter_spans(p)}


@pytest.mark.integration
@pytest.mark.parametrize("encoding", list(Encoding))
def test_replay_keyed_sends_one_message_per_trace_keyed_by_hex_id(tansu, topic_prefix, traces, encoding):
    topic = f"{topic_prefix}-spans"
    mixed = batches(traces, 4)
    stats = replay(mixed, bootstrap=tansu.bootstrap, topic=topic, encoding=encoding, keyed=True, progress=False)
    assert stats.messages == len(traces)
    assert stats.spans == sum(len(list(iter_spans(t))) for t in traces)
    messages = consume_all(tansu.bootstrap, topic, stats.messages)
    assert len(messages) == len(traces)
    assert sum(len(m.value()) for m in messages) == stats.bytes
    decoded = []
    for message in messages:
        payload = decode_traces(message.value(), encoding)
        assert {sc.trace_id for sc in iter_spans(payload)} == {message.key().decode()}
        decoded.append(payload)
    assert spans_by_id(decoded) == spans_by_id(traces)


@pytest.mark.integration
def test_replay_unkeyed_sends_each_batch_as_one_message(tansu, topic_prefix, traces):
    topic = f"{topic_prefix}-spans"
    mixed = batches(traces, 4)
    stats = replay(
        mixed, bootstrap=tansu.bootstrap, topic=topic, encoding=Encoding.OTLP_JSON, keyed=False, progress=False
    )
    assert stats.messages == len(mixed)
    messages = consume_all(tansu.bootstrap, topic, stats.messages)
    assert all(m.key() is None for m in messages)
    received = sorted(decode_traces(m.value(), Encoding.OTLP_JSON).SerializeToString() for m in messages)
    assert received == sorted(b.SerializeToString() for b in mixed)


def test_replay_to_an_unreachable_broker_fails_fast(traces):
    started = time.monotonic()
    with pytest.raises(ReplayError, match="unreachable"):
        replay(
            traces,
            bootstrap=f"127.0.0.1:{free_port()}",
            topic="spans",
            encoding=Encoding.OTLP_PROTO,
            keyed=True,
            progress=False,
            delivery_timeout_seconds=2,
        )
    assert time.monotonic() - started < 10
