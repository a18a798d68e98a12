"""Driving a real `halluwatch worker` process from tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Hashable, Iterable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import clickhouse_connect
from confluent_kafka import OFFSET_BEGINNING, Consumer, Message, Producer, TopicPartition
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.trace.v1.trace_pb2 import TracesData
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from pipeline.sinks.finding import Finding, findings_in_message
from pipeline.tools.demo_broker import free_port
from pipeline.tools.example_traces import EXAMPLE_OUTPUT_SCHEMAS
from tests.servers import AlertingServer

_started: list[subprocess.Popen[bytes]] = []


def kill_leftover_workers() -> None:
    """Kill worker processes a failed test left running (they would hold CPU and chDB locks)."""
    while _started:
        process = _started.pop()
        if process.poll() is None:
            process.kill()
            process.wait(timeout=30)


class WorkerProcess:
    """`halluwatch worker` in a subprocess with its own embedded ClickHouse directory."""

    def __init__(self, bootstrap: str, prefix: str, data_dir: Path, **settings: str) -> None:
        self.group = f"{prefix}-group"
        self.input_topic = f"{prefix}-spans"
        self.rekeyed_topic = f"{prefix}-rekeyed"
        self.findings_topic = f"{prefix}-findings"
        self.dlq_topic = f"{prefix}-dlq"
        self.alerts_topic = f"{prefix}-alerts"
        self.alerts_dlq_topic = f"{prefix}-alerts-dlq"
        self.logs_topic = f"{prefix}-logs"
        self.data_dir = data_dir
        self.metrics_port = free_port()
        self.log_path = data_dir / "worker.log"
        self.env = {
            **os.environ,
            "HALLUWATCH_KAFKA_BOOTSTRAP": bootstrap,
            "HALLUWATCH_KAFKA_GROUP_ID": self.group,
            "HALLUWATCH_KAFKA_INPUT_TOPIC": self.input_topic,
            "HALLUWATCH_KAFKA_REKEYED_TOPIC": self.rekeyed_topic,
            "HALLUWATCH_KAFKA_FINDINGS_TOPIC": self.findings_topic,
            "HALLUWATCH_KAFKA_DLQ_TOPIC": self.dlq_topic,
            "HALLUWATCH_KAFKA_ALERTS_TOPIC": self.alerts_topic,
            "HALLUWATCH_KAFKA_ALERTS_RETRY_TOPIC": f"{prefix}-alerts-retry",
            "HALLUWATCH_KAFKA_ALERTS_DLQ_TOPIC": self.alerts_dlq_topic,
            "HALLUWATCH_KAFKA_LOGS_TOPIC": self.logs_topic,
            "HALLUWATCH_KAFKA_LOG_JOIN_TOPIC": f"{prefix}-log-join",
            "HALLUWATCH_CONSISTENCY__TOPIC": f"{prefix}-consistency",
            "HALLUWATCH_KAFKA_TOPIC_PARTITIONS": "2",
            "HALLUWATCH_KAFKA_SESSION_TIMEOUT_SECONDS": "6",
            "HALLUWATCH_KAFKA_REBALANCE_TIMEOUT_SECONDS": "3",
            "HALLUWATCH_KAFKA_HEARTBEAT_INTERVAL_SECONDS": "1",
            "HALLUWATCH_KAFKA_COMMIT_INTERVAL_SECONDS": "0.5",
            "HALLUWATCH_DATA_DIR": str(data_dir),
            "HALLUWATCH_METRICS_PORT": str(self.metrics_port),
            # Nested settings use "__": alerting__slack_bot_token -> HALLUWATCH_ALERTING__SLACK_BOT_TOKEN.
            **{f"HALLUWATCH_{key.upper()}": value for key, value in settings.items()},
        }
        self.process: subprocess.Popen[bytes] | None = None
        self.code: Path | None = None  # another code tree to run (a bench's baseline commit)

    @property
    def clickhouse_dsn(self) -> str:
        return f"chdb://{(self.data_dir / 'clickhouse').resolve()}"

    def start(self) -> WorkerProcess:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            # `python -m` puts its working directory first on the path: the tree's, so its code runs.
            env = self.env if self.code is None else {**self.env, "PYTHONPATH": str(self.code)}
            self.process = subprocess.Popen(
                [sys.executable, "-m", "pipeline.cli", "worker"], env=env, stdout=log, stderr=log, cwd=self.code
            )
        _started.append(self.process)
        return self

    def stop(self, sig: int = signal.SIGTERM, timeout_seconds: float = 60) -> int:
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            return self.process.wait(timeout=timeout_seconds)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise AssertionError(f"worker did not stop on {sig!r}; log:\n{self.log()}") from None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-6000:]

    def metric(self, name: str) -> float:
        """Sum of a Prometheus counter across label sets (0 while the endpoint is not up)."""
        import urllib.request

        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=2) as response:
                text = response.read().decode()
        except OSError:
            return 0.0
        return sum(
            float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line.startswith(name) and not line.startswith("#") and (line[len(name)] in " {")
        )

    def wait_for(self, name: str, at_least: float, timeout_seconds: float = 90) -> None:
        deadline = time.monotonic() + timeout_seconds
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise AssertionError(f"worker exited with {self.process.returncode}; log:\n{self.log()}")
            if self.metric(name) >= at_least:
                return
            time.sleep(0.2)
        self.dump_stacks()
        raise AssertionError(f"{name} stayed below {at_least} ({self.metric(name)}); log:\n{self.log()}")

    def dump_stacks(self) -> None:
        """Have a stuck worker log the stacks of its threads and asyncio tasks (faust's SIGUSR1)."""
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGUSR1)
            time.sleep(3)

    def query(self, sql: str) -> list[tuple[object, ...]]:
        """Query the worker's ClickHouse; only once the worker stopped (chDB locks its directory)."""
        assert self.process is not None and self.process.poll() is not None, "stop the worker first"
        client = clickhouse_connect.get_client(dsn=self.clickhouse_dsn)
        try:
            return [tuple(row) for row in client.query(sql).result_rows]
        finally:
            client.close()


def with_trace_id(trace: TracesData, trace_id: bytes) -> bytes:
    """``trace`` serialized with every span moved to ``trace_id``: a fresh copy of an example."""
    copy = TracesData()
    copy.CopyFrom(trace)
    for resource_spans in copy.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                span.trace_id = trace_id
    return copy.SerializeToString()


def trace_with_document(size: int) -> tuple[str, bytes]:
    """One trace whose LLM span carries a retrieved document of ``size`` characters; (trace id, OTLP bytes)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "archive-search"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with provider.get_tracer("large").start_as_current_span("ChatCompletion") as span:
        span.set_attributes(
            {
                "openinference.span.kind": "LLM",
                "llm.input_messages.0.message.role": "user",
                "llm.input_messages.0.message.content": "When was the tower built?",
                "llm.output_messages.0.message.role": "assistant",
                "llm.output_messages.0.message.content": "It was built from 1887 to 1889.",
                "retrieval.documents.0.document.content": ("The tower was built 1887-1889. " * size)[:size],
            }
        )
        trace_id = format(span.get_span_context().trace_id, "032x")
    return trace_id, encode_spans(exporter.get_finished_spans()).SerializeToString()


def produce(
    bootstrap: str, topic: str, messages: Iterable[tuple[bytes | None, bytes]], max_message_bytes: int = 1_000_000
) -> int:
    """Produce (key, value) pairs and wait for delivery; returns how many were sent."""
    # murmur2: the partitioner of the Java client and of the worker's own producer.
    producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 20000, "partitioner": "murmur2_random",
                         "message.max.bytes": max_message_bytes})  # fmt: skip
    count = 0
    for key, value in messages:
        producer.produce(topic, value=value, key=key)
        count += 1
    assert producer.flush(30) == 0, "messages not delivered"
    return count


def committed_total(bootstrap: str, group: str, topic: str) -> int:
    """Sum of ``group``'s committed offsets over ``topic``: messages it will never see again.

    Offsets start at 0 per partition, so this equals the number of messages consumed for
    good.  (Tansu's high watermarks lag behind multi-record batches, so lag is not
    measured against them.)
    """
    return sum(committed_offsets(bootstrap, group, topic).values())


def committed_offsets(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    """``group``'s committed offset per partition of ``topic`` (0 where nothing is committed)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        partitions = [
            TopicPartition(topic, p) for p in consumer.list_topics(topic, timeout=10).topics[topic].partitions
        ]
        return {tp.partition: max(tp.offset, 0) for tp in consumer.committed(partitions, timeout=10)}
    finally:
        consumer.close()


def wait_until_committed(bootstrap: str, group: str, topic: str, expected: int, timeout_seconds: float = 90) -> None:
    """Wait until ``group`` committed ``expected`` messages of ``topic``: all durably processed.

    (A worker's messages_done counts redeliveries too, so it can pass a total early.)
    """
    deadline = time.monotonic() + timeout_seconds
    while (committed := committed_total(bootstrap, group, topic)) < expected:
        assert time.monotonic() < deadline, f"{group} committed {committed} of {expected} {topic} messages"
        time.sleep(0.5)


def consume_all(bootstrap: str, topic: str, expected: int, timeout_seconds: float = 30) -> list[Message]:
    """Read ``expected`` messages from the start of ``topic``, without joining a group."""
    messages: list[Message] = []
    with closing(_from_start(bootstrap, topic, timeout_seconds)) as reading:
        for message in reading if expected > 0 else ():
            messages.append(message)
            if len(messages) >= expected:
                break
    return messages


def consume_distinct(
    bootstrap: str,
    topic: str,
    expected: int,
    timeout_seconds: float = 30,
    identity: Callable[[Message], Hashable] = lambda message: message.key() or b"",
) -> list[Message]:
    """The first ``expected`` distinct messages of ``topic``, one per ``identity`` (the key by default).

    The pipeline is at least once: a redelivered message is produced again under the same key
    (a dead letter's identity, a re-keyed trace's id), so tests wait for the set they expect.
    """
    letters: dict[Hashable, Message] = {}
    with closing(_from_start(bootstrap, topic, timeout_seconds)) as reading:
        for message in reading if expected > 0 else ():
            letters.setdefault(identity(message), message)
            if len(letters) >= expected:
                break
    return list(letters.values())


def consume_findings(
    bootstrap: str,
    topic: str,
    expected: int,
    timeout_seconds: float = 30,
    identity: Callable[[Finding], Hashable] | None = None,
) -> tuple[list[Message], list[Finding]]:
    """Messages from the start of a findings topic until they hold ``expected`` records; and the records.

    With ``identity``, ``expected`` distinct records, the first of each (redeliveries repeat records).
    """
    messages: list[Message] = []
    records: dict[Hashable, Finding] = {}
    with closing(_from_start(bootstrap, topic, timeout_seconds)) as reading:
        for message in reading if expected > 0 else ():
            messages.append(message)
            for record in findings_in_message(message.value() or b""):
                records.setdefault(len(records) if identity is None else identity(record), record)
            if len(records) >= expected:
                break
    return messages, list(records.values())


def _from_start(bootstrap: str, topic: str, timeout_seconds: float) -> Iterator[Message]:
    """Messages of ``topic`` from its start, without joining a group, until ``timeout_seconds`` pass."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
    partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
    deadline = time.monotonic() + timeout_seconds
    try:
        while time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                yield message
    finally:
        consumer.close()


def alerting_worker_config(server: AlertingServer, **settings: Any) -> dict[str, Any]:
    """Settings (YAML form) of a worker judging the example traces and alerting to ``server``.

    ``settings`` are added; their ``alerting`` is merged over the fake servers' credentials and URLs.
    """
    alerting = {
        "slack_bot_token": "xoxb-test",
        "slack_base_url": server.slack_base_url,
        "pagerduty_routing_key": "pd-routing-key",
        "pagerduty_url": server.pagerduty_url,
        **settings.pop("alerting", {}),
    }
    schemas = {"schema_violation": {"output_schemas": EXAMPLE_OUTPUT_SCHEMAS}}
    return {"detectors": schemas, "alerting": alerting, **settings}
