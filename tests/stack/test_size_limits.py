"""Message size limits on the real stack: the collector's ``max_message_bytes`` and the broker's ``message.max.bytes``.

Random (incompressible) text, so zstd cannot bring a value under a limit. On a broker of its
own: the traces it leaves on the collector's topic would otherwise reach the workers of
whichever stack test runs next on the session's broker.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from confluent_kafka import Consumer as KafkaConsumer
from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from pipeline.tools.demo_broker import free_port
from tests.stack.collector import CONFIG, Addresses, CollectorProcess
from tests.stack.kafka import KafkaBroker, kafka_jars

MIB = 1 << 20
COLLECTOR_LIMIT = yaml.safe_load(CONFIG.read_text())["exporters"]["kafka"]["producer"]["max_message_bytes"]
TOPIC = yaml.safe_load(CONFIG.read_text())["exporters"]["kafka"]["traces"]["topic"]


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    """A broker of this module's own (it shadows the session's), stopped at the module's end."""
    with KafkaBroker(kafka_jars(), tmp_path_factory.mktemp("kafka-size-limits")) as broker:
        yield broker


def _messages(kafka: KafkaBroker, topic: str) -> int:
    consumer = KafkaConsumer({"bootstrap.servers": kafka.bootstrap, "group.id": "size-limits"})
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in partitions)
    finally:
        consumer.close()


def _send_prompt(http_port: int, prompt_bytes: int) -> None:
    """One LLM span whose prompt is ``prompt_bytes`` of random text, exported over OTLP/HTTP."""
    provider = TracerProvider()
    provider.add_span_processor(
        SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"http://127.0.0.1:{http_port}/v1/traces"))
    )
    with provider.get_tracer("size-limits").start_as_current_span("chat gpt-4o-mini") as span:
        span.set_attribute("gen_ai.operation.name", "chat")
        span.set_attribute("gen_ai.input.messages", secrets.token_urlsafe(prompt_bytes * 3 // 4))
    provider.shutdown()


def _until(done, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if done():
                return True
        except KafkaException:  # a topic the collector just created has no leader for a moment
            pass
        time.sleep(0.5)
    return False


@pytest.mark.timeout(300)
def test_collector_sends_under_its_limit_and_refuses_over_it(kafka: KafkaBroker, otelcol: Path, tmp_path: Path):
    addresses = Addresses(kafka.bootstrap, free_port(), free_port(), free_port())
    with CollectorProcess(otelcol, addresses, tmp_path / "collector.log") as collector:
        _send_prompt(addresses.otlp_http_port, COLLECTOR_LIMIT - MIB)  # under: reaches Kafka
        assert _until(lambda: TOPIC in _topics(kafka) and _messages(kafka, TOPIC) == 1, 60), collector.log()
        # Over: refused by the exporter for good (a permanent error, not retried) and dropped.
        _send_prompt(addresses.otlp_http_port, COLLECTOR_LIMIT + MIB // 2)
        refused = "larger than configured Producer.MaxMessageBytes"
        assert _until(lambda: refused in collector.log() and '"dropped_items": 1' in collector.log(), 60)
        assert _messages(kafka, TOPIC) == 1


def _topics(kafka: KafkaBroker) -> set[str]:
    consumer = KafkaConsumer({"bootstrap.servers": kafka.bootstrap, "group.id": "size-limits"})
    try:
        return set(consumer.list_topics(timeout=10).topics)
    finally:
        consumer.close()


def test_broker_takes_the_limit_plus_overhead_and_refuses_more(kafka: KafkaBroker):
    """``message.max.bytes`` 8454144: the collector's 8 MiB plus 64 KiB, on every topic (compose)."""
    limit = int(kafka.properties["message.max.bytes"])
    assert limit == COLLECTOR_LIMIT + 64 * 1024
    topic = f"size-{secrets.token_hex(4)}"
    results: list[KafkaError | None] = []
    producer = Producer({"bootstrap.servers": kafka.bootstrap, "message.max.bytes": 2 * limit,
                         "compression.type": "none", "message.timeout.ms": 30000})  # fmt: skip
    for size in (limit - 4 * 1024, limit + 4 * 1024):  # a record batch adds some 70 bytes to a value
        producer.produce(topic, value=secrets.token_bytes(size), on_delivery=lambda error, _: results.append(error))
        producer.flush(60)
    assert results[0] is None, results[0]
    assert results[1] is not None and results[1].code() == KafkaError.MSG_SIZE_TOO_LARGE, results[1]
