"""Integration-test housekeeping."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from clickhouse_connect.driver.client import Client

from tests.integration.demo_data import fill_with_demo_data
from tests.integration.support import kill_leftover_workers


@pytest.fixture(autouse=True)
def no_leftover_workers() -> Iterator[None]:
    """A test that fails mid-run must not leave its `halluwatch worker` behind."""
    yield
    kill_leftover_workers()


@pytest.fixture
def demo_database(clickhouse: tuple[Client, str], exported_model: None, tmp_path: Path) -> tuple[Client, str]:
    """A test database holding what `halluwatch demo` writes: its example traces through the real detectors."""
    client, database = clickhouse
    fill_with_demo_data(client, database, tmp_path)
    return client, database
