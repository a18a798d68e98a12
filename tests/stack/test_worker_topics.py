"""The worker creates the topics it reads before joining its group (pipeline/worker/topics.py), on Apache Kafka."""

from __future__ import annotations

import uuid

from confluent_kafka.admin import AdminClient

from pipeline.config.settings import Settings
from pipeline.worker.topics import consumed_topics, create_missing_topics
from tests.stack.kafka import KafkaBroker


def test_missing_topics_are_created_with_the_configured_partitions_once(kafka: KafkaBroker):
    prefix = f"t{uuid.uuid4().hex[:8]}"
    names = ("input", "rekeyed", "logs", "log_join", "findings", "alerts", "alerts_retry")
    settings = Settings(
        kafka_bootstrap=kafka.bootstrap,
        kafka_topic_partitions=3,
        **{f"kafka_{name}_topic": f"{prefix}.{name}" for name in names},
        consistency={"topic": f"{prefix}.consistency"},
    )
    wanted = consumed_topics(settings)
    assert len(set(wanted)) == 8 and all(topic.startswith(prefix) for topic in wanted)
    assert sorted(create_missing_topics(settings)) == sorted(wanted)
    topics = AdminClient({"bootstrap.servers": kafka.bootstrap}).list_topics(timeout=10).topics
    assert {len(topics[topic].partitions) for topic in wanted} == {3}
    assert create_missing_topics(settings) == []  # the second worker to start finds them all
