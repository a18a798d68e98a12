"""Each alert route's false alarms on an application's own traffic, from its review-queue verdicts.

A route promises a false-alarm target: the share of faithful calls that alert on it, or on a
route before it in the application's rules (``alerting.routes.<name>.false_alarm_target``, pages
1 %, every alert 3 %).  The audit sample measures it: among the calls judged faithful, those an
alert on the route (or one before it) was raised on, as a stratified ratio with its 95 % interval
(:mod:`pipeline.rate.estimator`), and the route's precision among the calls it alerted on.  Every
route the application alerts on is measured, its policy's own destinations included, and any
other route an alert of the scope took (a configuration since changed).  A route whose interval
lies wholly above its target breaks its promise with confidence: the ``false_alarms`` monitor
opens an incident for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pipeline.config.alert_routes import AlertRoutes
from pipeline.rate.estimator import Estimate, Judged, estimate_ratio
from pipeline.rate.report import RateReport, percent, report_of
from pipeline.rate.store import AuditVerdict, RateStore, Scope, ScopeCounts


@dataclass(frozen=True, slots=True)
class RouteFalseAlarms:
    """One route on one scope: the share of faithful calls it alerted on, its target, its precision."""

    route: str
    target: float | None  # None: a route alerts took that alerting.routes no longer configures
    false_alarms: Estimate
    precision: Estimate

    @property
    def over_target(self) -> bool:
        """Whether the false alarms are above the target with confidence (the interval's lower end above it)."""
        low = self.false_alarms.low
        return self.target is not None and low is not None and low > self.target

    def words(self, name_strata: bool = True) -> str:
        """``page: 2.4 % false alarms, 95 % CI 1.3-4.1 %, target 1 %; precision 0.62``, or what is missing.

        ``name_strata`` False leaves out which strata are short of verdicts (beside a blind call).
        """
        fa = self.false_alarms
        target = f"target {percent(self.target)}" if self.target is not None else "no target: not in alerting.routes"
        if fa.value is None or fa.low is None or fa.high is None:
            missing = fa.shortfall if name_strata or not fa.short else "too few verdicts yet"
            return f"{self.route}: false alarms unknown, {missing} ({target})"
        precision = f"{self.precision.value:.2f}" if self.precision.value is not None else "unknown (no alert judged)"
        verdict = " ABOVE TARGET" if self.over_target else ""
        return (
            f"{self.route}: {percent(fa.value)} false alarms, 95 % CI {100 * fa.low:.1f}-{percent(fa.high)}, "
            f"{target}{verdict}; precision {precision}"
        )


def route_false_alarms(store: RateStore, scope: Scope, routes: AlertRoutes) -> list[RouteFalseAlarms]:
    """Each alert route's false alarms and precision on ``scope``'s calls, from the audit verdicts."""
    return false_alarms_of(scope.app, store.counts(scope), store.verdicts(scope), routes)


def rate_with_false_alarms(
    store: RateStore, scope: Scope, routes: AlertRoutes, target_half_width: float
) -> tuple[RateReport, list[RouteFalseAlarms]]:
    """The rate report and each route's false alarms, from one read of the scope's calls and verdicts."""
    counts, verdicts = store.counts(scope), store.verdicts(scope)
    report = report_of(scope, counts, verdicts, target_half_width)
    return report, false_alarms_of(scope.app, counts, verdicts, routes)


def false_alarms_of(
    app: str, counts: ScopeCounts, verdicts: Sequence[AuditVerdict], routes: AlertRoutes
) -> list[RouteFalseAlarms]:
    """Each route ``app`` (every app: empty) alerts on, from a scope's counts and audit verdicts, already read."""
    out = []
    for route in routes.listed(app, [taken for v in verdicts for taken in v.routes]):
        alarms = [(not v.hallucinated and bool(v.routes & routes.ahead_of(route, _app(v))), not v.hallucinated)
                  for v in verdicts]  # fmt: skip
        hits = [(v.hallucinated and route in v.routes, route in v.routes) for v in verdicts]
        out.append(RouteFalseAlarms(route, routes.targets.get(route), _estimate(verdicts, alarms, counts.population),
                                    _estimate(verdicts, hits, counts.population)))  # fmt: skip
    return out


def _app(verdict: AuditVerdict) -> str:
    """The application whose call ``verdict`` judged: its frame's first part (``hr / alerted``)."""
    return verdict.frame.partition(" / ")[0]


def _estimate(
    verdicts: Sequence[AuditVerdict], parts: Sequence[tuple[bool, bool]], population: dict[str, int]
) -> Estimate:
    judged: dict[str, list[Judged]] = {}
    for verdict, (y, x) in zip(verdicts, parts, strict=True):
        judged.setdefault(verdict.frame, []).append(Judged(float(y), float(x)))
    return estimate_ratio(population, judged)


def false_alarm_lines(routes: list[RouteFalseAlarms], app: str) -> list[str]:
    """The lines `halluwatch rate` adds: each route's false alarms on ``app``'s traffic, and what to do when above."""
    lines = ["false alarms by route (faithful calls alerted on it or a route before it, of the faithful):"]
    lines += [f"  {r.words()}" for r in routes]
    if any(r.over_target for r in routes):
        lines.append(
            f"  a route above its target: recalibrate (`halluwatch calibrate --app {app or 'NAME'}`) and apply it"
        )
    return lines
