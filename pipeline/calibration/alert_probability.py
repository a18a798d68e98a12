"""Per alert route, the lowest ``p_hallucination`` its rules need to keep false alarms under a target.

A rule with ``min_probability: route`` fires only when its detectors agree *and* the call's
calibrated probability reaches its route's minimum.  The minimum is chosen on labelled calls:
walking routes in rule order (a call the page rules no longer take may fall to a Slack rule),
each gets the lowest candidate at which the share of faithful calls alerted on it, or on a
route before it, stays under the route's target in every group of calls (each labelled data
set, or one group), on the fitting side.  The same records' held-out side shows what the
choice keeps.

Calls cross-fitted by source document carry their fold: a minimum must then also keep the
target in each group's folds, in all but ``spare_folds`` of them.  The spread across folds is
what a new set of documents will do; a minimum on the edge of the pooled rate slips there.

A count over a few dozen calls is known to about one call, so one fold (or a group that is not
cut into folds) may exceed its target by one call.  Pooled over several folds, a group's count
may not: the target is a rate over all of a set's faithful calls, and a minimum that allowed one
more there alerted 3.8 % of a set's faithful calls at a 3 % target once refitted.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from pipeline.agreement.rules import AgreementRule
from pipeline.config.alerting import AlertingSettings, AlertRule, gated_routes

# Groups with fewer faithful fitting calls than this say nothing about a rate of 1-3 %; when no
# group has as many, all of them are judged.
MIN_FAITHFUL_PER_GROUP = 50
_CLOSED = 1.0 + 1e-9  # a minimum no probability reaches: the route's gated rules never fire
_MARGIN = 0.01  # past the highest probability a route sees, the minimum that excludes it
# A rate over n calls is only known to about one call in n: one fold whose count exceeds its
# target by a single call (one record of 40 is 2.5 %) is not evidence of a worse rate.
_ONE_CALL = 1


@dataclass(frozen=True, slots=True)
class GatedCall:
    """What the alert rules see of one labelled call."""

    flags: Mapping[str, int]  # detectors that flagged it as hallucinated -> severity
    probability: float | None
    hallucinated: bool
    group: str = ""  # e.g. the data set; the target must hold in each group
    held_out: bool = False
    fold: int = 0  # the document fold its probability was predicted in, where cross-fitted


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

    def agreement(self, minimums: Mapping[str, float]) -> AgreementRule:
        """The rules with each gated route's minimum set (a route missing from ``minimums`` never fires)."""
        gated = {route: minimums.get(route, _CLOSED) for route in gated_routes(self.rules)}
        return _agreement(self.rules, self.signal_of, gated)


def choose_route_minimums(
    calls: Sequence[GatedCall], routing: RouteTargets, spare_folds: int = 0
) -> list[RouteMinimum]:
    """The lowest minimum per gated route whose false alarms stay under its target in every group.

    A route's false alarms are cumulative: faithful calls alerted on it or on any gated route
    before it, so ``slack: 3 %`` bounds every alert a faithful call can raise, pages included.
    Where calls come from several folds, each group's pooled count must meet the target outright,
    and each of its folds within one call of it in all but ``spare_folds`` of them.
    """
    rules, signal_of, targets = routing.rules, routing.signal_of, routing.targets
    fitting = [c for c in calls if not c.held_out]
    held_out = [c for c in calls if c.held_out]
    routes = gated_routes(rules)
    minimums = dict.fromkeys(routes, _CLOSED)
    chosen = []
    for index, route in enumerate(routes):
        so_far = set(routes[: index + 1])
        opened = _agreement(rules, signal_of, {**minimums, route: 0.0})
        gates = _Gates(fitting, opened, _agreement(rules, signal_of, minimums), so_far)
        best, worst_group = _CLOSED, ""
        for candidate in _candidates(fitting, opened, route):
            worst = gates.worst_group(candidate, targets[route], spare_folds)
            if worst is not None:
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


class _Gates:
    """Which fitting calls alert on the routes so far, as one route's minimum moves: two rule passes, then arrays.

    A call alerts at minimum ``m`` as it does with the route's gate open when its probability
    reaches ``m``, else as with the gate closed.
    """

    def __init__(self, calls: Sequence[GatedCall], opened: AgreementRule, closed: AgreementRule, routes: set[str]):
        self._p = np.array([-1.0 if c.probability is None else c.probability for c in calls])
        self._open = np.array([_route_of(opened, c) in routes for c in calls], dtype=bool)
        self._closed = np.array([_route_of(closed, c) in routes for c in calls], dtype=bool)
        faithful = np.array([not c.hallucinated for c in calls], dtype=bool)
        groups = sorted({c.group for c in calls})
        folds = sorted({c.fold for c in calls})
        self._groups = {g: faithful & np.array([c.group == g for c in calls]) for g in groups}
        self._folds = {
            g: [members & np.array([c.fold == f for c in calls]) for f in folds] for g, members in self._groups.items()
        }
        self._pooled_tolerance = _ONE_CALL if len(folds) < 2 else 0

    def worst_group(self, minimum: float, target: float, spare_folds: int) -> str | None:
        """The group that decides at ``minimum`` (the one furthest over), or None when some group breaks the target."""
        alerted = np.where(self._p >= minimum, self._open, self._closed)
        sizes = {g: int(m.sum()) for g, m in self._groups.items()}
        judged = [g for g, n in sizes.items() if n >= MIN_FAITHFUL_PER_GROUP] or list(sizes)
        excess = {
            g: _count_excess(int(alerted[self._groups[g]].sum()), sizes[g], target, self._pooled_tolerance)
            for g in judged
        }
        if any(value > 0 for value in excess.values()):
            return None
        for group in judged:
            folds = [f for f in self._folds[group] if f.any()]
            held = sum(_count_excess(int(alerted[f].sum()), int(f.sum()), target, _ONE_CALL) <= 0 for f in folds)
            if held < len(folds) - spare_folds:
                return None
        return max(judged, key=lambda g: excess[g]) if judged else ""


def _count_excess(false_alarms: int, faithful: int, target: float, tolerance: int) -> float:
    """False alarms beyond the target's share of ``faithful`` calls, less ``tolerance`` calls."""
    return false_alarms - target * faithful - tolerance


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
