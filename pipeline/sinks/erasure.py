"""Erasure on request (``halluwatch erase``): every row of the selected calls' traces, from every table.

A selector names one trace, or an erasable attribute's value (``user.id=U``: settings
``retention.erasable_keys``, kept by the worker in ``llm_calls.erasable``), optionally only for
calls started before a date.  The traces of the matching calls are looked up once; then each
table that holds per-trace rows loses those traces' rows by a synchronous ``ALTER TABLE ...
DELETE`` (a mutation: the parts are rewritten without the rows, rather than the rows only being
hidden, as a lightweight ``DELETE FROM`` would leave them on disk until a merge).  One audit row
per run records who, the selector, and the counts, never content.  A second run finds nothing
left and removes nothing.

What this cannot reach: messages still on Kafka topics (the collector's input topics and
halluwatch's own) until the topics' retention removes them, and findings already sent to an OTLP
endpoint; docs/operations.md says how to bound those.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from clickhouse_connect.driver.client import Client

from pipeline.sinks.ddl import Layout

# Tables with one row per trace, call, detector result, delivery, verdict or skip: all keyed by trace id.
ERASED_TABLES = ("llm_calls", "findings", "alerts", "tool_runs", "labels", "review_skips")
TRACE_SELECTOR = "trace_id"


class ErasureRefused(ValueError):
    """A selector that cannot be erased by (its key is not an erasable attribute)."""


@dataclass(frozen=True, slots=True)
class Selector:
    """What to erase: ``key`` is ``trace_id`` or an erasable attribute key; ``before``: only calls started earlier."""

    key: str
    value: str
    before: datetime | None = None

    def __str__(self) -> str:
        return f"{self.key}={self.value}"


@dataclass(frozen=True, slots=True)
class Erasure:
    """What one run removed: the traces it matched and the rows removed from each table (FINAL counts)."""

    erasure_id: str
    traces: int
    removed: Mapping[str, int] = field(default_factory=dict)


def erase(client: Client, layout: Layout, selector: Selector, erasable_keys: list[str], erased_by: str) -> Erasure:
    """Remove every row of the traces ``selector`` matches from every table, and write the audit row."""
    if selector.key != TRACE_SELECTOR and selector.key not in erasable_keys:
        keys = ", ".join([TRACE_SELECTOR, *erasable_keys])
        raise ErasureRefused(f"{selector.key} is not erasable; erasable: {keys} (settings retention.erasable_keys)")
    traces = _traces(client, layout.database, selector)
    removed = {table: _delete(client, layout, table, traces) for table in ERASED_TABLES}
    erasure = Erasure(uuid.uuid4().hex, len(traces), removed)
    client.insert(
        f"{layout.database}.erasures",
        [[erasure.erasure_id, datetime.now(UTC), erased_by, str(selector), selector.before, len(traces), removed]],
        column_names=["erasure_id", "erased_at", "erased_by", "selector", "before", "traces", "removed"],
    )
    return erasure


def _traces(client: Client, database: str, selector: Selector) -> list[str]:
    """The trace ids of the calls ``selector`` matches (a trace selector with no date: that trace, stored or not)."""
    if selector.key == TRACE_SELECTOR and selector.before is None:
        return [selector.value]
    by_trace = selector.key == TRACE_SELECTOR
    matches = "trace_id = {value:String}" if by_trace else "erasable[{key:String}] = {value:String}"
    before = " AND start_time < {before:DateTime64(6, 'UTC')}" if selector.before else ""
    rows = client.query(
        f"SELECT DISTINCT trace_id FROM {database}.llm_calls WHERE {matches}{before}",  # noqa: S608 - identifier validated, values bound
        parameters={"key": selector.key, "value": selector.value, "before": selector.before},
    ).result_rows
    return sorted(str(row[0]) for row in rows)


def _delete(client: Client, layout: Layout, table: str, traces: list[str]) -> int:
    """Delete ``traces``' rows from ``table``; how many there were (as FINAL reads them)."""
    if not traces:
        return 0
    where = "trace_id IN {traces:Array(String)}"
    count = client.query(
        f"SELECT count() FROM {layout.database}.{table} FINAL WHERE {where}",  # noqa: S608 - identifiers validated, values bound
        parameters={"traces": traces},
    ).result_rows[0][0]
    if count:
        client.command(
            layout.render(f"ALTER TABLE {{database}}.{table} DELETE WHERE {where}"),
            parameters={"traces": traces},
            settings=layout.mutation_settings,
        )
    return int(count)
