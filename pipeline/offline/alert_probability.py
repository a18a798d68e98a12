"""Per alert route, the lowest ``p_hallucination`` its rules need to keep false alarms under a target.

A rule with ``min_probability: route`` fires only when its detectors agree *and* the call's
calibrated probability reaches its route's minimum.  The minimum is chosen on labelled calls:
walking routes in rule order (a call the page rules no longer take may fall to a Slack rule),
each gets the lowest candidate at which the share of faithful calls alerted on it, or on a
route before it, stays under the route's target in every group of calls (each labelled data
set, or one group), on the fitting side.  The same records' held-out side shows what the
choice keeps.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from pipeline.agreement.rules import AgreementRule
from pipeline.config.alerting import ROUTE_PROBABILITY, AlertingSettings, AlertRule

# Groups with fewer faithful fitting calls than this say nothing about a rate of 1-3 %; when no
# group has as many, all of them are judged.
MIN_FAITHFUL_PER_GROUP = 50
_CLOSED = 1.0 + 1e-9  # a minimum no probability reaches: the route's gated rules never fire
_MARGIN = 0.01  # past the highest probability a route sees, the minimum that excludes it


@dataclass(frozen=True, slots=True)
class GatedCall:
    """What the alert rules see of one labelled call."""

    flags: Mapping[str, int]  # detectors that flagged it as hallucinated -> severity
    probability: float | None
    hallucinated: bool
    group: str = ""  # e.g. the data set; the target must hold in each group
    held_out: bool = False


@dataclass(frozen=True, slots=True)
class RouteRates:
    """Faithful calls alerted on a route (as a share of the faithful) and hallucinated ones it caught."""

    false_alarm_rate: float
    recall: float
    faithful: int
    hallucinated: int


@dataclass(frozen=True, slots=True)
class RouteMinimum:
    """The chosen minimum of one route, its target, and what it does on each side of the split.

    The rates count alerts on this route and on the gated routes before it, as the target does.
    """

    route: str
    min_probability: float
    target: float
    fitting: RouteRates
    held_out: RouteRates | None
    worst_group: str  # the group whose false alarms decided the minimum

    def to_dict(self) -> dict[str, float | str]:
        """The thresholds file's ``alert_probability.<route>`` entry."""
        entry: dict[str, float | str] = {
            "min_probability": round(self.min_probability, 4),
            "false_alarm_target": self.target,
            "false_alarm_rate": round(self.fitting.false_alarm_rate, 4),
            "recall": round(self.fitting.recall, 4),
        }
        if self.held_out is not None:
            entry["heldout_false_alarm_rate"] = round(self.held_out.false_alarm_rate, 4)
            entry["heldout_recall"] = round(self.held_out.recall, 4)
        return entry


@dataclass(frozen=True, slots=True)
class RouteTargets:
    """The rules as configured (``route`` minimums unresolved), how detectors group, and each route's target."""

    rules: tuple[AlertRule, ...]
    signal_of: Mapping[str, str]
    targets: Mapping[str, float]  # route -> the share of faithful calls it may alert on

    @classmethod
    def from_settings(cls, alerting: AlertingSettings) -> RouteTargets:
        """The ``alerting:`` section's global rules and its routes' ``false_alarm_target``."""
        targets = {route: config.false_alarm_target for route, config in alerting.routes.items()}
        return cls(tuple(alerting.rules), alerting.signal_of(), targets)


def gated_routes(rules: Iterable[AlertRule]) -> list[str]:
    """Routes whose rules take their minimum from calibration, in rule (priority) order."""
    routes: list[str] = []
    for rule in rules:
        if rule.min_probability == ROUTE_PROBABILITY and rule.route not in routes:
            routes.append(rule.route)
    return routes


def choose_route_minimums(calls: Sequence[GatedCall], routing: RouteTargets) -> list[RouteMinimum]:
    """The lowest minimum per gated route whose false alarms stay under its target in every group.

    A route's false alarms are cumulative: faithful calls alerted on it or on any gated route
    before it, so ``slack: 3 %`` bounds every alert a faithful call can raise, pages included.
    """
    rules, signal_of, targets = routing.rules, routing.signal_of, routing.targets
    fitting = [c for c in calls if not c.held_out]
    held_out = [c for c in calls if c.held_out]
    by_group = {group: [c for c in fitting if c.group == group] for group in {c.group for c in fitting}}
    routes = gated_routes(rules)
    minimums = dict.fromkeys(routes, _CLOSED)
    chosen = []
    for index, route in enumerate(routes):
        so_far = routes[: index + 1]
        best, worst_group = _CLOSED, ""
        for candidate in _candidates(fitting, _agreement(rules, signal_of, {**minimums, route: 0.0}), route):
            agreement = _agreement(rules, signal_of, {**minimums, route: candidate})
            rates = {group: rates_on(agreement, part, so_far) for group, part in by_group.items()}
            judged = {g: r for g, r in rates.items() if r.faithful >= MIN_FAITHFUL_PER_GROUP} or rates
            worst = max(judged, key=lambda g: _excess(judged[g], targets[route]))
            if _excess(judged[worst], targets[route]) <= 0:
                best, worst_group = candidate, worst
                break
        minimums[route] = best
        agreement = _agreement(rules, signal_of, minimums)
        chosen.append(
            RouteMinimum(
                route=route,
                min_probability=min(best, 1.0),
                target=targets[route],
                fitting=rates_on(agreement, fitting, so_far),
                held_out=rates_on(agreement, held_out, so_far) if held_out else None,
                worst_group=worst_group,
            )
        )
    return chosen


def rates_on(agreement: AgreementRule, calls: Sequence[GatedCall], routes: Iterable[str] | None = None) -> RouteRates:
    """False-alarm rate and recall of the alerts ``agreement`` raises on ``routes`` (None: on any route)."""
    wanted = None if routes is None else set(routes)
    faithful = hallucinated = false_alarms = caught = 0
    for call in calls:
        on = _route_of(agreement, call)
        alerted = on is not None and (wanted is None or on in wanted)
        if call.hallucinated:
            hallucinated += 1
            caught += alerted
        else:
            faithful += 1
            false_alarms += alerted
    return RouteRates(
        false_alarms / faithful if faithful else 0.0, caught / hallucinated if hallucinated else 0.0,
        faithful, hallucinated,
    )  # fmt: skip


def _excess(rates: RouteRates, target: float) -> float:
    """False alarms beyond the target's share of a group's faithful calls, less one.

    A rate over n calls is only known to about one call in n: a group whose count exceeds
    its target by a single call (one record of 111 is 0.9 %) is not evidence of a worse rate.
    """
    return rates.false_alarm_rate * rates.faithful - target * rates.faithful - 1


def _candidates(calls: Sequence[GatedCall], open_gate: AgreementRule, route: str) -> list[float]:
    """Minimums worth trying: none, and past each faithful call the open route alerts on.

    The false-alarm rate only changes where a minimum passes such a call's probability. Each
    candidate lies halfway to the next probability the route sees, not just above the faithful
    call's: a probability moves in its third decimal with how calls were batched for the model,
    and a minimum on the edge of a false alarm would let it back in.
    """
    on_route = [c for c in calls if c.probability is not None and _route_of(open_gate, c) == route]
    alerted = sorted({c.probability for c in on_route if c.probability is not None})
    faithful = {c.probability for c in on_route if c.probability is not None and not c.hallucinated}
    beyond = [(p, next((q for q in alerted if q > p), min(1.0, p + _MARGIN))) for p in faithful]
    return sorted({0.0} | {(p + after) / 2 for p, after in beyond})


def _route_of(agreement: AgreementRule, call: GatedCall) -> str | None:
    rule = agreement.first_match(call.flags, call.probability)
    return rule.route if rule else None


def _agreement(
    rules: Sequence[AlertRule], signal_of: Mapping[str, str], minimums: Mapping[str, float]
) -> AgreementRule:
    return AgreementRule([rule.resolved(minimums) for rule in rules], 0.0, signal_of)
