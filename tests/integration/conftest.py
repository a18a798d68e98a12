"""Integration-test housekeeping."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.support import kill_leftover_workers


@pytest.fixture(autouse=True)
def no_leftover_workers() -> Iterator[None]:
    """A test that fails mid-run must not leave its `halluwatch worker` behind."""
    yield
    kill_leftover_workers()
