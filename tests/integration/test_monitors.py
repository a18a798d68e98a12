"""A replayed traffic burst opens one monitor incident, groups the per-trace alerts, and resolves.

Real engines: embedded ClickHouse (chDB) holding findings rows built by the worker's own row
builders, the monitor's real queries, and the real Slack (slack-sdk) and PagerDuty (aiohttp)
destinations talking to the local fakes of tests/servers.py.  The clock is the test's.
"""

from __future__ import annotations

import asyncio
import dataclasses
import subprocess
import sys
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from clickhouse_connect.driver.client import Client
from pydantic import SecretStr

from detectors.base import DetectorResult
from detectors.verdict import CallJudgement, CallVerdict
from pipeline.alerting.alert import DeliveryStatus
from pipeline.alerting.dispatch import Dispatcher
from pipeline.alerting.routes import build_destinations
from pipeline.alerting.stage import _recorded
from pipeline.cli import main
from pipeline.config.alerting import AlertingSettings, RouteConfig
from pipeline.config.content_policy import STORE_ALL
from pipeline.config.monitors import MonitorConfig
from pipeline.monitors.evaluate import Action, Incident, IncidentStatus
from pipeline.monitors.grouping import OpenIncidents
from pipeline.monitors.runner import MonitorRunner
from pipeline.monitors.store import IncidentStore
from pipeline.sinks.clickhouse import migrate
from pipeline.sinks.rows import FINDING_COLUMNS, LLM_CALL_COLUMNS, finding_record, finding_row, llm_call_row
from tests.calls import make_llm_call
from tests.servers import PAGERDUTY_PATH, SLACK_POST_PATH, AlertingServer, Request
from tests.unit.test_alert_render import make_alert

pytestmark = pytest.mark.integration

START = datetime(2026, 3, 4, 10, 0, tzinfo=UTC)  # the burst ends here
CHANNEL = "#halluwatch-incidents"
MONITOR = MonitorConfig(route="page", min_calls=50, cooldown_minutes=30)


@pytest.fixture
def database(clickhouse: tuple[Client, str]) -> Iterator[tuple[Client, str]]:
    client, name = clickhouse
    migrate(client, name)
    yield client, name


@pytest.fixture
def server() -> Iterator[AlertingServer]:
    with AlertingServer() as fake:
        yield fake


def insert_calls(
    client: Client, database: str, service: str, start: datetime, count: int, flagged_every: int, tag: str
) -> None:
    """``count`` calls a minute-slice apart from ``start``; every ``flagged_every``-th flagged (its p 0.9).

    Every call also carries an ok schema finding and a flagged sentinel finding: a call counts
    once however many detectors saw it, and as flagged only by its ``llm_calls`` row.
    """
    rows, calls = [], []
    step = timedelta(seconds=10)
    for index in range(count):
        at = start + index * step
        call = make_llm_call(
            "An answer.",
            trace_id=f"{tag}{index:08d}".ljust(32, "0")[:32],
            service=service,
            model="gpt-4o-mini",
            operation="chat",
            start_time_unix_nano=int(at.timestamp() * 1e9),
            end_time_unix_nano=int(at.timestamp() * 1e9) + 1,
        )
        flagged = flagged_every > 0 and index % flagged_every == 0
        results = [
            DetectorResult("grounding", "1", 0.9 if flagged else 0.1, flagged, 0.5, severity=2 if flagged else 0),
            DetectorResult("schema_violation", "1", 0.0, False, 0.5),
            DetectorResult("sentinel", "1", 1.0, True, 0.5, severity=2),
        ]
        rows += [finding_row(finding_record(call, r, "t1", STORE_ALL.findings), at) for r in results]
        judgement = CallJudgement(CallVerdict(0.9 if flagged else 0.1, "v-test"), flagged)
        calls.append(llm_call_row(call, STORE_ALL.llm_calls, at, judgement))
    client.insert(f"{database}.findings", rows, column_names=FINDING_COLUMNS)
    client.insert(f"{database}.llm_calls", calls, column_names=LLM_CALL_COLUMNS)


def insert_baseline(client: Client, database: str, service: str, end: datetime = START) -> None:
    """Seven days of traffic from 90 minutes before to 90 minutes after ``end``'s time of day, 1 call in 30 flagged."""
    for days in range(1, 8):
        day_start = end - timedelta(days=days, hours=1, minutes=30)
        insert_calls(client, database, service, day_start, 1080, 30, f"b{days}{service[0]}")


def alerting(server: AlertingServer) -> AlertingSettings:
    return AlertingSettings(
        slack_bot_token=SecretStr("xoxb-test"),
        slack_base_url=server.slack_base_url,
        pagerduty_routing_key=SecretStr("pd-routing-key"),
        pagerduty_url=server.pagerduty_url,
        routes={
            "page": RouteConfig(pagerduty=True, slack_channel=CHANNEL),
            "slack": RouteConfig(),
            "log": RouteConfig(),
        },
        request_retries=0,
    )


def pages(server: AlertingServer) -> list[dict]:
    return [request.body for request in server.requests(PAGERDUTY_PATH)]


def posts(server: AlertingServer) -> list[Request]:
    return server.requests(SLACK_POST_PATH)


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now


def test_a_burst_opens_one_incident_groups_alerts_and_resolves_after_the_rate_falls(database, server):
    client, name = database
    for service in ("support-bot", "quiet-bot"):
        insert_baseline(client, name, service)
    # The burst: in the 10 minutes before START, half of support-bot's calls flagged; quiet-bot as usual.
    insert_calls(client, name, "support-bot", START - timedelta(minutes=10), 60, 2, "burst")
    insert_calls(client, name, "quiet-bot", START - timedelta(minutes=10), 60, 30, "quiet")

    config = alerting(server)
    store = IncidentStore(client, name)
    clock = Clock()
    destinations = build_destinations(config)

    async def save(incidents: Sequence[Incident]) -> None:
        store.insert(incidents)

    runner = MonitorRunner({"errors": MONITOR}, config, store, destinations.__getitem__, save, clock=clock)

    async def scenario() -> None:
        try:
            await steps()
        finally:
            await dispatcher.close()  # the destinations' HTTP sessions, which the runner shares

    dispatcher = Dispatcher(config, destinations)

    async def steps() -> None:
        # 1. The burst opens exactly one incident: one PagerDuty trigger, one Slack post.
        (opened,) = await runner.evaluate("errors")
        assert opened.action is Action.OPEN and opened.incident.key == ("default", "support-bot")
        assert opened.incident.rate == pytest.approx(0.5)
        assert opened.incident.baseline_rate == pytest.approx(1 / 30, abs=0.02)
        incident_id = opened.incident.incident_id
        (trigger,) = pages(server)
        assert (trigger["event_action"], trigger["dedup_key"]) == ("trigger", incident_id)
        assert "service support-bot" in trigger["payload"]["summary"]
        (first_post,) = posts(server)
        assert first_post.body["channel"] == CHANNEL and "thread_ts" not in first_post.body
        (stored,) = store.open_incidents()
        assert stored.incident_id == incident_id and stored.delivered
        thread = stored.slack_ts
        assert thread  # the ts the Slack fake answered with

        # 2. A minute later, still up: nothing new is sent.
        clock.now = START + timedelta(minutes=1)
        assert await runner.evaluate("errors") == []
        assert len(pages(server)) == 1 and len(posts(server)) == 1

        # 3. A per-trace alert of support-bot is grouped into the incident; one of quiet-bot pages alone.
        grouping = OpenIncidents(lambda: asyncio.to_thread(store.open_incidents), ["errors"])
        alerting_alert = dataclasses.replace(make_alert(), route="slack")
        other = dataclasses.replace(make_alert(trace_id="f" * 32), service="quiet-bot", route="log")
        bound, alone = await grouping.group([alerting_alert, other])
        assert bound.incident is not None and bound.incident.incident_id == incident_id and bound.route == "page"
        assert alone.incident is None
        outcomes = await dispatcher.dispatch(bound.route, [bound], lambda alert, destination: False)
        assert {_recorded(outcome) for outcome in outcomes} == {(DeliveryStatus.GROUPED, incident_id)}
        grouped_page = pages(server)[1]
        assert (grouped_page["event_action"], grouped_page["dedup_key"]) == ("trigger", incident_id)  # no new page
        assert posts(server)[1].body["thread_ts"] == thread

        # 4. The rate falls: the incident resolves, in PagerDuty and in the Slack thread.
        insert_calls(client, name, "support-bot", START + timedelta(minutes=20), 90, 30, "calm1")
        clock.now = START + timedelta(minutes=35)
        (resolved,) = await runner.evaluate("errors")
        assert resolved.action is Action.RESOLVE and resolved.incident.incident_id == incident_id
        resolve = pages(server)[2]
        assert resolve == {"routing_key": "pd-routing-key", "dedup_key": incident_id, "event_action": "resolve"}
        follow_up = posts(server)[2]
        assert follow_up.body["thread_ts"] == thread and "Resolved" in follow_up.body["text"]
        assert store.open_incidents() == []
        assert store.latest("errors")[("default", "support-bot")].status is IncidentStatus.RESOLVED

        # 5. Another burst within the cool-down opens nothing; after it, a new incident opens.
        insert_calls(client, name, "support-bot", START + timedelta(minutes=45), 60, 2, "burst2")
        clock.now = START + timedelta(minutes=55)
        assert await runner.evaluate("errors") == []
        assert len(pages(server)) == 3
        insert_calls(client, name, "support-bot", START + timedelta(minutes=56), 60, 2, "burst3")
        clock.now = START + timedelta(minutes=66)
        (reopened,) = await runner.evaluate("errors")
        assert reopened.action is Action.OPEN and reopened.incident.incident_id != incident_id
        assert pages(server)[3]["dedup_key"] == reopened.incident.incident_id

    asyncio.run(scenario())


def test_a_failing_query_logs_one_line_and_sends_nothing(database, server, caplog):
    client, _ = database
    config = alerting(server)
    store = IncidentStore(client, "no_such_database")

    async def save(incidents: Sequence[Incident]) -> None:
        raise AssertionError("nothing to save")

    runner = MonitorRunner({"errors": MONITOR}, config, store, build_destinations(config).__getitem__, save)
    assert asyncio.run(runner.evaluate("errors")) == []
    (line,) = [r for r in caplog.records if r.name == "pipeline.monitors.runner"]
    assert "monitor errors: ClickHouse query failed" in line.getMessage()
    assert server.requests() == []


def write_config(path: Path, **settings: object) -> Path:
    monitors = {"errors": {"route": "page", "min_calls": 50}}
    path.write_text(yaml.safe_dump({"monitors": monitors, **settings}))
    return path


def test_the_monitors_command_shows_rates_baselines_and_open_incidents(database, server, chdb_path, tmp_path):
    client, name = database
    end = datetime.now(UTC).replace(second=0, microsecond=0)  # the command reads the wall clock
    insert_baseline(client, name, "support-bot", end)
    insert_calls(client, name, "support-bot", end - timedelta(minutes=10), 60, 2, "burst")
    insert_calls(client, name, "new-bot", end - timedelta(minutes=10), 60, 2, "new")  # no history at all
    config = alerting(server)
    store = IncidentStore(client, name)

    async def save(incidents: Sequence[Incident]) -> None:
        store.insert(incidents)

    destinations = build_destinations(config)
    runner = MonitorRunner({"errors": MONITOR}, config, store, destinations.__getitem__, save, clock=lambda: end)
    (opened,) = asyncio.run(runner.evaluate("errors"))
    asyncio.run(Dispatcher(config, destinations).close())

    env = {"HALLUWATCH_CLICKHOUSE_DSN": f"chdb://{chdb_path}", "HALLUWATCH_CLICKHOUSE_DATABASE": name}
    result = CliRunner(env=env).invoke(main, ["monitors", "--config", str(write_config(tmp_path / "c.yaml"))])
    assert result.exit_code == 0, result.output
    header, *groups = result.output.splitlines()
    assert header.startswith("errors: route page, by policy, service; 15 min against 7 days")
    support_bot, new_bot = groups  # the open incident first
    assert support_bot.startswith(
        "  default / support-bot:  50.0% of 60 calls, baseline 3.3% (same hour), opens at 6.7%"
    )
    assert support_bot.endswith(f"OPEN since {end:%Y-%m-%d %H:%M} UTC ({opened.incident.incident_id})")
    assert new_bot == "  default / new-bot:  50.0% of 60 calls, no baseline yet"


def test_the_monitors_command_says_in_one_line_when_clickhouse_is_out_of_reach(tmp_path):
    config = write_config(tmp_path / "c.yaml", clickhouse_dsn="http://halluwatch:hunter2-secret@127.0.0.1:1/")
    result = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", "monitors", "--config", str(config)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 1
    (line,) = result.stderr.splitlines()
    source = f"clickhouse_dsn in config file {config}"
    assert line.startswith(f"Error: cannot reach ClickHouse at 127.0.0.1:1 (from {source}): connection refused; ")
    assert "hunter2-secret" not in line
