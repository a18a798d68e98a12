"""Shared fixtures: a real Tansu broker and embedded ClickHouse, started by the tests.

A broker that cannot start fails the tests that need it; nothing here skips.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from clickhouse_connect.driver.client import Client

from pipeline.broker import TansuBroker
from pipeline.storage import connect


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
