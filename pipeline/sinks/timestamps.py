"""Timestamps read back from ClickHouse's UTC columns."""

from __future__ import annotations

from datetime import UTC, datetime


def as_utc(moment: datetime) -> datetime:
    """``moment`` as an aware UTC datetime: a naive one is read as UTC (embedded chDB hands UTC columns back naive)."""
    return moment.astimezone(UTC) if moment.tzinfo else moment.replace(tzinfo=UTC)
