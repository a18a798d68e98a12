"""Erasure on request (``halluwatch erase``): every row of the selected calls' traces, from every table.

A selector names one trace (its whole id, or a prefix of 8 or more characters that names exactly
one stored trace), or an erasable attribute's value (``user.id=U``: settings
``retention.erasable_keys``, kept by the worker in ``llm_calls.erasable``), optionally only for
calls started before a date.  :func:`matched_traces` looks the traces up, so that the command can
show them before anything goes; then :func:`erase` removes each table's rows of those traces by a
synchronous ``ALTER TABLE ... DELETE`` (a mutation: the parts are rewritten without the rows,
rather than the rows only being hidden, as a lightweight ``DELETE FROM`` would leave them on disk
until a merge).  Each table's count is read before and after, so the count reported is what went,
and rows still there afterwards are reported too.  One audit row per run records who, the
selector, and the counts, never content.  A second run finds nothing left and removes nothing.

What this cannot reach: messages still on Kafka topics (the collector's input topics and
halluwatch's own) until the topics' retention removes them, findings already sent to an OTLP
endpoint, and HTML reports already written; docs/operations.md says how to bound those.
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
MIN_PREFIX = 8  # as the trace list's filter: shorter prefixes name too many traces to be meant
_LISTED = 10  # the traces an ambiguous prefix lists before "and N more"


class ErasureRefused(ValueError):
    """A selector that cannot be erased by: its key is not erasable, its trace prefix too short or naming several."""


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
    """What one run removed: the traces it matched, the rows removed from each table and those still there."""

    erasure_id: str
    traces: int
    removed: Mapping[str, int] = field(default_factory=dict)
    left: Mapping[str, int] = field(default_factory=dict)  # tables still holding rows of the traces afterwards


def matched_traces(client: Client, database: str, selector: Selector, erasable_keys: list[str]) -> list[str]:
    """The stored traces ``selector`` names, sorted; ErasureRefused for a key not erasable or an ambiguous prefix."""
    if selector.key != TRACE_SELECTOR:
        if selector.key not in erasable_keys:
            keys = ", ".join([TRACE_SELECTOR, *erasable_keys])
            raise ErasureRefused(f"{selector.key} is not erasable; erasable: {keys} (settings retention.erasable_keys)")
        return _calls_traces(client, database, "erasable[{key:String}] = {value:String}", selector)
    whole = _stored_traces(client, database, "trace_id = {value:String}", selector)
    if whole:
        return whole
    if len(selector.value) < MIN_PREFIX:
        raise ErasureRefused(
            f"trace {selector.value} is no stored trace id, and as a prefix its {len(selector.value)} characters "
            f"are too few: give {MIN_PREFIX} or more (a whole id has 32); nothing was removed"
        )
    by_prefix = _stored_traces(client, database, "startsWith(trace_id, {value:String})", selector)
    if len(by_prefix) > 1:
        listed = ", ".join(by_prefix[:_LISTED]) + (
            f" and {len(by_prefix) - _LISTED} more" if len(by_prefix) > _LISTED else ""
        )
        raise ErasureRefused(
            f"trace prefix {selector.value} names {len(by_prefix)} stored traces: {listed}; "
            "give the whole id of the one to erase (nothing was removed)"
        )
    return by_prefix


def erase(client: Client, layout: Layout, selector: Selector, traces: list[str], erased_by: str) -> Erasure:
    """Remove every row of ``traces`` (what ``selector`` matched) from every table, and write the audit row."""
    counted = {table: _erase_from(client, layout, table, traces) for table in ERASED_TABLES}
    removed = {table: before - after for table, (before, after) in counted.items()}
    left = {table: after for table, (_, after) in counted.items() if after}
    erasure = Erasure(uuid.uuid4().hex, len(traces), removed, left)
    client.insert(
        f"{layout.database}.erasures",
        [[erasure.erasure_id, datetime.now(UTC), erased_by, str(selector), selector.before, len(traces), removed]],
        column_names=["erasure_id", "erased_at", "erased_by", "selector", "before", "traces", "removed"],
    )
    return erasure


def _stored_traces(client: Client, database: str, matches: str, selector: Selector) -> list[str]:
    """The trace ids any erased table holds that ``matches``; with ``before``, those of calls started earlier."""
    if selector.before is not None:  # only llm_calls knows when a call started
        return _calls_traces(client, database, matches, selector)
    union = " UNION ALL ".join(f"SELECT trace_id FROM {database}.{table}" for table in ERASED_TABLES)  # noqa: S608
    rows = client.query(
        f"SELECT DISTINCT trace_id FROM ({union}) WHERE {matches}",  # noqa: S608 - identifiers fixed, values bound
        parameters={"value": selector.value},
    ).result_rows
    return sorted(str(row[0]) for row in rows)


def _calls_traces(client: Client, database: str, matches: str, selector: Selector) -> list[str]:
    """The trace ids of the calls that ``matches`` (and started before ``selector.before``, when given)."""
    before = " AND start_time < {before:DateTime64(6, 'UTC')}" if selector.before else ""
    rows = client.query(
        f"SELECT DISTINCT trace_id FROM {database}.llm_calls WHERE {matches}{before}",  # noqa: S608 - identifier validated, values bound
        parameters={"key": selector.key, "value": selector.value, "before": selector.before},
    ).result_rows
    return sorted(str(row[0]) for row in rows)


def _erase_from(client: Client, layout: Layout, table: str, traces: list[str]) -> tuple[int, int]:
    """Delete ``traces``' rows from ``table``; how many it held before and after (as FINAL reads them)."""
    if not traces:
        return 0, 0
    where = "trace_id IN {traces:Array(String)}"

    def count() -> int:
        return int(
            client.query(
                f"SELECT count() FROM {layout.database}.{table} FINAL WHERE {where}",  # noqa: S608 - identifiers validated, values bound
                parameters={"traces": traces},
            ).result_rows[0][0]
        )

    before = count()
    if not before:
        return 0, 0
    client.command(
        layout.render(f"ALTER TABLE {{database}}.{table} DELETE WHERE {where}"),
        parameters={"traces": traces},
        settings=layout.mutation_settings,
    )
    return before, count()
