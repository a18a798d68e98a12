"""Rate monitors without services: settings, the decision core, grouping and what incidents render to."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from pipeline.alerting.alert import Alert, DeliveryStatus, IncidentRef
from pipeline.alerting.console import ConsoleDestination
from pipeline.alerting.dispatch import Outcome
from pipeline.alerting.render import pagerduty_event, pagerduty_incident_event
from pipeline.alerting.stage import _recorded
from pipeline.config.alerting import AlertingSettings
from pipeline.config.monitors import MonitorConfig
from pipeline.config.settings import ConfigError, load_settings
from pipeline.monitors.evaluate import (
    Action,
    Counts,
    GroupRates,
    Incident,
    IncidentStatus,
    baseline_rate,
    decide,
    decide_all,
    open_threshold,
    resolve_threshold,
)
from pipeline.monitors.grouping import OpenIncidents, grouped
from tests.unit.test_alert_render import make_alert

NOW = datetime(2026, 3, 4, 10, 0, tzinfo=UTC)
CONFIG = MonitorConfig(
    route="page", group_by=["service"], min_calls=50, min_ratio=2.0, min_increase=0.02, recover_ratio=1.5
)
KEY = ("support-bot",)


def rates(window: tuple[int, int], same_hour: tuple[int, int] = (700, 14), period: tuple[int, int] = (0, 0)):
    """Counts as (calls, flagged); the default baseline is the same hour at 2%."""
    return GroupRates(KEY, Counts(*window), Counts(*same_hour), Counts(*period))


def incident(**changes) -> Incident:
    opened = Incident(
        incident_id="errors:abc:20260304T094500Z",
        monitor="errors",
        route="page",
        group_by=("service",),
        key=KEY,
        status=IncidentStatus.OPEN,
        opened_at=NOW - timedelta(minutes=15),
        updated_at=NOW - timedelta(minutes=15),
        resolved_at=None,
        rate=0.2,
        baseline_rate=0.02,
        calls=100,
        flagged=20,
        slack_channel="#alerts",
        slack_ts="1700000000.000100",
        delivered=True,
    )
    return dataclasses.replace(opened, **changes)


# --- settings ----------------------------------------------------------------------------


def write(tmp_path: Path, monitors: dict) -> Path:
    path = tmp_path / "halluwatch.yaml"
    path.write_text(yaml.safe_dump({"monitors": monitors}))
    return path


def test_no_monitors_by_default(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("HALLUWATCH_CONFIG", raising=False)
    assert load_settings().monitors == {}


def test_a_monitor_reads_from_the_settings_file(tmp_path: Path):
    settings = load_settings(write(tmp_path, {"errors": {"route": "slack", "group_by": ["service", "model"]}}))
    assert settings.monitors["errors"].group_by == ["service", "model"]
    assert settings.monitors["errors"].window_minutes == 15


@pytest.mark.parametrize(
    ("monitor", "message"),
    [
        ({"route": "nowhere"}, "errors -> nowhere"),
        ({"route": "page", "group_by": ["tenant"]}, "monitors.errors.group_by.0"),
        ({"route": "page", "group_by": ["service", "service"]}, "twice"),
        ({"route": "page", "group_by": []}, "monitors.errors.group_by"),
        ({"route": "page", "min_ratio": 2.0, "recover_ratio": 2.0}, "recover_ratio"),
        ({"route": "page", "windw_minutes": 5}, "windw_minutes"),
    ],
)
def test_bad_monitors_fail_at_start_up_naming_what_is_wrong(tmp_path: Path, monitor: dict, message: str):
    with pytest.raises(ConfigError, match=message):
        load_settings(write(tmp_path, {"errors": monitor}))


def test_a_monitor_name_must_be_usable_in_an_incident_id(tmp_path: Path):
    with pytest.raises(ConfigError, match="'bad name'"):
        load_settings(write(tmp_path, {"bad name": {"route": "page"}}))


# --- the baseline ------------------------------------------------------------------------


def test_the_same_hour_is_the_baseline_when_it_has_enough_calls():
    assert baseline_rate(rates((100, 5), same_hour=(60, 3), period=(5000, 500)), 50) == pytest.approx(0.05)


def test_a_thin_same_hour_falls_back_to_the_whole_period():
    assert baseline_rate(rates((100, 5), same_hour=(10, 5), period=(5000, 100)), 50) == pytest.approx(0.02)


def test_without_enough_calls_anywhere_there_is_no_baseline_and_nothing_opens():
    thin = rates((1000, 900), same_hour=(10, 0), period=(40, 0))
    assert baseline_rate(thin, 50) is None
    assert decide("errors", CONFIG, thin, None, NOW) is None


def test_thresholds_take_the_larger_of_ratio_and_increase_and_resolve_part_way_down():
    assert open_threshold(CONFIG, 0.10) == pytest.approx(0.20)  # the ratio decides
    assert resolve_threshold(CONFIG, 0.10) == pytest.approx(0.15)  # recover_ratio x baseline
    assert open_threshold(CONFIG, 0.001) == pytest.approx(0.021)  # the increase decides
    assert resolve_threshold(CONFIG, 0.0) == pytest.approx(0.01)  # a zero baseline still resolves


# --- opening -----------------------------------------------------------------------------


def test_a_rate_well_above_its_baseline_opens_one_incident():
    decision = decide("errors", CONFIG, rates((200, 30)), None, NOW)
    assert decision is not None and decision.action is Action.OPEN
    opened = decision.incident
    assert (opened.status, opened.rate, opened.baseline_rate) == (IncidentStatus.OPEN, 0.15, 0.02)
    assert (opened.calls, opened.flagged, opened.opened_at, opened.route) == (200, 30, NOW, "page")
    assert opened.incident_id.startswith("errors:") and opened.incident_id.endswith(":20260304T100000Z")
    assert opened.group == {"service": "support-bot"}
    assert not opened.delivered


def test_too_few_calls_in_the_window_open_nothing():
    assert decide("errors", CONFIG, rates((49, 40)), None, NOW) is None


def test_a_doubled_but_tiny_rate_does_not_open():
    small = rates((10_000, 20), same_hour=(10_000, 10))  # 0.1% -> 0.2%: twice the baseline, 0.1 points up
    assert decide("errors", CONFIG, small, None, NOW) is None


def test_a_rise_below_the_ratio_does_not_open():
    assert decide("errors", CONFIG, rates((100, 35), same_hour=(1000, 200)), None, NOW) is None  # 35% vs 20%


def test_the_cooldown_keeps_a_resolved_group_from_reopening():
    resolved = incident(status=IncidentStatus.RESOLVED, resolved_at=NOW - timedelta(minutes=29))
    assert decide("errors", CONFIG, rates((200, 60)), resolved, NOW) is None
    later = NOW + timedelta(minutes=2)
    decision = decide("errors", CONFIG, rates((200, 60)), resolved, later)
    assert decision is not None and decision.action is Action.OPEN
    assert decision.incident.incident_id != resolved.incident_id


# --- while open --------------------------------------------------------------------------


def test_an_open_incident_stays_quiet_while_the_rate_holds():
    assert decide("errors", CONFIG, rates((100, 21)), incident(), NOW) is None


def test_a_material_change_updates_at_most_once_per_window():
    doubled = rates((100, 40))  # 40% against the 20% last sent
    decision = decide("errors", CONFIG, doubled, incident(), NOW)
    assert decision is not None and decision.action is Action.UPDATE
    assert (decision.incident.rate, decision.incident.version, decision.incident.opened_at) == (
        0.4,
        2,
        NOW - timedelta(minutes=15),
    )
    just_sent = incident(updated_at=NOW - timedelta(minutes=5))
    assert decide("errors", CONFIG, doubled, just_sent, NOW) is None


def test_hysteresis_holds_the_incident_between_the_thresholds_and_resolves_below():
    assert decide("errors", CONFIG, rates((100, 4)), incident(rate=0.04, updated_at=NOW), NOW) is None  # 4% >= 3%
    decision = decide("errors", CONFIG, rates((100, 2)), incident(), NOW)
    assert decision is not None and decision.action is Action.RESOLVE
    assert decision.incident.status is IncidentStatus.RESOLVED and decision.incident.resolved_at == NOW
    assert decision.incident.incident_id == incident().incident_id


def test_a_thin_window_holds_an_open_incident():
    assert decide("errors", CONFIG, rates((10, 0)), incident(), NOW) is None


def test_an_event_that_did_not_reach_every_destination_is_sent_again():
    decision = decide("errors", CONFIG, rates((100, 21)), incident(delivered=False), NOW)
    assert decision is not None and decision.action is Action.UPDATE
    held = decide("errors", CONFIG, rates((10, 0)), incident(delivered=False), NOW)  # even when too thin to judge
    assert held is not None and held.action is Action.UPDATE


def test_an_open_incident_without_any_calls_now_is_still_considered():
    other = GroupRates(("other-bot",), Counts(200, 2), Counts(700, 14), Counts())
    assert decide_all("errors", CONFIG, [other], {KEY: incident()}, NOW) == []
    (resend,) = decide_all("errors", CONFIG, [other], {KEY: incident(delivered=False)}, NOW)
    assert resend.incident.key == KEY


# --- grouping ----------------------------------------------------------------------------


def test_an_alert_of_an_open_incidents_group_is_bound_for_it():
    alert = dataclasses.replace(make_alert(), route="slack")
    by_model = incident(group_by=("model",), key=("gpt-4o",), incident_id="by-model")
    bound = grouped(alert, [by_model, incident()])
    assert bound.incident == IncidentRef(incident().incident_id, "#alerts", "1700000000.000100")
    assert bound.route == "page"  # the incident's route: its PagerDuty incident and its Slack thread
    assert grouped(dataclasses.replace(alert, service="other-bot"), [incident()]).incident is None


def test_grouping_reads_incidents_through_a_cache_and_survives_a_failed_read():
    reads: list[float] = []
    now = [0.0]

    async def read() -> list[Incident]:
        reads.append(now[0])
        if len(reads) == 2:
            raise ConnectionError("ClickHouse down")
        return [incident(), incident(monitor="removed", incident_id="old")]

    cache = OpenIncidents(read, ["errors"], ttl_seconds=5, clock=lambda: now[0])
    alert = make_alert()
    first = asyncio.run(cache.group([alert]))
    assert first[0].incident is not None and first[0].incident.incident_id == incident().incident_id
    now[0] = 3.0
    asyncio.run(cache.group([alert]))
    now[0] = 6.0
    after_failure = asyncio.run(cache.group([alert]))
    assert reads == [0.0, 6.0]
    assert after_failure[0].incident == first[0].incident  # the last list stands


def test_a_grouped_alert_round_trips_and_pages_under_the_incidents_dedup_key():
    ref = IncidentRef("errors:abc:20260304T094500Z", "#alerts", "1700000000.000100")
    alert = dataclasses.replace(make_alert(), policy="strict", incident=ref)
    assert Alert.from_json(alert.to_json()) == alert
    assert pagerduty_event(alert, AlertingSettings(), "key")["dedup_key"] == ref.incident_id
    assert pagerduty_event(make_alert(), AlertingSettings(), "key")["dedup_key"] == make_alert().alert_id


def test_an_alert_from_before_policies_and_incidents_still_parses():
    raw = make_alert().to_dict()
    del raw["policy"], raw["incident"]
    assert Alert.from_dict(raw) == make_alert()


def test_a_delivery_into_an_incident_is_recorded_as_grouped_with_its_id():
    ref = IncidentRef("errors:abc:20260304T094500Z")
    sent = Outcome(
        dataclasses.replace(make_alert(), incident=ref),
        ConsoleDestination(AlertingSettings()),
        DeliveryStatus.DELIVERED,
        1,
    )
    assert _recorded(sent) == (DeliveryStatus.GROUPED, ref.incident_id)
    failed = dataclasses.replace(sent, status=DeliveryStatus.RETRYING, error="HTTP 503")
    assert _recorded(failed) == (DeliveryStatus.RETRYING, "HTTP 503")
    alone = dataclasses.replace(sent, alert=make_alert())
    assert _recorded(alone) == (DeliveryStatus.DELIVERED, "")


# --- rendering ---------------------------------------------------------------------------


def test_pagerduty_triggers_then_resolves_the_incident_under_one_dedup_key():
    opened = decide("errors", CONFIG, rates((200, 30)), None, NOW)
    assert opened is not None
    trigger = pagerduty_incident_event(opened.note(CONFIG, 4), AlertingSettings(), "key")
    assert trigger["event_action"] == "trigger" and trigger["payload"]["severity"] == "critical"
    assert "15.0% of calls flagged vs 2.0% baseline" in trigger["payload"]["summary"]
    assert "service support-bot" in trigger["payload"]["summary"]
    resolved = decide("errors", CONFIG, rates((200, 2)), dataclasses.replace(opened.incident, delivered=True), NOW)
    assert resolved is not None
    resolve = pagerduty_incident_event(resolved.note(CONFIG, 4), AlertingSettings(), "key")
    assert resolve == {"routing_key": "key", "dedup_key": trigger["dedup_key"], "event_action": "resolve"}
