"""Review verdicts that show a route breaking its false-alarm target open an incident through the monitors.

Real engines: embedded ClickHouse holding calls, findings and alerts built by the worker's row
builders, audit verdicts stored as the review page stores them (with their stratum and
inclusion probability), the monitor's real queries and estimate, and the real PagerDuty and
Slack destinations talking to the local fakes of tests/servers.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pytest

from detectors.base import DetectorResult
from detectors.verdict import CallJudgement, CallVerdict
from pipeline.alerting.alert import DeliveryStatus
from pipeline.alerting.alert_row import alert_row
from pipeline.alerting.dispatch import Dispatcher
from pipeline.alerting.routes import build_destinations
from pipeline.config.alert_routes import AlertRoutes
from pipeline.config.content_policy import STORE_ALL
from pipeline.config.monitors import MonitorConfig
from pipeline.monitors.evaluate import Action, Incident
from pipeline.monitors.runner import MonitorRunner
from pipeline.monitors.store import IncidentStore
from pipeline.rate.false_alarms import route_false_alarms
from pipeline.rate.sampler import ALERTED, Strata
from pipeline.rate.store import RateStore, Scope
from pipeline.sinks.labels import Label, insert_labels, to_utc_ms
from pipeline.sinks.rows import (
    ALERT_COLUMNS,
    FINDING_COLUMNS,
    LLM_CALL_COLUMNS,
    finding_record,
    finding_row,
    llm_call_row,
)
from tests.calls import make_llm_call
from tests.integration.test_monitors import alerting, database, pages, posts, server  # noqa: F401 - fixtures
from tests.unit.test_alert_render import make_alert

pytestmark = pytest.mark.integration

NOW = datetime.now(UTC).replace(microsecond=0)
CALLS, PAGED, FAITHFUL_PAGED = 200, 40, 30


def _store_traffic(client, db: str) -> None:
    """200 calls of the default application at p 0.95; 40 paged, 30 of those faithful; 80 judged in the queue."""
    findings, calls, alerts, labels = [], [], [], []
    for index in range(CALLS):
        trace = f"{index:032x}"
        at = NOW - timedelta(hours=1, seconds=index)
        call = make_llm_call("An answer.", trace_id=trace, start_time_unix_nano=int(at.timestamp() * 1e9),
                             end_time_unix_nano=int(at.timestamp() * 1e9) + 1)  # fmt: skip
        result = DetectorResult("grounding", "1", 0.9, True, 0.5, severity=2)
        findings.append(finding_row(finding_record(call, result, "t1", STORE_ALL.findings), at))
        calls.append(llm_call_row(call, STORE_ALL.llm_calls, at, CallJudgement(CallVerdict(0.95, "v"), True)))
        paged = index < PAGED
        if paged:
            alerts.append(alert_row(make_alert(trace_id=trace), "pagerduty", DeliveryStatus.DELIVERED, 1, "", at))
        if paged or index < PAGED + 40:  # every paged call judged, and 40 of the 160 others
            stratum, drawn = (ALERTED, (index + 1) / PAGED) if paged else ("p 0.90-1.00", (index - PAGED + 1) / 160)
            hallucinated = paged and index >= FAITHFUL_PAGED
            labels.append(Label(trace, call.span_id, hallucinated, "reviewer", to_utc_ms(NOW),
                                inclusion_probability=drawn, stratum=stratum))  # fmt: skip
    client.insert(f"{db}.findings", findings, column_names=FINDING_COLUMNS)
    client.insert(f"{db}.llm_calls", calls, column_names=LLM_CALL_COLUMNS)
    client.insert(f"{db}.alerts", alerts, column_names=ALERT_COLUMNS)
    insert_labels(client, db, labels, source="review")


def test_verdicts_showing_pages_above_target_open_a_recalibrate_incident(database, server):  # noqa: F811
    client, name = database
    _store_traffic(client, name)
    config = alerting(server)  # the page route's target: 3 %
    rates = RateStore(client, name, Strata((0.1, 0.5, 0.9)))
    routes = AlertRoutes.configured(config, {})
    scope = Scope(NOW - timedelta(days=7), NOW + timedelta(seconds=1), app="default")
    page = next(r for r in route_false_alarms(rates, scope, routes) if r.route == "page")
    # 30 faithful calls paged, of the 30 + 160 faithful calls the verdicts stand for.
    assert page.false_alarms.value == pytest.approx(30 / 190) and page.over_target
    assert page.precision.value == pytest.approx(10 / 40)

    store = IncidentStore(client, name)

    async def save(incidents: Sequence[Incident]) -> None:
        store.insert(incidents)

    def measured(now: datetime):
        return [("default", r) for r in route_false_alarms(rates, scope, routes)]

    monitors = {"false-alarms": MonitorConfig(route="page", kind="false_alarms")}
    destinations = build_destinations(config)
    runner = MonitorRunner(monitors, config, store, destinations.__getitem__, save, false_alarms=measured)

    async def scenario() -> list:
        first = await runner.evaluate("false-alarms")
        again = await runner.evaluate("false-alarms")  # still above, unchanged: nothing new is sent
        await Dispatcher(config, destinations).close()  # the destinations' HTTP sessions
        return [first, again]

    first, again = asyncio.run(scenario())
    # Slack's target counts every alert, pages included: both routes break theirs.
    assert {(d.incident.key, d.action) for d in first} == {(("default", "page"), Action.OPEN),
                                                           (("default", "slack"), Action.OPEN)}  # fmt: skip
    assert again == []
    summaries = [trigger["payload"]["summary"] for trigger in pages(server)]
    summary = next(s for s in summaries if s.startswith("recalibrate default: page:"))
    assert summary.startswith("recalibrate default: page: 15.8 % false alarms, 95 % CI") and "target 3.0 %" in summary
    assert any("recalibrate default: page" in post.body["text"] for post in posts(server))
    stored = {incident.key: incident for incident in store.open_incidents()}
    assert (
        stored[("default", "page")].rate == pytest.approx(30 / 190)
        and stored[("default", "page")].baseline_rate == 0.03
    )
