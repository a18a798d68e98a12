"""Dashboard panels, one file per panel query, shared by Grafana and ``halluwatch report`` (docs/operations.md).

``clickhouse/NN_name.sql`` hold ClickHouse queries over the halluwatch tables and
``prometheus/NN_name.promql`` PromQL over the worker's metrics.  Each file starts with
comment headers (``-- key: value`` or ``# key: value``): ``title``, ``chart``
(timeseries, bars or table), ``description``, and optionally ``unit`` (a Grafana unit)
``legend`` (PromQL) and ``pivot`` (bars from long rows: the category, series and value
columns, in the order the query selects them).

The SQL uses the Grafana ClickHouse plugin's macros, so the same text runs in Grafana
and, through :func:`expand`, from Python (the report, the tests) or, after substituting
them by hand, from clickhouse-client: ``$__timeFilter(col)``, ``$__timeInterval(col)``,
``$__fromTime``, ``$__toTime``, ``$__interval_s``, and
``$__conditionalAll(cond, $service)`` with ``${service:singlequote}`` in ``cond`` (the
dashboard's service variable), or ``$__conditionalAll(cond, $app)`` with
``${app:singlequote}`` (its application variable: the policy name of ``findings`` and
``alerts``).  Tables are named ``halluwatch.<table>``; :func:`expand` puts another
database in their place.

A query may name SQL it shares with a command, ``{{unverified_reasons}}``
(:mod:`dashboards.fragments`); the text is put in place when the file is loaded.

Time-series queries return exactly ``time, series, value``: the plugin's multi-line
layout, and what the report draws.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from pathlib import Path

from dashboards.fragments import FRAGMENTS

PANELS_DIR = Path(__file__).parent
DEFAULT_DATABASE = "halluwatch"


class Chart(StrEnum):
    """How a panel shows its rows."""

    TIMESERIES = "timeseries"  # columns: time, series, value
    BARS = "bars"  # columns: category, then numbers (or category, pivot column, number)
    TABLE = "table"


@dataclass(frozen=True, slots=True)
class Panel:
    """One panel: its query and how to show it."""

    name: str
    title: str
    chart: Chart
    description: str
    query: str
    unit: str = ""
    legend: str = ""
    pivot: tuple[str, ...] = ()  # (category, series, value) columns of long rows


def clickhouse_panels() -> list[Panel]:
    """The ClickHouse panels, in dashboard order."""
    return _load("clickhouse", "*.sql", "--")


def prometheus_panels() -> list[Panel]:
    """The Prometheus panels of the worker dashboard, in order."""
    return _load("prometheus", "*.promql", "#")


def _load(folder: str, pattern: str, comment: str) -> list[Panel]:
    return [_parse(path, comment) for path in sorted((PANELS_DIR / folder).glob(pattern))]


def _parse(path: Path, comment: str) -> Panel:
    headers: dict[str, str] = {}
    lines = path.read_text(encoding="utf-8").splitlines()
    while lines and lines[0].startswith(comment):
        key, _, value = lines.pop(0).removeprefix(comment).partition(":")
        headers[key.strip()] = value.strip()
    missing = {"title", "chart", "description"} - set(headers)
    if missing:
        raise ValueError(f"{path.name}: missing header(s) {', '.join(sorted(missing))}")
    return Panel(
        name=path.stem.split("_", 1)[1],  # "01_hallucination_rate" -> "hallucination_rate"
        title=headers["title"],
        chart=Chart(headers["chart"]),
        description=headers["description"],
        query=_with_fragments("\n".join(lines).strip()),
        unit=headers.get("unit", ""),
        legend=headers.get("legend", ""),
        pivot=_pivot(path, headers.get("pivot", "")),
    )


def _with_fragments(query: str) -> str:
    for name, fragment in FRAGMENTS.items():
        query = query.replace(f"{{{{{name}}}}}", fragment)
    return query


def _pivot(path: Path, header: str) -> tuple[str, ...]:
    columns = tuple(column.strip() for column in header.split(",") if column.strip())
    if columns and len(columns) != 3:
        raise ValueError(f"{path.name}: pivot names the category, series and value columns")
    return columns


@dataclass(frozen=True, slots=True)
class QueryWindow:
    """What Grafana would fill the macros with: time range, interval, selected services and apps (none: all)."""

    start: datetime
    end: datetime
    interval_seconds: int
    services: Sequence[str] = ()
    apps: Sequence[str] = ()  # application policies (``policy`` of findings and alerts)

    def selected(self, variable: str) -> Sequence[str]:
        """The values chosen for a dashboard variable (``service`` or ``app``); empty: All."""
        selections = {"service": self.services, "app": self.apps}
        if variable not in selections:
            raise ValueError(f"unknown dashboard variable ${variable}")
        return selections[variable]


_MACRO = re.compile(r"\$__(\w+)")
_TABLE_PREFIX = re.compile(rf"\b{DEFAULT_DATABASE}\.(?=\w)")


def expand(sql: str, window: QueryWindow, database: str = DEFAULT_DATABASE) -> str:
    """``sql`` with the plugin's macros filled in for ``window``, reading from ``database``."""
    # Whole seconds, as the plugin sends them; the end rounded up so rows of its last second count.
    start, end = math.floor(window.start.timestamp()), math.ceil(window.end.timestamp())
    macros: dict[str, Callable[[list[str]], str]] = {
        "timeFilter": lambda a: f"{a[0]} >= toDateTime({start}) AND {a[0]} <= toDateTime({end})",
        "timeInterval": lambda a: f"toStartOfInterval(toDateTime({a[0]}), INTERVAL {window.interval_seconds} second)",
        "fromTime": lambda a: f"toDateTime({start})",
        "toTime": lambda a: f"toDateTime({end})",
        "interval_s": lambda a: str(window.interval_seconds),
        "conditionalAll": lambda a: _conditional_all(a, window),
    }
    out, position = [], 0
    while match := _MACRO.search(sql, position):
        out.append(sql[position : match.start()])
        name = match.group(1)
        if name not in macros:
            raise ValueError(f"unsupported macro $__{name}")
        args, position = _arguments(sql, match.end())
        out.append(macros[name](args))
    out.append(sql[position:])
    expanded = "".join(out)
    if "$" in expanded:
        raise ValueError(f"unexpanded variable in: {expanded[expanded.index('$') :][:60]!r}")
    return _TABLE_PREFIX.sub(f"{database}.", expanded)


def _arguments(sql: str, at: int) -> tuple[list[str], int]:
    """The comma-separated arguments of a macro call at ``at`` (none without parentheses), and where it ends."""
    if at >= len(sql) or sql[at] != "(":
        return [], at
    args, depth, begin = [], 0, at + 1
    for index in range(at, len(sql)):
        char = sql[index]
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                args.append(sql[begin:index].strip())
                return args, index + 1
        elif char == "," and depth == 1:
            args.append(sql[begin:index].strip())
            begin = index + 1
    raise ValueError(f"unbalanced parentheses in macro call at {sql[at:][:60]!r}")


def _conditional_all(args: list[str], window: QueryWindow) -> str:
    """``cond`` with the variable's selected values in place of ``${var:singlequote}``; ``1=1`` for All."""
    if len(args) != 2 or not args[1].startswith("$"):
        raise ValueError(f"$__conditionalAll takes a condition and a $variable, got {args!r}")
    variable = args[1].removeprefix("$")
    values = window.selected(variable)
    if not values:
        return "1=1"
    return args[0].replace(f"${{{variable}:singlequote}}", ", ".join(_quote(value) for value in values))


def _quote(value: str) -> str:
    """A ClickHouse string literal."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
