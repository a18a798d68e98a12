"""Retention as ClickHouse TTLs: content columns emptied after ``content_days``, rows deleted after ``days``.

Routing attributes (``llm_calls.attributes``) are not content: ingest keeps only short values of
keys that do not name content, and monitors and rate reports group by them over long windows.
Each table's clock is the call's own time (an alert's: its creation, moments later), so a
replayed old span expires as its original would have.  Expired values become the column's
default (an empty string, an empty map); whole months go as one partition once every row in
it expired.  Verdicts (``labels``), review skips, incidents, silences and the erasure audit
carry no TTL: they are small, hold no model input or output, and are the calibration record.

:func:`apply_retention` compares the settings with what ``retention_applied`` says the tables
carry and, when they differ, modifies every TTL in one ALTER per table (ClickHouse then rewrites
the parts it affects, in the background) and records the new values.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from clickhouse_connect.driver.client import Client

from pipeline.config.retention import RetentionSettings
from pipeline.sinks.ddl import Layout


@dataclass(frozen=True, slots=True)
class ExpiringTable:
    """A table with a TTL: the time column it counts from, and its content columns."""

    name: str
    clock: str
    content: tuple[str, ...]


EXPIRING_TABLES = (
    ExpiringTable("llm_calls", "start_time", ("prompt", "answer", "grounding", "transcript", "logprobs_json")),
    ExpiringTable("findings", "span_start_time", ("summary", "evidence")),
    ExpiringTable("alerts", "created_at", ("summary", "evidence")),
    ExpiringTable("tool_runs", "end_time", ("arguments", "result", "error")),
)


def retention_statements(layout: Layout, retention: RetentionSettings) -> list[str]:
    """One ALTER per expiring table setting its content columns' TTL and its rows' TTL."""
    statements = []
    for table in EXPIRING_TABLES:
        content = f"toDateTime({table.clock}) + INTERVAL {retention.content_seconds} SECOND"
        rows = f"toDateTime({table.clock}) + INTERVAL {retention.row_seconds} SECOND"
        changes = [*(f"MODIFY COLUMN {column} TTL {content}" for column in table.content), f"MODIFY TTL {rows}"]
        statements.append(layout.render(f"ALTER TABLE {{database}}.{table.name} {', '.join(changes)}"))
    return statements


def apply_retention(client: Client, layout: Layout, retention: RetentionSettings) -> str | None:
    """Set the tables' TTLs to ``retention`` unless they carry it already; what changed, or None."""
    wanted = (retention.content_seconds, retention.row_seconds)
    current = applied_retention(client, layout.database)
    if current == wanted:
        return None
    for statement in retention_statements(layout, retention):
        client.command(statement)
    client.insert(
        f"{layout.database}.retention_applied",
        [[*wanted, datetime.now(UTC)]],
        column_names=["content_seconds", "row_seconds", "applied_at"],
    )
    was = f" (was {_described(*current)})" if current else ""
    return f"retention {_described(*wanted)}{was}"


def applied_retention(client: Client, database: str) -> tuple[int, int] | None:
    """The (content, row) seconds the tables' TTLs were last set to; None before the first time."""
    rows = client.query(
        f"SELECT content_seconds, row_seconds FROM {database}.retention_applied ORDER BY applied_at DESC LIMIT 1"  # noqa: S608 - identifier validated
    ).result_rows
    return (int(rows[0][0]), int(rows[0][1])) if rows else None


def _described(content_seconds: int, row_seconds: int) -> str:
    return f"content {_days(content_seconds)}, rows {_days(row_seconds)}"


def _days(seconds: int) -> str:
    if seconds % 864:  # not a round hundredth of a day: a test's seconds
        return f"{seconds} s"
    days = seconds / 86_400
    return f"{days:g} day{'' if days == 1 else 's'}"
