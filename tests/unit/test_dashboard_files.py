"""The panel files parse, their macros expand, and the Grafana JSON is what they generate."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime

import pytest

from dashboards import Chart, QueryWindow, clickhouse_panels, expand, prometheus_panels
from dashboards.grafana import OUTPUT_DIR, dashboards, render

WINDOW = QueryWindow(datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 2, tzinfo=UTC), 900)


def test_committed_grafana_json_is_generated_from_the_panel_files():
    generated = dashboards()
    assert sorted(path.name for path in OUTPUT_DIR.glob("*.json")) == sorted(generated)
    for name, dashboard in generated.items():
        assert (OUTPUT_DIR / name).read_text(encoding="utf-8") == render(dashboard), (
            f"{name} is stale: run `python -m dashboards.grafana`"
        )


def test_every_panel_file_becomes_one_panel_with_its_query():
    panels = {d["uid"]: d["panels"] for d in dashboards().values()}
    clickhouse, prometheus = panels["halluwatch"], panels["halluwatch-worker"]
    assert [p["title"] for p in clickhouse] == [p.title for p in clickhouse_panels()]
    assert [p["targets"][0]["rawSql"] for p in clickhouse] == [p.query for p in clickhouse_panels()]
    assert [p["targets"][0]["expr"] for p in prometheus] == [p.query for p in prometheus_panels()]
    timeseries = [p for p in clickhouse if p["type"] == "timeseries"]
    assert timeseries and all(p["targets"][0]["format"] == 0 for p in timeseries)  # the plugin's time series
    # Panels never overlap on Grafana's 24-column grid.
    cells = set()
    for panel in clickhouse + prometheus:
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24
        uid = panel["datasource"]["uid"]
        area = {(uid, grid["x"] + dx, grid["y"] + dy) for dx in range(grid["w"]) for dy in range(grid["h"])}
        assert not cells & area, panel["title"]
        cells |= area


def test_expand_fills_the_plugin_macros():
    sql = (
        "SELECT $__timeInterval(t) AS time FROM halluwatch.findings WHERE $__timeFilter(t) "
        "AND $__conditionalAll(service IN (${service:singlequote}), $service) AND x < $__toTime"
    )
    all_services = expand(sql, WINDOW, "hw_test")
    assert all_services == (
        "SELECT toStartOfInterval(toDateTime(t), INTERVAL 900 second) AS time FROM hw_test.findings "
        "WHERE t >= toDateTime(1767225600) AND t <= toDateTime(1767312000) AND 1=1 AND x < toDateTime(1767312000)"
    )
    some = QueryWindow(WINDOW.start, WINDOW.end, 900, ("billing", "o'neil"))
    assert "AND service IN ('billing', 'o\\'neil') AND" in expand(sql, some)


def test_expand_fills_each_variable_from_its_own_selection():
    sql = (
        "WHERE $__conditionalAll(service IN (${service:singlequote}), $service) "
        "AND $__conditionalAll(policy IN (${app:singlequote}), $app)"
    )
    assert expand(sql, WINDOW) == "WHERE 1=1 AND 1=1"
    apps = QueryWindow(WINDOW.start, WINDOW.end, 900, apps=("medbot", "hr"))
    assert expand(sql, apps) == "WHERE 1=1 AND policy IN ('medbot', 'hr')"
    both = QueryWindow(WINDOW.start, WINDOW.end, 900, ("billing",), ("hr",))
    assert expand(sql, both) == "WHERE service IN ('billing') AND policy IN ('hr')"


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("SELECT $__unixEpochFilter(t)", "unsupported macro"),
        ("SELECT 1 WHERE service = '${service}'", "unexpanded variable"),
        ("SELECT $__timeFilter(t", "unbalanced"),
        ("SELECT 1 WHERE $__conditionalAll(team IN (${team:singlequote}), $team)", "unknown dashboard variable"),
        ("SELECT 1 WHERE $__conditionalAll(service = 'a')", "a condition and a \\$variable"),
    ],
)
def test_expand_refuses_what_it_cannot_fill(sql, message):
    with pytest.raises(ValueError, match=message):
        expand(sql, WINDOW)


def test_every_clickhouse_panel_expands_and_names_its_chart():
    for panel in clickhouse_panels():
        sql = expand(panel.query, WINDOW, "hw_test")
        assert "halluwatch." not in sql and "hw_test." in sql, panel.name
        assert panel.title and panel.description, panel.name
        if panel.chart is Chart.TIMESERIES:
            assert re.search(r"\bAS time\b", sql) and re.search(r"\bAS series\b", sql), panel.name


def test_panels_over_findings_or_alerts_filter_by_service_and_app():
    for panel in clickhouse_panels():
        assert "${service:singlequote}" in panel.query, panel.name
        if re.search(r"halluwatch\.(findings|alerts)\b", panel.query):
            assert "${app:singlequote}" in panel.query, panel.name


def test_the_dashboard_has_a_service_and_an_app_variable():
    variables = {v["name"]: v for v in dashboards()["halluwatch.json"]["templating"]["list"]}
    assert list(variables) == ["service", "app"]
    assert variables["app"]["query"] == "SELECT DISTINCT policy FROM halluwatch.findings ORDER BY policy"
    assert all(v["multi"] and v["includeAll"] for v in variables.values())


def test_hallucination_panels_count_flagged_calls_as_the_triage_list_does():
    for panel in clickhouse_panels():
        if "hallucinat" in panel.name:
            assert "FROM halluwatch.llm_calls WHERE flagged" in panel.query, panel.name


def test_grafana_json_is_valid_and_uses_the_provisioned_datasources():
    for path in OUTPUT_DIR.glob("*.json"):
        dashboard = json.loads(path.read_text(encoding="utf-8"))
        uids = {panel["datasource"]["uid"] for panel in dashboard["panels"]}
        assert uids <= {"halluwatch-clickhouse", "halluwatch-prometheus"}, path.name
