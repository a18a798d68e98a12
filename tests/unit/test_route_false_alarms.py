"""Each route an application alerts on is measured: its policy's own destinations, not only the global rules' routes.

The demo's policies: hr re-points page and slack to hr-oncall, order-extraction pages on slack.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from pipeline.config.alert_routes import AlertRoutes
from pipeline.config.alerting import AlertingSettings, RouteConfig, default_routes
from pipeline.config.policy import AppPolicy
from pipeline.rate.false_alarms import false_alarm_lines, false_alarms_of
from pipeline.rate.report import report_lines, report_of
from pipeline.rate.store import AuditVerdict, Scope, ScopeCounts
from pipeline.tools.demo import DEMO_POLICIES, DEMO_ROUTES

ALERTED, QUIET = "hr / alerted", "hr / p 0.00-0.10"
ONCALL = frozenset({"hr-oncall"})
# hr's three alerted calls, all judged (two hallucinated, one faithful), and 4 of its 20 quiet calls, all faithful.
COUNTS = ScopeCounts(population={ALERTED: 3, QUIET: 20}, calls=23)
VERDICTS = [AuditVerdict(ALERTED, True, True, ONCALL), AuditVerdict(ALERTED, True, True, ONCALL),
            AuditVerdict(ALERTED, False, True, ONCALL)] + [AuditVerdict(QUIET, False, False)] * 4  # fmt: skip


@pytest.fixture
def routes() -> AlertRoutes:
    alerting = AlertingSettings(routes={**default_routes(), **{n: RouteConfig(**r) for n, r in DEMO_ROUTES.items()}})
    policies = {name: AppPolicy.model_validate(policy) for name, policy in DEMO_POLICIES.items()}
    return AlertRoutes.configured(alerting, policies)


def test_a_policy_that_re_points_its_routes_is_measured_on_its_own_route(routes: AlertRoutes):
    assert routes.of("hr") == ("hr-oncall",)
    assert routes.of("order-extraction") == ("slack",)
    assert routes.of("default") == routes.of("an app no policy names") == ("page", "slack")

    (oncall,) = false_alarms_of("hr", COUNTS, VERDICTS, routes)
    assert oncall.route == "hr-oncall" and oncall.target == pytest.approx(0.03)
    # One faithful call alerted among the 3 + 20 the verdicts stand for: 1 of 21 faithful.
    assert oncall.false_alarms.value == pytest.approx(1 / 21)
    report = report_of(Scope(datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 8, tzinfo=UTC), app="hr"),
                       COUNTS, VERDICTS)  # fmt: skip
    assert oncall.precision.value == pytest.approx(2 / 3) == report.precision.value, "the totals agree with the line"
    lines = report_lines(report, 0.02) + false_alarm_lines([oncall], "hr")
    assert any(line.startswith("  alert rule precision: 66.7 %") for line in lines)
    assert any(line.startswith("  hr-oncall: 4.8 % false alarms") and line.endswith("precision 0.67") for line in lines)
    assert not any("page" in line or "slack" in line for line in lines)


def test_every_app_lists_every_route_and_a_route_no_longer_configured_is_listed_without_a_target(routes: AlertRoutes):
    everywhere = [route.route for route in false_alarms_of("", COUNTS, VERDICTS, routes)]
    assert everywhere == ["page", "slack", "hr-oncall"]

    pager = frozenset({"hr-pager"})  # alerts sent before hr's routes were renamed
    renamed = [AuditVerdict(ALERTED, False, True, pager), AuditVerdict(ALERTED, True, True, pager), *VERDICTS[2:]]
    measured = {route.route: route for route in false_alarms_of("hr", COUNTS, renamed, routes)}
    assert list(measured) == ["hr-oncall", "hr-pager"]
    old = measured["hr-pager"]
    assert old.target is None and not old.over_target
    assert old.words().endswith("no target: not in alerting.routes; precision 0.50")
