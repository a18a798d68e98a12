"""One table of destination types: routes, ``doctor`` and ``policy explain`` read the same answers."""

from __future__ import annotations

from pydantic import SecretStr

from pipeline.alerting.routes import DESTINATION_TYPES, build_destinations, describe_route
from pipeline.config.alerting import AlertingSettings, RouteConfig
from pipeline.tools.doctor import alert_routes

ROUTES = {
    "oncall": RouteConfig(pagerduty=True, pagerduty_routing_key=SecretStr("team-key")),  # its own service only
    "page": RouteConfig(pagerduty=True, slack_channel="#oncall"),
    "team": RouteConfig(slack_webhook_url=SecretStr("https://hooks.example/T/B/x")),
    "log": RouteConfig(),
}


def test_a_route_with_its_own_pagerduty_key_pages_and_doctor_says_so() -> None:
    config = AlertingSettings(routes=ROUTES, rules=[])  # no global key, no Slack token
    built = {route: [d.name for d in ds] for route, ds in build_destinations(config).items()}
    check = alert_routes(config)
    assert built["oncall"] == ["pagerduty:oncall"]
    assert "oncall -> pagerduty (own service)" in check.detail  # was "oncall -> log"
    assert describe_route(config, "oncall") == "pagerduty (own service)"
    # The page route asks for Slack and the global PagerDuty key, and has neither: doctor names both.
    assert built["page"] == ["console"]
    assert "page -> log" in check.detail
    assert "page (HALLUWATCH_ALERTING__SLACK_BOT_TOKEN, HALLUWATCH_ALERTING__PAGERDUTY_ROUTING_KEY)" in check.detail
    assert check.warning
    assert describe_route(config, "page") == "slack #oncall, pagerduty"


def test_routes_doctor_and_explanations_agree_on_every_route() -> None:
    config = AlertingSettings(
        routes=ROUTES, rules=[], slack_bot_token=SecretStr("xoxb-1"), pagerduty_routing_key=SecretStr("global")
    )
    check = alert_routes(config)
    table = build_destinations(config)
    assert not check.warning
    for route in ROUTES:
        doctor_says = check.detail.split(f"{route} -> ", 1)[1].split(";")[0]
        delivered = [d.name for d in table[route]]
        asked = describe_route(config, route)
        assert (doctor_says == "log") == (delivered == ["console"]) == (asked == "the worker's log")
        if doctor_says != "log":
            assert doctor_says == asked
    assert {d.name for d in table["page"]} == {"slack:#oncall", "pagerduty"}


def test_every_route_field_belongs_to_one_destination_type() -> None:
    owned = [field for kind in DESTINATION_TYPES for field in kind.fields]
    assert len(owned) == len(set(owned))
    of_the_route = {"max_per_minute", "false_alarm_target"}  # the route's own, whatever its destinations
    assert set(owned) == set(RouteConfig.model_fields) - of_the_route
