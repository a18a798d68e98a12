"""The topics the worker reads, created before it joins its group.

faust declares them as well, but in the background while the worker joins: on Apache Kafka the
group's first assignment can come before they exist (faust's assignor logs "Ignoring missing
topic"), and a topic created after it (the collector makes ``otlp_spans`` and ``otlp_logs`` on
its first write) is not read until a metadata refresh rebalances the group, up to five minutes
later (aiokafka's ``metadata_max_age_ms``). Found on Apache Kafka 4.1 by tests/stack; Tansu, which
the other tests run on, did not show it.
"""

from __future__ import annotations

import logging

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from pipeline.config.settings import Settings

logger = logging.getLogger(__name__)


def consumed_topics(settings: Settings) -> list[str]:
    """Every topic a worker's stages read: the collector's two and the worker's own."""
    s = settings
    return [s.kafka_input_topic, s.kafka_rekeyed_topic, s.kafka_logs_topic, s.kafka_log_join_topic,
            s.kafka_findings_topic, s.kafka_alerts_topic, s.kafka_alerts_retry_topic, s.consistency.topic]  # fmt: skip


def create_missing_topics(settings: Settings, timeout_seconds: float = 30) -> list[str]:
    """Create the missing :func:`consumed_topics` with ``kafka_topic_partitions`` partitions; the ones made.

    Never fails the start: a broker that refuses (no permission, not up yet) leaves the topics
    to faust's own declaration, with a warning.
    """
    admin = AdminClient({"bootstrap.servers": settings.kafka_bootstrap, **settings.kafka_security.confluent_config()})
    try:
        existing = admin.list_topics(timeout=timeout_seconds).topics
    except KafkaException as exc:
        logger.warning("could not list the Kafka topics to create the missing ones: %s", exc)
        return []
    missing = [topic for topic in dict.fromkeys(consumed_topics(settings)) if topic not in existing]
    if not missing:
        return []
    partitions = settings.kafka_topic_partitions
    created = []
    futures = admin.create_topics([NewTopic(topic, num_partitions=partitions) for topic in missing])
    for topic, future in futures.items():
        try:
            future.result(timeout=timeout_seconds)
            created.append(topic)
        except KafkaException as exc:
            error = exc.args[0]
            if not (isinstance(error, KafkaError) and error.code() == KafkaError.TOPIC_ALREADY_EXISTS):
                logger.warning("could not create topic %s (faust will try): %s", topic, exc)
    if created:
        logger.info("created topics with %d partitions: %s", partitions, ", ".join(created))
    return created
