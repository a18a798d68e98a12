"""Every dashboard panel query runs on the demo's data and returns the columns its panel shows."""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from clickhouse_connect.driver.client import Client

from dashboards import Chart, QueryWindow, clickhouse_panels, expand
from pipeline.alerting.silence_store import SilenceStore
from pipeline.alerting.silences import Silence
from pipeline.config.review import ReviewSettings
from pipeline.monitors.evaluate import Incident, IncidentStatus
from pipeline.monitors.store import IncidentStore
from pipeline.rate.queue import draw_next
from pipeline.rate.report import rate_report
from pipeline.rate.sampler import Strata
from pipeline.rate.store import RateStore, Scope
from pipeline.sinks.labels import Label, insert_labels
from pipeline.ui.queries import ListFilters, TriageStore
from tests.integration.demo_data import fill_with_demo_data

# Two applications under their own policy (routes unchanged); the demo's other services are "default".
POLICIES = {"hr": {"match": {"service": "hr-assistant"}}, "orders": {"match": {"service": "order-intake"}}}

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
    "hallucination_and_alert_rate_by_app": ("time", "series", "rate"),
    "false_alarms_by_route": ("app", "route", "false_alarms", "faithful_verdicts", "precision"),
    "alerts_by_app": (
        "app", "route", "alerts", "sent", "grouped", "silenced", "retrying", "failed", "acknowledged", "resolved",
    ),
    "detector_mix_by_app": ("app", "detector", "flagged_calls"),
    "verdicts_by_app": ("app", "confirmed", "false_alarms", "judged_precision"),
    "monitor_incidents": (
        "monitor", "monitor_group", "status", "rate", "baseline_rate", "times_baseline", "calls", "flagged", "route",
        "opened_at", "resolved_at",
    ),
    "silences": ("silence_id", "selector", "state", "reason", "created_by", "starts_at", "ends_at"),
    "rate_estimate_by_app": ("time", "series", "rate"),
}  # fmt: skip


@pytest.fixture
def dashboard_database(clickhouse: tuple[Client, str], exported_model: None, tmp_path: Path) -> tuple[Client, str]:
    """The demo's data under POLICIES, the orders app's alerts grouped into an open incident, HR's silenced."""
    client, database = clickhouse
    fill_with_demo_data(client, database, tmp_path, POLICIES)
    _add_monitors_and_silences(client, database, datetime.now(UTC).replace(microsecond=0))
    return client, database


def _add_monitors_and_silences(client: Client, database: str, now: datetime) -> None:
    """What the router and the rate monitors would have written beside the demo's alerts."""

    def incident(app: str, service: str, opened: timedelta, resolved: timedelta | None, version: int) -> Incident:
        return Incident(
            f"flag-rate-{app}", "flag-rate", "page", ("policy", "service"), (app, service),
            IncidentStatus.OPEN if resolved is None else IncidentStatus.RESOLVED, now - opened, now,
            None if resolved is None else now - resolved, 0.5, 0.1, 40, 20, version=version,
        )  # fmt: skip

    IncidentStore(client, database).insert([
        incident("orders", "order-intake", timedelta(minutes=10), None, 1),
        incident("hr", "hr-assistant", timedelta(minutes=50), None, 1),
        incident("hr", "hr-assistant", timedelta(minutes=50), timedelta(minutes=20), 2),  # resolved since
        incident("default", "travel-guide", timedelta(hours=5), timedelta(hours=4), 2),  # before the range
    ])  # fmt: skip
    # A newer row per delivery, as the router writes one for each outcome.
    for app, status in (("orders", "grouped"), ("hr", "silenced")):
        client.command(
            f"INSERT INTO {database}.alerts SELECT * REPLACE ('{status}' AS status, state_version + 1 AS state_version)"
            f" FROM {database}.alerts FINAL WHERE policy = '{app}'"
        )
    silences = SilenceStore(client, database)
    silences.add(
        Silence("s-hr", {"service": "hr-assistant", "policy": "hr"}, "known", "alice", now, now + timedelta(hours=1))
    )
    silences.add(
        Silence(
            "s-old", {"service": "hr-assistant"}, "long ago", "bob", now - timedelta(days=2), now - timedelta(days=1)
        )
    )


def _window(*services: str, apps: tuple[str, ...] = ()) -> QueryWindow:
    now = datetime.now(UTC)
    return QueryWindow(now - timedelta(hours=1), now, 300, services, apps)


def _rows(client, sql: str) -> list[dict[str, object]]:
    result = client.query(sql)
    return [dict(zip(result.column_names, row, strict=True)) for row in result.result_rows]


def test_every_panel_returns_its_columns_and_the_demo_findings(dashboard_database):
    client, database = dashboard_database
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
        ("page", "severe-contradiction"), ("page", "claimed-failed-tool"), ("slack", "two-detectors"),
    }  # fmt: skip
    assert {r["series"] for r in out["alerts_over_time"]} == {
        "page / severe-contradiction", "page / claimed-failed-tool", "slack / two-detectors",
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

    # Per application: every policy that judged calls, its flag and alert rate, alerts and detectors.
    apps = {"default", "hr", "orders"}
    rates: dict[tuple[str, str], float] = defaultdict(float)  # the highest of its intervals
    for row in out["hallucination_and_alert_rate_by_app"]:
        app, kind = str(row["series"]).split(" / ")
        rates[app, kind] = max(rates[app, kind], row["rate"])
    assert set(rates) == {(app, kind) for app in apps for kind in ("flagged", "alerted")}
    assert all(0 < rate <= 1 for rate in rates.values())  # every app alerted at least once
    alerts = {(row["app"], row["route"]): row for row in out["alerts_by_app"]}
    assert {app for app, _ in alerts} == apps
    # One delivery per alert (the console): the orders app's grouped into its incident, HR's silenced.
    status_of = {"orders": "grouped", "hr": "silenced", "default": "sent"}
    for (app, route), row in alerts.items():
        assert row[status_of[app]] == row["alerts"] > 0, (app, route)
        assert row["sent"] + row["grouped"] + row["silenced"] == row["alerts"], (app, route)
    mix = {(row["app"], row["detector"]) for row in out["detector_mix_by_app"]}
    assert {app for app, _ in mix} == apps and ("orders", "schema_violation") in mix
    # The monitors: the open incident first, HR's as its newest version (resolved), the old one out of range.
    incidents = [(r["monitor_group"], r["status"], r["times_baseline"]) for r in out["monitor_incidents"]]
    assert incidents == [
        ("policy=orders, service=order-intake", "open", 5.0), ("policy=hr, service=hr-assistant", "resolved", 5.0)
    ]  # fmt: skip
    assert [row["resolved_at"] is None for row in out["monitor_incidents"]] == [True, False]
    silences = [(r["silence_id"], r["selector"], r["state"]) for r in out["silences"]]
    assert silences == [("s-hr", "policy=hr,service=hr-assistant", "active")]


def test_verdicts_panel_counts_the_majority_verdict_per_call_of_each_detector(dashboard_database):
    client, database = dashboard_database
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

    # By application: a call counts once however many detectors flagged it.
    hr = store.flagged_calls(ListFilters(service="hr-assistant"), 10)[0]
    order = store.flagged_calls(ListFilters(service="order-intake"), 10)[0]
    insert_labels(client, database, [
        Label(hr.trace_id, hr.span_id, True, "alice", now), Label(order.trace_id, order.span_id, False, "alice", now),
        Label(hr.trace_id, hr.span_id, False, "bob", now, withdrawn=True),  # undone: would tie, and win the tie
        # Each person once: alice's older review verdict counted beside her newer one would tie it 2-2, and
        # carol (as new as alice, later by name) would win the tie.
        Label(hr.trace_id, hr.span_id, False, "alice", now - timedelta(minutes=3), stratum="alerted",
              inclusion_probability=0.5),
        Label(hr.trace_id, hr.span_id, True, "dave", now - timedelta(minutes=2)),
        Label(hr.trace_id, hr.span_id, False, "carol", now),
    ], "test")  # fmt: skip
    (by_app,) = [p for p in clickhouse_panels() if p.name == "verdicts_by_app"]
    rows = {row["app"]: row for row in _rows(client, expand(by_app.query, _window(), database))}
    counts = {app: (row["confirmed"], row["false_alarms"], row["judged_precision"]) for app, row in rows.items()}
    assert counts == {"default": (1, 1, 0.5), "hr": (1, 0, 1.0), "orders": (0, 1, 0.0)}
    only_hr = expand(by_app.query, _window(apps=("hr",)), database)
    assert [row["app"] for row in _rows(client, only_hr)] == ["hr"]


def test_service_and_app_variables_filter_the_panels(dashboard_database):
    client, database = dashboard_database
    panels = {panel.name: panel.query for panel in clickhouse_panels()}

    def rows(name: str, *services: str, apps: tuple[str, ...] = ()) -> list[dict[str, object]]:
        return _rows(client, expand(panels[name], _window(*services, apps=apps), database))

    for name in panels:
        assert rows(name, "no-such-service") == [], f"{name} ignores the service variable"
        for row in rows(name, "order-intake"):
            assert row.get("service", "order-intake") == "order-intake", name
            assert row.get("services", "order-intake") == "order-intake", name
    assert {row["series"].split(" / ")[0] for row in rows("hallucination_rate", "order-intake")} == {"order-intake"}
    assert [row["rule"] for row in rows("alerts_by_route_and_rule", "order-intake")] == ["two-detectors"]
    assert len(rows("hallucination_by_service", "order-intake", "hr-assistant")) == 2

    # The app variable: every panel but those over llm_calls, which has no policy column.
    by_app = {name for name, query in panels.items() if "${app:singlequote}" in query}
    assert set(panels) - by_app == {"pipeline_lag", "llm_traffic"}
    for name in by_app:
        assert rows(name, apps=("no-such-app",)) == [], f"{name} ignores the app variable"
        for row in rows(name, apps=("orders",)):
            assert row.get("app", "orders") == "orders", name
            assert row.get("service", "order-intake") == "order-intake", name
    assert {str(row["series"]).split(" / ")[0] for row in rows("hallucination_rate", apps=("orders",))} == {
        "order-intake"
    }
    assert {row["app"] for row in rows("alerts_by_app", apps=("orders", "hr"))} == {"orders", "hr"}
    assert [row["monitor_group"] for row in rows("monitor_incidents", apps=("hr",))] == [
        "policy=hr, service=hr-assistant"
    ]
    assert rows("silences", apps=("orders",)) == [] and len(rows("silences", apps=("hr",))) == 1


def test_the_rate_panel_says_what_halluwatch_rate_says(dashboard_database):
    client, database = dashboard_database
    rates = RateStore(client, database, Strata.configured(ReviewSettings()))
    now = datetime.now(UTC)
    scope = Scope(now - timedelta(hours=1), now + timedelta(seconds=1), app="default")
    # A reviewer judges some of what the queue serves: the demo's alerted calls are its planted hallucinations.
    for turn in range(6):
        drawn = draw_next(rates, scope, "ann", seed=0)
        assert drawn is not None
        verdict = Label(drawn.trace_id, drawn.span_id, drawn.stratum == "alerted", "ann", now + timedelta(seconds=turn),
                        inclusion_probability=drawn.inclusion_probability, stratum=drawn.stratum)  # fmt: skip
        insert_labels(client, database, [verdict], "review")
    report = rate_report(rates, scope)
    assert report.rate.value is not None and report.counts.mean_probability is not None
    (panel,) = [p for p in clickhouse_panels() if p.name == "rate_estimate_by_app"]
    one_bucket = QueryWindow(now - timedelta(hours=1), now + timedelta(seconds=1), 10**8)
    rows = {row["series"]: row["rate"] for row in _rows(client, expand(panel.query, one_bucket, database))}
    assert rows["default / verdict-corrected"] == pytest.approx(report.rate.value, abs=1e-4)
    assert rows["default / model-based"] == pytest.approx(report.counts.mean_probability, abs=1e-4)
    assert rows["default / unverified"] == pytest.approx(report.counts.unverified_calls / report.counts.calls)
    assert rows["hr / verdict-corrected"] is None  # nobody judged HR's calls
