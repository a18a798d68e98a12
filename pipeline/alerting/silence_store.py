"""Silences in the ClickHouse ``silences`` table (schemas/013_silences.sql): set, expire, list.

The CLI writes them and workers read the active ones.  A silence row is never updated in
place: expiring one early inserts a newer version with ``ends_at`` moved to now, and reads
use ``FINAL``, so two operators expiring the same silence at once both succeed.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any

from clickhouse_connect.driver.client import Client

from pipeline.alerting.silences import Silence
from pipeline.sinks.labels import to_utc_ms
from pipeline.sinks.timestamps import as_utc

_COLUMNS = ["silence_id", "matchers", "reason", "created_by", "starts_at", "ends_at"]


class SilenceStore:
    """The silences of one ClickHouse database."""

    def __init__(self, client: Client, database: str) -> None:
        self._client = client
        self._db = database

    def add(self, silence: Silence) -> Silence:
        """Store a new silence; returns it as stored (times at the column's millisecond precision)."""
        stored = replace(silence, starts_at=to_utc_ms(silence.starts_at), ends_at=to_utc_ms(silence.ends_at))
        self._insert(stored, stored.starts_at)
        return stored

    def expire(self, silence_id: str, now: datetime) -> Silence | None:
        """End a silence at ``now``; returns it as it now stands (unchanged if it had ended), None if unknown."""
        found = self._select("silence_id = {id:String}", {"id": silence_id})
        if not found:
            return None
        (silence,) = found
        if silence.ends_at <= now:
            return silence
        ended = replace(silence, ends_at=to_utc_ms(now))
        self._insert(ended, ended.ends_at)
        return ended

    def listed(self, now: datetime, include_ended: bool = False) -> list[Silence]:
        """Silences in force at ``now`` (with ``include_ended``, every one), ending soonest first."""
        if include_ended:
            return self._select("1", {})
        return self._select("starts_at <= {now:DateTime64(3, 'UTC')} AND ends_at > {now:DateTime64(3, 'UTC')}",
                            {"now": now})  # fmt: skip

    def _insert(self, silence: Silence, updated_at: datetime) -> None:
        row = [getattr(silence, column) for column in _COLUMNS] + [updated_at]
        self._client.insert(f"{self._db}.silences", [row], column_names=[*_COLUMNS, "updated_at"])

    def _select(self, condition: str, params: dict[str, Any]) -> list[Silence]:
        columns = ", ".join(_COLUMNS)
        sql = f"SELECT {columns} FROM {self._db}.silences FINAL WHERE {condition} ORDER BY ends_at, silence_id"  # noqa: S608 - identifiers validated, values bound
        rows = self._client.query(sql, parameters=params).result_rows
        return [_silence(row) for row in rows]


def _silence(row: Any) -> Silence:
    silence_id, matchers, reason, created_by, starts_at, ends_at = row
    return Silence(silence_id, dict(matchers), reason, created_by, as_utc(starts_at), as_utc(ends_at))
