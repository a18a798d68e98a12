"""``halluwatch report``: one static HTML file with the dashboard panels, for the embedded setup (docs/operations.md).

Runs the same panel queries as the Grafana dashboard (``dashboards/clickhouse``) and
renders them into a single self-contained page: charts as inline SVG drawn by
matplotlib (text kept as text, so the page is searchable), tables as HTML, each panel
with the SQL it ran.  No scripts, no external stylesheets or fonts: it opens offline
and can be mailed or attached to an incident.
"""

from __future__ import annotations

import html
import io
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from clickhouse_connect.driver.client import Client

from dashboards import Chart, Panel, QueryWindow, clickhouse_panels, expand
from detectors.extras import requires_extra

# matplotlib is the ``report`` extra, not a worker requirement: one line naming it if missing.
with requires_extra("report", "halluwatch report (its charts)"):
    import matplotlib
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.ticker import PercentFormatter

MAX_TABLE_ROWS = 50
# About 60 points across the range, on intervals a person reads easily.
_INTERVALS = (60, 300, 900, 1800, 3600, 3 * 3600, 6 * 3600, 12 * 3600, 86400)


@dataclass(frozen=True, slots=True)
class PanelResult:
    """One panel's rows, as the query returned them."""

    panel: Panel
    sql: str
    columns: tuple[str, ...]
    rows: list[tuple[Any, ...]]


def report_window(
    hours: float, services: Sequence[str] = (), end: datetime | None = None, apps: Sequence[str] = ()
) -> QueryWindow:
    """The last ``hours`` up to ``end`` (default now), with an interval giving about 60 points."""
    end = end or datetime.now(UTC)
    seconds = hours * 3600
    interval = next((i for i in _INTERVALS if seconds / i <= 60), _INTERVALS[-1])
    return QueryWindow(end - timedelta(hours=hours), end, interval, tuple(services), tuple(apps))


def run_panels(client: Client, database: str, window: QueryWindow) -> list[PanelResult]:
    """Every ClickHouse panel's query over ``window``."""
    results = []
    for panel in clickhouse_panels():
        sql = expand(panel.query, window, database)
        result = client.query(sql)
        results.append(PanelResult(panel, sql, tuple(result.column_names), [tuple(r) for r in result.result_rows]))
    return results


def write_report(client: Client, database: str, window: QueryWindow, path: Path) -> Path:
    """Query every panel and write the HTML report to ``path``; returns ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_html(run_panels(client, database, window), window, database), encoding="utf-8")
    return path


def render_html(results: Sequence[PanelResult], window: QueryWindow, database: str) -> str:
    """The report page."""
    services = ", ".join(window.services) or "all services"
    apps = ", ".join(window.apps) or "all apps"
    sections = "\n".join(_section(result, window) for result in results)
    contents = "\n".join(
        f'<li><a href="#{r.panel.name}">{html.escape(r.panel.title)}</a> ({len(r.rows)})</li>' for r in results
    )
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>halluwatch report</title>
<style>{_CSS}</style>
</head>
<body>
<header>
<h1>halluwatch report</h1>
<p>{_time(window.start)} to {_time(window.end)} UTC &middot; {html.escape(services)} &middot;
{html.escape(apps)} &middot; database <code>{html.escape(database)}</code> &middot;
generated {_time(datetime.now(UTC))} UTC</p>
<ol class="contents">{contents}</ol>
</header>
<main>
{sections}
</main>
</body>
</html>
"""


def _section(result: PanelResult, window: QueryWindow) -> str:
    panel = result.panel
    if not result.rows:
        body = '<p class="empty">No data in this range.</p>'
    elif panel.chart is Chart.TABLE:
        body = _table(result)
    else:
        body = f'<figure class="chart">{_svg(result, window)}</figure>'
    return f"""<section class="panel" id="{panel.name}" data-chart="{panel.chart}" data-rows="{len(result.rows)}">
<h2>{html.escape(panel.title)}</h2>
<p class="description">{html.escape(panel.description)}</p>
{body}
<details><summary>SQL</summary><pre>{html.escape(result.sql)}</pre></details>
</section>"""


def _table(result: PanelResult) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in result.columns)
    rows = "\n".join(
        "<tr>" + "".join(f"<td>{html.escape(_cell(v))}</td>" for v in row) + "</tr>"
        for row in result.rows[:MAX_TABLE_ROWS]
    )
    more = len(result.rows) - MAX_TABLE_ROWS
    note = f'<p class="more">{more} more rows not shown.</p>' if more > 0 else ""
    return f'<div class="table"><table><thead><tr>{head}</tr></thead><tbody>\n{rows}\n</tbody></table></div>{note}'


def _svg(result: PanelResult, window: QueryWindow) -> str:
    figure = Figure(figsize=(9, 3.2), layout="constrained")
    axes = figure.add_subplot()
    if result.panel.chart is Chart.TIMESERIES:
        _draw_lines(axes, result, window)
    else:
        _draw_bars(axes, result)
    if result.panel.unit == "percentunit":
        axes.yaxis.set_major_formatter(PercentFormatter(1.0))
    axes.grid(axis="y", alpha=0.3)
    axes.spines[["top", "right"]].set_visible(False)
    if axes.get_legend_handles_labels()[0]:
        axes.legend(fontsize="small", frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    buffer = io.StringIO()
    # Text stays <text> (system fonts, nothing to fetch); the salt keeps element ids distinct per panel.
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": result.panel.name}):
        figure.savefig(buffer, format="svg", metadata={"Date": None})
    text = buffer.getvalue()
    return text[text.index("<svg") :]  # inline: no XML prolog or doctype inside HTML


def _draw_lines(axes: Axes, result: PanelResult, window: QueryWindow) -> None:
    series: dict[str, tuple[list[datetime], list[float]]] = {}
    for time, name, value in result.rows:
        times, values = series.setdefault(str(name), ([], []))
        times.append(time)
        values.append(math.nan if value is None else float(value))  # no value (too few verdicts): a gap
    for name, (times, values) in series.items():
        axes.plot(_instants(times), values, marker="o", markersize=3, linewidth=1.5, label=name)
    axes.set_ylabel(result.columns[2].replace("_", " "))
    axes.xaxis_date("UTC")
    start, end = _instants([window.start, window.end])
    axes.set_xlim(start, end)  # the whole window, so a quiet stretch shows as quiet
    axes.set_ylim(bottom=0)  # rates, counts and seconds: a cut-off axis would exaggerate
    axes.tick_params(axis="x", labelrotation=30, labelsize="small")


def _instants(times: Sequence[datetime]) -> np.ndarray[Any, np.dtype[np.datetime64]]:
    """UTC instants matplotlib reads as dates (naive datetimes in the result are UTC already)."""
    return np.array([t.astimezone(UTC).replace(tzinfo=None) if t.tzinfo else t for t in times], dtype="datetime64[ms]")


def _draw_bars(axes: Axes, result: PanelResult) -> None:
    categories, series = _bar_series(result)
    width = 0.8 / max(len(series), 1)
    for index, (name, values) in enumerate(series.items()):
        positions = [i + (index - (len(series) - 1) / 2) * width for i in range(len(categories))]
        axes.bar(positions, values, width=width, label=name)
    axes.set_xticks(range(len(categories)), categories, rotation=45 if len(categories) > 12 else 0, fontsize="small")
    axes.set_xlabel(result.columns[0].replace("_", " "))


def _bar_series(result: PanelResult) -> tuple[list[str], dict[str, list[float]]]:
    """Categories and one value list per series: pivoted long rows, or one series per numeric column."""
    if not result.panel.pivot:
        categories = [str(row[0]) for row in result.rows]
        return categories, {
            column: [float(row[i]) for row in result.rows] for i, column in enumerate(result.columns) if i > 0
        }
    category, column, value = (result.columns.index(name) for name in result.panel.pivot)
    categories = list(dict.fromkeys(str(row[category]) for row in result.rows))
    series: dict[str, list[float]] = {}
    for row in result.rows:
        values = series.setdefault(str(row[column]), [0.0] * len(categories))
        values[categories.index(str(row[category]))] = float(row[value])
    return categories, series


def _cell(value: Any) -> str:
    if isinstance(value, datetime):
        return _time(value)
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list | tuple):
        return ", ".join(_cell(v) for v in value)
    return "" if value is None else str(value)


def _time(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


_CSS = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 0; color: #1d2330; background: #f5f6f8; }
header { background: #1d2330; color: #f5f6f8; padding: 16px 28px; }
header h1 { margin: 0 0 4px; font-size: 22px; }
header code { color: #ffd479; }
.contents { columns: 2; margin: 10px 0 0; padding-left: 20px; font-size: 13px; }
.contents a { color: #9fc3ff; }
main { padding: 12px 28px 40px; }
.panel { background: #fff; border: 1px solid #dde1e7; border-radius: 6px; margin: 16px 0; padding: 12px 18px; }
.panel h2 { font-size: 17px; margin: 4px 0; }
.description { color: #55607a; margin: 0 0 8px; max-width: 70em; }
.chart { margin: 0; }
.chart svg { max-width: 100%; height: auto; }
.table { overflow-x: auto; }
table { border-collapse: collapse; font-size: 12.5px; }
th, td { border-bottom: 1px solid #e8ebf0; padding: 4px 10px; text-align: left; vertical-align: top; max-width: 40em; }
th { background: #f0f2f5; position: sticky; top: 0; }
.empty, .more { color: #8a93a6; font-style: italic; }
details { margin-top: 8px; font-size: 12px; }
pre { background: #f6f8fa; padding: 8px; overflow-x: auto; }
"""
