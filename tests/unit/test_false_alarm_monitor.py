"""The false_alarms monitor: open only when the verdicts put a route above target with confidence, resolve under it."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from pipeline.config.monitors import MonitorConfig
from pipeline.monitors.evaluate import Action, IncidentStatus
from pipeline.monitors.false_alarms import decide_false_alarms
from pipeline.rate.estimator import Estimate
from pipeline.rate.false_alarms import RouteFalseAlarms

NOW = datetime(2026, 5, 1, 12, tzinfo=UTC)
CONFIG = MonitorConfig(route="slack", kind="false_alarms", cooldown_minutes=30)
KEY = ("hr", "page")


def page(value: float | None, low: float | None, high: float | None) -> RouteFalseAlarms:
    return RouteFalseAlarms("page", 0.01, Estimate(value, low, high, 120, 0), Estimate(0.6, 0.4, 0.8, 20, 0))


def test_an_interval_reaching_the_target_opens_nothing_one_wholly_above_it_opens_with_the_numbers():
    assert decide_false_alarms("fa", CONFIG, {KEY: page(0.024, 0.008, 0.05)}, {}, NOW) == []
    (opened,) = decide_false_alarms("fa", CONFIG, {KEY: page(0.024, 0.013, 0.041)}, {}, NOW)
    assert opened.action is Action.OPEN and opened.incident.route == "slack" and opened.incident.key == KEY
    assert opened.summary == (
        "recalibrate hr: page: 2.4 % false alarms, 95 % CI 1.3-4.1 %, target 1.0 % ABOVE TARGET; precision 0.60"
    )
    note = opened.note(CONFIG, 4)
    assert note.headline == opened.summary


def test_an_open_incident_resolves_once_the_estimate_is_back_under_target_and_stays_shut_in_the_cooldown():
    (opened,) = decide_false_alarms("fa", CONFIG, {KEY: page(0.024, 0.013, 0.041)}, {}, NOW)
    incident = replace(opened.incident, delivered=True)
    later = NOW + timedelta(hours=1)
    assert decide_false_alarms("fa", CONFIG, {KEY: page(0.025, 0.014, 0.042)}, {KEY: incident}, later) == []
    (resolved,) = decide_false_alarms("fa", CONFIG, {KEY: page(0.006, 0.001, 0.03)}, {KEY: incident}, later)
    assert resolved.action is Action.RESOLVE and resolved.incident.status is IncidentStatus.RESOLVED
    assert resolved.note(CONFIG, 4).headline.startswith("Resolved: recalibrate hr: page: 0.6 %")
    again = decide_false_alarms("fa", CONFIG, {KEY: page(0.03, 0.02, 0.05)}, {KEY: resolved.incident}, later)
    assert again == []
