from __future__ import annotations

import struct
import time

import pytest
from opentelemetry.proto.trace.v1.trace_pb2 import TracesData

from pipeline.ingest.otlp_traces import Encoding
from pipeline.tools.demo_broker import free_port
from pipeline.tools.example_traces import example_traces
from pipeline.tools.replay import ReplayError, TraceFileError, read_file, replay, write_json_lines, write_proto

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


def test_a_file_that_is_not_otlp_says_so(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("not an OTLP file\n")
    with pytest.raises(TraceFileError) as error:
        list(read_file(path))
    assert str(error.value) == (
        f"{path}: not an OTLP file (the collector file exporter's JSON lines or length-prefixed protobuf): "
        "offset 0: truncated message (13 of 1852797984 bytes)"
    )


def test_a_proto_record_of_unknown_fields_only_is_not_a_trace_batch(tmp_path, traces):
    path = tmp_path / "traces.bin"
    write_proto(path, traces[:1])
    foreign = b"\x78\x01"  # field 15, varint 1: parses, as unknown fields only
    path.write_bytes(path.read_bytes() + struct.pack(">I", len(foreign)) + foreign)
    reader = read_file(path)
    assert next(reader) == traces[0]
    with pytest.raises(TraceFileError, match=r"offset \d+: no resource spans in a non-empty payload: not OTLP trace"):
        next(reader)
