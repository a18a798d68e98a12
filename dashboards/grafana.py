"""Grafana dashboard JSON generated from the panel files; ``python -m dashboards.grafana`` rewrites it.

Two dashboards: ``halluwatch`` (ClickHouse: what the detectors found) and
``halluwatch-worker`` (Prometheus: how the workers keep up).  Data sources are referred
to by the uids ``infra/grafana/provisioning/datasources`` gives them.  A test checks
that the committed JSON equals what this module generates.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dashboards import PANELS_DIR, Chart, Panel, clickhouse_panels, prometheus_panels

CLICKHOUSE_DATASOURCE = {"type": "grafana-clickhouse-datasource", "uid": "halluwatch-clickhouse"}
PROMETHEUS_DATASOURCE = {"type": "prometheus", "uid": "halluwatch-prometheus"}
OUTPUT_DIR = PANELS_DIR / "grafana"

_PANEL_TYPES = {Chart.TIMESERIES: "timeseries", Chart.BARS: "barchart", Chart.TABLE: "table"}
# The plugin's query formats (sqlds FormatQueryOption): 0 time series, 1 table.
_FORMATS = {Chart.TIMESERIES: 0, Chart.BARS: 1, Chart.TABLE: 1}
_QUERY_TYPES = {Chart.TIMESERIES: "timeseries", Chart.BARS: "table", Chart.TABLE: "table"}
_GRID_WIDTH = 24


def clickhouse_dashboard() -> dict[str, Any]:
    """The detections dashboard, with multi-value ``service`` and ``app`` (application policy) variables."""
    variables = [
        _query_variable("service", "Service", "SELECT DISTINCT service FROM halluwatch.llm_calls ORDER BY service"),
        _query_variable("app", "App", "SELECT DISTINCT policy FROM halluwatch.findings ORDER BY policy"),
    ]
    panels = clickhouse_panels()
    return _dashboard(
        "halluwatch",
        "halluwatch: hallucination detections",
        "Detector findings, agreement alerts, rate monitors and pipeline lag from ClickHouse "
        "(dashboards/clickhouse/*.sql).",
        panels,
        [_clickhouse_target(panel) for panel in panels],
        CLICKHOUSE_DATASOURCE,
        variables,
    )


def _query_variable(name: str, label: str, query: str) -> dict[str, Any]:
    """A multi-value variable filled by a query; All (the default) makes ``$__conditionalAll`` filter nothing."""
    return {
        "name": name,
        "label": label,
        "type": "query",
        "datasource": CLICKHOUSE_DATASOURCE,
        "query": query,
        "definition": query,
        "refresh": 2,  # on time range change
        "multi": True,
        "includeAll": True,
        "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
        "sort": 1,
    }


def worker_dashboard() -> dict[str, Any]:
    """The workers' dashboard: consumer lag, dead letters, latencies, batch sizes, budget."""
    panels = prometheus_panels()
    targets = [
        {"refId": "A", "datasource": PROMETHEUS_DATASOURCE, "expr": p.query, "legendFormat": p.legend} for p in panels
    ]
    return _dashboard(
        "halluwatch-worker",
        "halluwatch: workers",
        "What the halluwatch workers report on /metrics (dashboards/prometheus/*.promql).",
        panels,
        targets,
        PROMETHEUS_DATASOURCE,
        [],
    )


def _clickhouse_target(panel: Panel) -> dict[str, Any]:
    return {
        "refId": "A",
        "datasource": CLICKHOUSE_DATASOURCE,
        "editorType": "sql",
        "format": _FORMATS[panel.chart],
        "queryType": _QUERY_TYPES[panel.chart],
        "rawSql": panel.query,
    }


def _dashboard(
    uid: str,
    title: str,
    description: str,
    panels: list[Panel],
    targets: list[dict[str, Any]],
    datasource: dict[str, str],
    variables: list[dict[str, Any]],
) -> dict[str, Any]:
    placed, x, y, row_height = [], 0, 0, 0
    for index, (panel, target) in enumerate(zip(panels, targets, strict=True), start=1):
        width, height = (_GRID_WIDTH, 10) if panel.chart is Chart.TABLE else (_GRID_WIDTH // 2, 8)
        if x + width > _GRID_WIDTH:
            x, y = 0, y + row_height
        placed.append(_panel(index, panel, target, datasource, {"x": x, "y": y, "w": width, "h": height}))
        x, row_height = x + width, height if x == 0 else max(row_height, height)
    return {
        "uid": uid,
        "title": title,
        "description": description,
        "tags": ["halluwatch"],
        "timezone": "utc",
        "editable": True,
        "refresh": "1m",
        "schemaVersion": 39,
        "time": {"from": "now-24h", "to": "now"},
        "templating": {"list": variables},
        "panels": placed,
    }


def _panel(
    index: int, panel: Panel, target: dict[str, Any], datasource: dict[str, str], grid: dict[str, int]
) -> dict[str, Any]:
    defaults: dict[str, Any] = {"unit": panel.unit} if panel.unit else {}
    if panel.chart is Chart.TIMESERIES:
        defaults["custom"] = {"drawStyle": "line", "lineWidth": 2, "pointSize": 5, "showPoints": "always"}
    result: dict[str, Any] = {
        "id": index,
        "type": _PANEL_TYPES[panel.chart],
        "title": panel.title,
        "description": panel.description,
        "datasource": datasource,
        "gridPos": grid,
        "targets": [target],
        "fieldConfig": {"defaults": defaults, "overrides": []},
        "options": {"legend": {"displayMode": "list", "placement": "bottom", "showLegend": True}},
    }
    if panel.pivot:
        # Long rows (category, pivot column, value) -> one column per pivot value, as bars want.
        row, column, value = panel.pivot
        result["transformations"] = [
            {"id": "groupingToMatrix", "options": {"columnField": column, "rowField": row, "valueField": value}}
        ]
    return result


def render(dashboard: dict[str, Any]) -> str:
    """The dashboard as the committed file holds it."""
    return json.dumps(dashboard, indent=2, ensure_ascii=False) + "\n"


def dashboards() -> dict[str, dict[str, Any]]:
    """File name -> dashboard, for everything under ``dashboards/grafana``."""
    return {"halluwatch.json": clickhouse_dashboard(), "halluwatch-worker.json": worker_dashboard()}


def main() -> None:
    """Rewrite the dashboard JSON files from the panel files."""
    OUTPUT_DIR.mkdir(exist_ok=True)
    for name, dashboard in dashboards().items():
        path: Path = OUTPUT_DIR / name
        path.write_text(render(dashboard), encoding="utf-8")
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
