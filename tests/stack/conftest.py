"""The real stack's parts, built or fetched once into ~/.cache/halluwatch/ and started by fixtures."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.stack.collector import collector_binary
from tests.stack.kafka import KafkaBroker, kafka_jars


@pytest.fixture(scope="session")
def otelcol() -> Path:
    """collector-contrib built from infra/collector/builder.yaml (minutes the first time, then cached)."""
    return collector_binary()


@pytest.fixture(scope="session")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    """One Apache Kafka broker for the session, set up as compose's kafka service; stopped at the end."""
    with KafkaBroker(kafka_jars(), tmp_path_factory.mktemp("kafka")) as broker:
        yield broker
