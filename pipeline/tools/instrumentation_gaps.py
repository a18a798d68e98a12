"""Which instrumentations send model calls halluwatch cannot judge whole (`halluwatch conventions`, `doctor`).

A library that records no messages (content capture off, content sent to a logs pipeline
that never reaches the worker), no tool definitions beside its tool calls, or no model leaves
detectors blind without any error: the call is stored and skipped.  Counting the recent calls
per instrumentation scope (the ``otel.scope.name`` kept with each call's attributes) shows the
gap before an alert is missed:

- **no content**: neither input nor output messages were read;
- **no tools**: the answer calls tools but no tool definitions came with it (schema_violation
  cannot check the call);
- **no model**: no request or response model.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pipeline.ingest.normalize import SCOPE_ATTRIBUTE

UNKNOWN_SCOPE = "(no scope)"


@dataclass(frozen=True, slots=True)
class ScopeGaps:
    """One instrumentation scope's recent model calls and how many of them lack each part."""

    scope: str
    conventions: tuple[str, ...]
    calls: int
    no_content: int
    no_tools: int
    no_model: int

    @property
    def has_gaps(self) -> bool:
        """Whether any call of the scope lacks content, tool definitions or a model."""
        return bool(self.no_content or self.no_tools or self.no_model)

    def describe(self) -> str:
        """``scope (conventions)``: what the gap lines name."""
        return f"{self.scope} ({', '.join(self.conventions)})"


def scope_gaps(client: Any, database: str, since: datetime) -> list[ScopeGaps]:
    """The calls that started after ``since``, per instrumentation scope, most calls first."""
    rows = client.query(
        f"SELECT attributes[%(scope)s] AS scope, groupUniqArray(convention), count(), "  # noqa: S608 - identifiers validated
        "countIf(input_messages = 0 AND output_messages = 0), countIf(tool_calls > 0 AND tool_definitions = 0), "
        f"countIf(model = '') FROM {database}.llm_calls FINAL WHERE start_time >= %(since)s "
        "GROUP BY scope ORDER BY count() DESC, scope",
        parameters={"scope": SCOPE_ATTRIBUTE, "since": since},
    ).result_rows
    return [
        ScopeGaps(scope or UNKNOWN_SCOPE, tuple(sorted(conventions)), calls, no_content, no_tools, no_model)
        for scope, conventions, calls, no_content, no_tools, no_model in rows
    ]


_COLUMNS = ("calls", "no content", "no tools", "no model")


def table_lines(gaps: list[ScopeGaps]) -> list[str]:
    """The per-scope counts as a plain-text table."""
    width = max((len(row.describe()) for row in gaps), default=0)
    header = "  ".join(f"{column:>10}" for column in _COLUMNS)
    lines = [f"{'instrumentation scope (conventions)':<{width}}  {header}"]
    for row in gaps:
        counts = "  ".join(f"{count:>10}" for count in (row.calls, row.no_content, row.no_tools, row.no_model))
        lines.append(f"{row.describe():<{width}}  {counts}")
    return lines


def summary(gaps: list[ScopeGaps]) -> tuple[bool, str]:
    """Whether every scope's calls are whole, and one sentence saying so or naming the gaps."""
    if not gaps:
        return True, "no model calls in the window yet"
    partial = [row for row in gaps if row.has_gaps]
    if not partial:
        calls = sum(row.calls for row in gaps)
        return True, f"{calls} model calls from {len(gaps)} instrumentation scope(s), all with content and model"
    return False, "; ".join(
        f"{row.describe()}: of {row.calls} calls, {row.no_content} without content, "
        f"{row.no_tools} with tool calls but no tool definitions, {row.no_model} without a model"
        for row in partial
    ) + " (docs/instrumentations.md says which settings each library needs)"
