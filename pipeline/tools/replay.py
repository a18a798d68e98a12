"""Trace and log files in the OpenTelemetry Collector's file exporter formats, and replaying them to Kafka.

The collector's ``file`` exporter writes either OTLP/JSON, one ``TracesData`` (or, in a
logs pipeline, ``LogsData``) per line (``format: json``, hex ids), or protobuf messages each
preceded by its length as a
4-byte big-endian unsigned integer (``format: proto``; see ``exportMessageAsBuffer`` in
opentelemetry-collector-contrib ``exporter/fileexporter/file_writer.go``).  The two are
told apart by the first byte: a JSON line starts with ``{``, while a length prefix would
need a message of 2 GB to start with that byte.  Whole-file gzip (``.gz``, detected by its
magic bytes) is read and written transparently; the exporter's own zstd compression is
not supported (it needs a library the project does not depend on).

:func:`replay` produces traces or logs to Kafka the way the collector's kafka exporter does,
so tests and demos exercise the same input as production.
"""

from __future__ import annotations

import gzip
import io
import itertools
import os
import struct
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from confluent_kafka import KafkaError, KafkaException, Message, Producer
from opentelemetry.proto.logs.v1.logs_pb2 import LogsData
from opentelemetry.proto.trace.v1.trace_pb2 import TracesData
from tqdm import tqdm

from pipeline.ingest.otlp_logs import decode_logs, encode_logs_json
from pipeline.ingest.otlp_traces import Encoding, UndecodableMessage, decode_traces, encode_traces_json, split_by_trace
from pipeline.tools.kafka_clients import ConnectionReasons, client_config

_LENGTH = struct.Struct(">I")
_P = TypeVar("_P", TracesData, LogsData)
_GZIP_MAGIC = b"\x1f\x8b"

PathLike = str | os.PathLike[str]
Payload = TracesData | LogsData


class TraceFileError(ValueError):
    """A trace file that cannot be read; the message names the file and the line or offset."""


class ReplayError(RuntimeError):
    """Traces could not be delivered to Kafka (broker unreachable, delivery failed or timed out)."""


def _open_write(path: PathLike) -> io.BufferedIOBase:
    if Path(path).suffix == ".gz":
        return gzip.open(path, "wb")
    return open(path, "wb")


def read_file(path: PathLike) -> Iterator[TracesData]:
    """Yield the ``TracesData`` of a file exporter file, JSON lines or length-prefixed protobuf.

    Raises :class:`TraceFileError` naming the file and the line (JSON) or byte offset
    (protobuf) of the first record that is truncated or does not decode; when that is the
    file's first record, it says the file is no OTLP file at all.
    """
    return _read(path, decode_traces)


def read_logs_file(path: PathLike) -> Iterator[LogsData]:
    """Yield the ``LogsData`` of a logs pipeline's file exporter file, like :func:`read_file`."""
    return _read(path, decode_logs)


class _BadRecord(Exception):
    """A record of a file that does not decode: where (line or offset), and why."""

    def __init__(self, where: str, reason: str) -> None:
        super().__init__(f"{where}: {reason}")


def _read(path: PathLike, decode: Callable[[bytes, Encoding], _P]) -> Iterator[_P]:
    read = 0
    with open(path, "rb") as raw:
        stream: io.BufferedReader | gzip.GzipFile = raw
        if raw.peek(2)[:2] == _GZIP_MAGIC:
            stream = gzip.GzipFile(fileobj=raw)
        try:
            reader = _read_json_lines if stream.peek(1)[:1] == b"{" else _read_proto
            for payload in reader(stream, decode):
                yield payload
                read += 1
        except (OSError, EOFError) as exc:  # gzip.BadGzipFile is an OSError
            raise TraceFileError(f"{path}: damaged compressed stream: {exc}") from exc
        except _BadRecord as exc:
            if read:
                raise TraceFileError(f"{path}: {exc}") from exc
            # Not one record reads: another kind of file, not a damaged one.
            raise TraceFileError(
                f"{path}: not an OTLP file (the collector file exporter's JSON lines or length-prefixed "
                f"protobuf): {exc}"
            ) from exc


def _read_json_lines(stream: io.BufferedIOBase, decode: Callable[[bytes, Encoding], _P]) -> Iterator[_P]:
    for line_number, line in enumerate(stream, 1):
        if not line.strip():
            continue
        try:
            yield decode(line, Encoding.OTLP_JSON)
        except UndecodableMessage as exc:
            raise _BadRecord(f"line {line_number}", exc.reason) from exc


def _read_proto(stream: io.BufferedIOBase, decode: Callable[[bytes, Encoding], _P]) -> Iterator[_P]:
    offset = 0
    while prefix := stream.read(_LENGTH.size):
        where = f"offset {offset}"
        if len(prefix) < _LENGTH.size:
            raise _BadRecord(where, f"truncated length prefix ({len(prefix)} of 4 bytes)")
        (length,) = _LENGTH.unpack(prefix)
        payload = stream.read(length)
        if len(payload) < length:
            raise _BadRecord(where, f"truncated message ({len(payload)} of {length} bytes)")
        try:
            yield decode(payload, Encoding.OTLP_PROTO)
        except UndecodableMessage as exc:
            raise _BadRecord(where, exc.reason) from exc
        offset += _LENGTH.size + length


def write_json_lines(path: PathLike, payloads: Iterable[Payload]) -> int:
    """Write OTLP/JSON lines as the file exporter's ``format: json`` does; return the line count."""
    count = 0
    with _open_write(path) as out:
        for batch in payloads:
            out.write(_encode_json(batch) + b"\n")
            count += 1
    return count


def write_proto(path: PathLike, payloads: Iterable[Payload]) -> int:
    """Write length-prefixed protobuf as the file exporter's ``format: proto`` does; return the count."""
    count = 0
    with _open_write(path) as out:
        for batch in payloads:
            payload = batch.SerializeToString()
            out.write(_LENGTH.pack(len(payload)) + payload)
            count += 1
    return count


def _encode_json(payload: Payload) -> bytes:
    return encode_traces_json(payload) if isinstance(payload, TracesData) else encode_logs_json(payload)


@dataclass(frozen=True, slots=True)
class ReplayStats:
    """What one :func:`replay` delivered: messages, spans, bytes of message values, wall seconds, log records."""

    messages: int
    spans: int
    bytes: int
    seconds: float
    log_records: int = 0
    oldest_span_ns: int | None = None  # the earliest span start produced (Unix ns); None without spans


class _Deliveries:
    """Delivery-report bookkeeping; librdkafka calls ``report`` from ``poll``/``flush``."""

    def __init__(self) -> None:
        self.failed = 0
        self.first_error: KafkaError | None = None

    def report(self, error: KafkaError | None, _message: Message) -> None:
        if error is not None:
            self.failed += 1
            self.first_error = self.first_error or error


def _span_count(payload: Payload) -> int:
    if isinstance(payload, LogsData):
        return 0
    return sum(len(scope.spans) for resource in payload.resource_spans for scope in resource.scope_spans)


def _oldest_start(payload: Payload) -> int | None:
    if isinstance(payload, LogsData):
        return None
    starts = [span.start_time_unix_nano for r in payload.resource_spans for s in r.scope_spans for span in s.spans]
    return min(starts, default=None)


def _log_record_count(payload: Payload) -> int:
    if isinstance(payload, TracesData):
        return 0
    return sum(len(scope.log_records) for resource in payload.resource_logs for scope in resource.scope_logs)


def _messages(batch: Payload, keyed: bool) -> list[tuple[bytes | None, Payload]]:
    """Split like ``partition_traces_by_id``: one message per trace keyed by hex trace id.

    Logs are never split: the collector's logs exporter sends each batch unkeyed.
    """
    if not keyed or isinstance(batch, LogsData):
        return [(None, batch)]
    return [(trace_id.encode(), part) for trace_id, part in split_by_trace(batch).items()]


def replay(
    traces: Iterable[Payload],
    *,
    bootstrap: str,
    topic: str,
    encoding: Encoding,
    keyed: bool,
    progress: bool = True,
    total: int | None = None,
    delivery_timeout_seconds: float = 30.0,
    config: Mapping[str, Any] | None = None,
) -> ReplayStats:
    """Produce ``traces`` (or logs) to ``topic`` as the collector's kafka exporter would.

    ``keyed=True`` mimics ``partition_traces_by_id: true``: each batch is split into one
    message per trace, keyed by the hex trace id.  ``keyed=False`` sends each batch as one
    unkeyed message, as is every ``LogsData`` batch.  ``total`` is the expected span count, for the progress bar only.
    ``config`` adds librdkafka settings (SASL, TLS, ...) over the defaults.

    Raises :class:`ReplayError` when the broker cannot be reached or a message is not
    delivered within ``delivery_timeout_seconds``, and :class:`TraceFileError` for a damaged
    file (a file that is not OTLP at all before anything is produced, or connected to);
    production stops at the first failure.
    """
    if delivery_timeout_seconds <= 0:
        raise ValueError(f"delivery_timeout_seconds must be > 0, got {delivery_timeout_seconds}")
    batches = iter(traces)
    first = next(batches, None)  # a file that is not OTLP fails here, before the broker is bothered
    timeout_ms = int(delivery_timeout_seconds * 1000)
    reasons = ConnectionReasons()
    own = {"message.timeout.ms": timeout_ms, "linger.ms": 20, "error_cb": reasons}
    producer = Producer(client_config(bootstrap, own, config or {}))
    try:
        # Fail fast with a clear message instead of letting every message time out.
        producer.list_topics(timeout=delivery_timeout_seconds)
    except KafkaException as exc:
        raise ReplayError(f"Kafka broker at {bootstrap} unreachable: {reasons.said(producer, exc)}") from exc

    deliveries = _Deliveries()
    messages = spans = log_records = value_bytes = 0
    oldest: int | None = None
    started = time.monotonic()
    show = progress and sys.stderr.isatty()
    damaged: TraceFileError | None = None
    with tqdm(total=total, unit="span", unit_scale=True, disable=not show, desc=f"replay {topic}") as bar:
        try:
            for batch in itertools.chain([first] if first is not None else [], batches):
                if deliveries.failed:
                    break
                for key, part in _messages(batch, keyed):
                    value = part.SerializeToString() if encoding is Encoding.OTLP_PROTO else _encode_json(part)
                    _produce(producer, topic, key, value, deliveries)
                    messages += 1
                    value_bytes += len(value)
                batch_spans = _span_count(batch)
                spans += batch_spans
                oldest = min((t for t in (oldest, _oldest_start(batch)) if t is not None), default=None)
                log_records += _log_record_count(batch)
                bar.update(batch_spans)
        except TraceFileError as exc:  # damaged further on: what came before it is delivered, and said so
            damaged = exc
        remaining = producer.flush(delivery_timeout_seconds + 5)
    elapsed = time.monotonic() - started
    if remaining:
        raise ReplayError(f"{remaining} messages to {topic} still undelivered after {delivery_timeout_seconds}s")
    if deliveries.failed:
        raise ReplayError(
            f"{deliveries.failed} of {messages} messages to {topic} failed delivery: {deliveries.first_error}"
        )
    if damaged is not None:
        raise TraceFileError(f"{damaged}; the {messages} messages before it were produced to {topic}") from damaged
    return ReplayStats(messages, spans, value_bytes, elapsed, log_records, oldest)


def _produce(producer: Producer, topic: str, key: bytes | None, value: bytes, deliveries: _Deliveries) -> None:
    """Produce one message, waiting for room when librdkafka's local queue is full."""
    while True:
        try:
            producer.produce(topic, value=value, key=key, on_delivery=deliveries.report)
        except BufferError:
            producer.poll(0.1)
            continue
        producer.poll(0)
        return
