"""Every dashboard panel query runs on the demo's data and returns the columns its panel shows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from dashboards import Chart, QueryWindow, clickhouse_panels, expand
from pipeline.sinks.labels import Label, insert_labels
from pipeline.ui.queries import ListFilters, TriageStore

COLUMNS = {
    "hallucination_rate": ("time", "series", "hallucination_rate"),
    "hallucination_by_service": (
        "service", "model", "operation", "calls", "flagged_calls", "agreed_calls", "flag_rate", "agreement_rate",
    ),
    "detector_flag_rate": ("time", "series", "flag_rate"),
    "detector_outcomes": (
        "detector", "detector_version", "thresholds_version", "ok", "skipped", "errors", "flagged", "threshold",
        "score_p50", "score_p90", "score_p99",
    ),
    "score_distribution": ("score_over_threshold", "detector", "results"),
    "alerts_by_route_and_rule": (
        "route", "rule", "destination", "alerts", "delivered", "retrying", "failed", "max_attempts",
    ),
    "alerts_over_time": ("time", "series", "alerts"),
    "top_ungrounded_sentences": (
        "ungrounded_sentence", "occurrences", "min_similarity", "best_source_window", "source_id", "services",
        "trace_id",
    ),
    "schema_violations_by_tool": ("tool", "kind", "violations", "calls", "example"),
    "consistency_scores": ("time", "series", "mean_score"),
    "detector_latency": ("detector", "findings", "p50_seconds", "p99_seconds", "max_seconds"),
    "pipeline_lag": ("time", "series", "lag_seconds"),
    "latest_flagged": ("time", "service", "model", "operation", "detector", "summary", "trace_id", "answer"),
    "llm_traffic": (
        "convention", "provider", "model", "content_source", "calls", "input_tokens", "output_tokens",
        "avg_duration_ms",
    ),
    "verdicts_by_detector": ("detector", "confirmed", "false_alarms", "judged_precision"),
}  # fmt: skip


def _window(*services: str) -> QueryWindow:
    now = datetime.now(UTC)
    return QueryWindow(now - timedelta(hours=1), now, 300, services)


def _rows(client, sql: str) -> list[dict[str, object]]:
    result = client.query(sql)
    return [dict(zip(result.column_names, row, strict=True)) for row in result.result_rows]


def test_every_panel_returns_its_columns_and_the_demo_findings(demo_database):
    client, database = demo_database
    assert {p.name for p in clickhouse_panels()} == set(COLUMNS)
    out = {}
    for panel in clickhouse_panels():
        sql = expand(panel.query, _window(), database)
        # DESCRIBE names the result columns even when the panel has no rows (consistency scores).
        columns = tuple(row[0] for row in client.query(f"DESCRIBE TABLE ({sql})").result_rows)
        assert columns == COLUMNS[panel.name], panel.name
        out[panel.name] = _rows(client, sql)
        if panel.chart is Chart.TIMESERIES:
            assert all(isinstance(row["time"], datetime) for row in out[panel.name]), panel.name

    rate = {row["series"]: row["hallucination_rate"] for row in out["hallucination_rate"]}
    assert rate["order-intake / gpt-4o-mini / extract_order"] > 0 and all(0 <= r <= 1 for r in rate.values())
    by_service = {row["service"]: row for row in out["hallucination_by_service"]}
    assert by_service["order-intake"]["agreed_calls"] >= 1 and by_service["hr-assistant"]["agreed_calls"] >= 1
    assert by_service["travel-guide"]["agreed_calls"] >= 1  # the seed's 1950 / 500 metres example
    assert by_service["docs-assistant"]["agreed_calls"] == 0 and by_service["docs-assistant"]["flagged_calls"] >= 1
    assert {"schema_violation", "grounding", "contradiction"} <= {r["series"] for r in out["detector_flag_rate"]}
    outcomes = {row["detector"]: row for row in out["detector_outcomes"]}
    assert outcomes["schema_violation"]["flagged"] >= 1
    assert outcomes["confidence"]["ok"] == 0  # the demo has no logprobs baseline
    assert outcomes["confidence"]["score_p50"] is None  # nothing judged: no quantile, not NaN
    buckets = {(r["detector"], r["score_over_threshold"]) for r in out["score_distribution"]}
    assert ("schema_violation", "2.0") in buckets  # flagged, far over its threshold
    assert all(0.0 <= float(bucket) <= 2.0 for _, bucket in buckets)
    assert {(r["route"], r["rule"]) for r in out["alerts_by_route_and_rule"]} == {
        ("page", "grounding-and-schema"), ("page", "severe-contradiction"), ("page", "claimed-failed-tool"),
        ("slack", "two-detectors"),
    }  # fmt: skip
    assert {r["series"] for r in out["alerts_over_time"]} == {
        "page / grounding-and-schema", "page / severe-contradiction", "page / claimed-failed-tool",
        "slack / two-detectors",
    }  # fmt: skip
    ungrounded = out["top_ungrounded_sentences"]
    assert ungrounded and all(r["min_similarity"] < 1 and r["trace_id"] for r in ungrounded)
    violations = {(r["tool"], r["kind"]) for r in out["schema_violations_by_tool"]}
    assert ("search_documents", "unknown_tool") in violations
    assert ("(answer of extract_order)", "output_truncated") in violations
    assert out["consistency_scores"] == []  # no LLM endpoint in the demo
    latency = {row["detector"]: row for row in out["detector_latency"]}
    assert latency.keys() >= {"grounding", "schema_violation"}
    assert all(0 <= r["p50_seconds"] <= r["p99_seconds"] <= r["max_seconds"] for r in latency.values())
    assert {r["series"] for r in out["pipeline_lag"]} == {"p50", "p99", "max"}
    assert any("search_docs" in r["summary"] for r in out["latest_flagged"])
    assert sum(r["calls"] for r in out["llm_traffic"]) == sum(r["calls"] for r in out["hallucination_by_service"])


def test_verdicts_panel_counts_the_majority_verdict_per_call_of_each_detector(demo_database):
    client, database = demo_database
    store = TriageStore(client, database)
    (travel,) = store.flagged_calls(ListFilters(service="travel-guide"), 10)
    (agent,) = store.flagged_calls(ListFilters(service="concierge-agent"), 10)
    now = datetime.now(UTC).replace(microsecond=0)
    verdicts = [
        Label(travel.trace_id, travel.span_id, False, "alice", now, detector="contradiction"),
        Label(travel.trace_id, travel.span_id, False, "bob", now),
        Label(travel.trace_id, travel.span_id, True, "carol", now),  # outvoted: a false alarm
        Label(agent.trace_id, agent.span_id, True, "alice", now - timedelta(minutes=1)),
    ]
    insert_labels(client, database, verdicts, "test")
    (panel,) = [p for p in clickhouse_panels() if p.name == "verdicts_by_detector"]
    rows = {row["detector"]: row for row in _rows(client, expand(panel.query, _window(), database))}
    assert set(rows) == set(travel.detectors) | set(agent.detectors)
    counts = {name: (row["confirmed"], row["false_alarms"]) for name, row in rows.items()}
    assert counts == {name: (int(name in agent.detectors), int(name in travel.detectors)) for name in rows}
    assert rows["tool_outcome"]["judged_precision"] == 1.0 and rows["contradiction"]["judged_precision"] == 0.0
    only_travel = expand(panel.query, _window("travel-guide"), database)
    assert {row["detector"] for row in _rows(client, only_travel)} == set(travel.detectors)


def test_service_variable_filters_every_panel(demo_database):
    client, database = demo_database
    panels = {panel.name: panel.query for panel in clickhouse_panels()}

    def rows(name: str, *services: str) -> list[dict[str, object]]:
        return _rows(client, expand(panels[name], _window(*services), database))

    for name in panels:
        assert rows(name, "no-such-service") == [], f"{name} ignores the service variable"
        for row in rows(name, "order-intake"):
            assert row.get("service", "order-intake") == "order-intake", name
            assert row.get("services", "order-intake") == "order-intake", name
    assert {row["series"].split(" / ")[0] for row in rows("hallucination_rate", "order-intake")} == {"order-intake"}
    assert [row["rule"] for row in rows("alerts_by_route_and_rule", "order-intake")] == ["grounding-and-schema"]
    assert len(rows("hallucination_by_service", "order-intake", "hr-assistant")) == 2
