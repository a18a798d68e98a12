"""Where each application's alerts land: the routes its rules name, re-pointed by its policy, in priority order.

An application's policy may replace the rules and re-point their route names
(``routes: {page: hr-oncall}``): its alerts are then stored under the route they went to
(``hr-oncall``), never under the rule's name for it.  What measures a route's false alarms
lists these, so that every route an application alerts on is there with its own target.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from pipeline.config.alerting import AlertingSettings, AlertRule
from pipeline.config.policy import DEFAULT_POLICY, AppPolicy


@dataclass(frozen=True, slots=True)
class AlertRoutes:
    """Each application's alert routes in its rules' (priority) order, and each configured route's target."""

    by_app: Mapping[str, tuple[str, ...]]  # policy name -> routes; DEFAULT_POLICY: the calls no policy matched
    targets: Mapping[str, float]  # route -> its false_alarm_target

    @classmethod
    def configured(cls, alerting: AlertingSettings, policies: Mapping[str, AppPolicy]) -> AlertRoutes:
        """The routes of ``alerting``'s rules, and of each policy's own rules and route names."""
        by_app = {DEFAULT_POLICY: _landing(alerting.rules, {})}
        for name, policy in policies.items():
            by_app[name] = _landing(alerting.rules if policy.rules is None else policy.rules, policy.routes)
        return cls(by_app, {name: route.false_alarm_target for name, route in alerting.routes.items()})

    def of(self, app: str) -> tuple[str, ...]:
        """``app``'s routes; an application this configuration does not name (any more) has the default's."""
        return self.by_app.get(app, self.by_app[DEFAULT_POLICY])

    def listed(self, app: str, taken: Iterable[str] = ()) -> list[str]:
        """The routes to report for ``app`` (every application's when empty), then any other an alert ``taken``."""
        ordered = list(self.of(app)) if app else [route for routes in self.by_app.values() for route in routes]
        return list(dict.fromkeys([*ordered, *sorted(set(taken))]))

    def ahead_of(self, route: str, app: str) -> frozenset[str]:
        """``route`` and the routes before it in ``app``'s order: an alert on any of them is at its level or above."""
        order = self.of(app)
        return frozenset(order[: order.index(route) + 1]) if route in order else frozenset({route})


def _landing(rules: Iterable[AlertRule], renamed: Mapping[str, str]) -> tuple[str, ...]:
    """The routes ``rules`` alert on once ``renamed``, each once, in rule order."""
    return tuple(dict.fromkeys(renamed.get(rule.route, rule.route) for rule in rules))
