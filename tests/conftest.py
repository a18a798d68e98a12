"""Shared fixtures: a real Tansu broker and embedded ClickHouse, started by the tests.

A broker that cannot start fails the tests that need it; nothing here skips.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from clickhouse_connect.driver.client import Client

from detectors.config import EmbeddingConfig
from detectors.models.embeddings import Embedder
from pipeline.sinks.clickhouse import connect
from pipeline.tools.demo_broker import TansuBroker

MODEL_CACHE_ENV = "HALLUWATCH_MODEL_CACHE"  # Settings.model_cache
# Variables of the caller's shell that would point the code under test at their own setup: an
# operator's HALLUWATCH_CLICKHOUSE_DSN is production. Tests set what each needs themselves.
CALLERS_PREFIXES = ("HALLUWATCH_", "OTEL_", "HF_", "TRANSFORMERS_", "SENTENCE_TRANSFORMERS_")
# Switches of the test targets themselves, not settings: `make test-llm` sets this one (tests/llm/conftest.py).
TEST_SWITCHES = frozenset({"HALLUWATCH_LLM_TEST"})


def pytest_configure(config: pytest.Config) -> None:
    """Start from an environment without the caller's halluwatch, OpenTelemetry and model-hub settings."""
    for name in [name for name in os.environ if name.startswith(CALLERS_PREFIXES) and name not in TEST_SWITCHES]:
        del os.environ[name]
    os.environ["HF_HUB_OFFLINE"] = "1"  # no model hub is reachable: models load from their packages


@pytest.fixture(scope="session", autouse=True)
def model_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One ONNX export cache for the session, inherited by every worker process a test starts."""
    path = tmp_path_factory.getbasetemp() / "models"
    previous = os.environ.get(MODEL_CACHE_ENV)
    os.environ[MODEL_CACHE_ENV] = str(path)
    yield path
    if previous is None:
        del os.environ[MODEL_CACHE_ENV]
    else:
        os.environ[MODEL_CACHE_ENV] = previous


@pytest.fixture(scope="session")
def exported_model(model_cache_dir: Path) -> None:
    """Export the default embedding model once, before tests start worker processes that load it."""
    Embedder(EmbeddingConfig(cache_dir=model_cache_dir)).load()


@pytest.fixture(scope="session")
def tansu(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TansuBroker]:
    """One Tansu broker for the session, on a free loopback port."""
    log = tmp_path_factory.mktemp("tansu") / "tansu.log"
    with TansuBroker(log_path=log) as broker:
        yield broker


@pytest.fixture
def topic_prefix() -> str:
    """Fresh topic names per test: the session broker is shared."""
    return f"t{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="session")
def chdb_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The one embedded ClickHouse directory this test process opens (chDB allows one at a time)."""
    return tmp_path_factory.mktemp("chdb") / "clickhouse"


@pytest.fixture
def clickhouse(chdb_path: Path) -> Iterator[tuple[Client, str]]:
    """An embedded ClickHouse client and a random database name for this test."""
    client = connect(f"chdb://{chdb_path}")
    database = f"hw_{uuid.uuid4().hex[:8]}"
    yield client, database
    client.command(f"DROP DATABASE IF EXISTS {database}")
    client.close()
