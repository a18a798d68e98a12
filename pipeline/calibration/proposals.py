"""Proposing an application's map from its verdicts in the review window, and applying it without a person.

``halluwatch calibrate --app`` and the review page's Propose button both go through
:meth:`AppCalibration.propose`.  With ``review.auto_apply_after`` set, a proposal from that many
verdicts or more is applied at once unless it changes nothing (:func:`held_back`): a proposal
carries a refitted map only where it beats the current one out of sample, and route minimums
chosen for the calls to come either way.  The review page also proposes by itself after a verdict
(:meth:`AppCalibration.after_verdict`): first when the window holds that many verdicts, then
each time it holds a quarter more than the newest proposal was fitted on (100, 125, 157, ...: a
bounded number of refits as verdicts grow), or when that proposal is older than the window.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from clickhouse_connect.driver.client import Client

from detectors.thresholds import load_thresholds
from pipeline.calibration.alert_probability import RouteTargets
from pipeline.calibration.app_map import Proposal, judged_calls, propose, traffic_calls
from pipeline.config.review import ReviewSettings
from pipeline.config.settings import Settings
from pipeline.rate.maps import AppMap, MapStore
from pipeline.rate.sampler import Strata
from pipeline.rate.store import JudgedRow, RateStore, Scope
from pipeline.sinks.labels import Label

REFIT_GROWTH = 1.25  # an automatic refit once the window holds this many times the newest proposal's verdicts
# The most of the window's calls the route minimums are measured on (a random sample of more): the bound's
# spread from sampling 20,000 calls is a small part of what 200 verdicts leave, and a proposal stays seconds.
TRAFFIC_SAMPLE = 20_000


class NoVerdicts(LookupError):
    """The application has no review verdicts in the window to fit a map on."""


@dataclass(frozen=True, slots=True)
class Proposed:
    """A stored proposal, whether it was applied at once (``review.auto_apply_after``), and why not."""

    proposal: Proposal
    applied: bool
    kept: str = ""  # why a proposal with enough verdicts to apply was not: it does not beat the current map


class AppCalibration:
    """Applications' maps from their review verdicts: proposed into the maps table, applied when allowed."""

    def __init__(
        self,
        rates: RateStore,
        maps: MapStore,
        review: ReviewSettings,
        routing: RouteTargets,
        shipped_minimums: Mapping[str, float],
        judging: bool = False,
        renamed: Mapping[str, Mapping[str, str]] | None = None,
    ) -> None:
        self._rates = rates
        self._maps = maps
        self._review = review
        self._routing = routing
        self._shipped_minimums = dict(shipped_minimums)
        self.judging = judging  # whether a judge runs: its weight is shown only then
        self._renamed = dict(renamed or {})

    def route_name(self, app: str, route: str) -> str:
        """What ``app``'s policy calls a rules' route (its own destination route), as its alerts name it."""
        return self._renamed.get(app, {}).get(route, route)

    @classmethod
    def configured(cls, client: Client, settings: Settings) -> AppCalibration:
        """On ``settings``' database, review section, alert routes and shipped route minimums (of its profile)."""
        database, review = settings.clickhouse_database, settings.review
        shipped = load_thresholds(settings.thresholds_file, settings.detectors.embeddings.profile).alert_probability
        renamed = {name: dict(policy.routes) for name, policy in settings.policies.items()}
        return cls(RateStore(client, database, Strata.configured(review)), MapStore(client, database), review,
                   RouteTargets.from_settings(settings.alerting), shipped, settings.escalation.enabled,
                   renamed)  # fmt: skip

    @property
    def maps(self) -> MapStore:
        """The maps table the proposals go to."""
        return self._maps

    def window(self, app: str, now: datetime) -> Scope:
        """The calls of ``app`` the review queue draws from: those of the last ``review.window_days``."""
        return Scope(now - timedelta(days=self._review.window_days), now + timedelta(seconds=1), app=app)

    def propose(self, app: str, now: datetime, by: str) -> Proposed:
        """Fit, store and (with enough verdicts for ``review.auto_apply_after``) apply a map for ``app``.

        Raises NoVerdicts when the window holds no verdict on a call with a probability.
        """
        scope = self.window(app, now)
        return self._propose(app, scope, self._rates.judged_calls(scope), now, by)

    def after_verdict(self, app: str, now: datetime) -> Proposed | None:
        """Propose and apply a map for ``app`` when its verdicts call for an automatic refit; None when not."""
        if self._review.auto_apply_after is None:
            return None  # no automatic maps: not even the count is read
        scope = self.window(app, now)
        rows = self._rates.judged_calls(scope)
        if not refit_due(len(rows), self._maps.proposal(app), self._review, now):
            return None
        return self._propose(app, scope, rows, now, "auto")

    def after_verdict_on(self, label: Label) -> Proposed | None:
        """:meth:`after_verdict` for the application of the call ``label`` judges (a Slack digest's verdict)."""
        app = self._rates.app_of(label.trace_id, label.span_id)
        return self.after_verdict(app, datetime.now(UTC)) if app else None

    def _propose(self, app: str, scope: Scope, rows: Sequence[JudgedRow], now: datetime, by: str) -> Proposed:
        known = {m.version: m.calibration for _, m in self._maps.history(app)}
        calls = judged_calls(rows, known)
        if not calls:
            raise NoVerdicts(f"no review verdicts on {app}'s calls of the last {self._review.window_days} days: "
                             f"judge some at /review?app={app} first")  # fmt: skip
        current = self._maps.applied().get(app)
        traffic = traffic_calls(*self._rates.traffic(scope, TRAFFIC_SAMPLE), known)
        proposal = propose(app, calls, self._rates.counts(scope).population, self._routing, self._shipped_minimums,
                           current, self._review.map_shrinkage, traffic)  # fmt: skip
        self._maps.propose(proposal.stored(), now, by)
        threshold = self._review.auto_apply_after
        if threshold is None or proposal.verdicts < threshold:
            return Proposed(proposal, applied=False)
        kept = held_back(proposal)
        if kept:
            return Proposed(proposal, False, kept)
        self._maps.apply(app, proposal.version, now, f"auto: {proposal.verdicts} verdicts >= review.auto_apply_after")
        return Proposed(proposal, applied=True)


def held_back(proposal: Proposal) -> str:
    """Why ``proposal`` is not applied without a person (it changes neither map nor minimum); empty when it may be."""
    measured = proposal.measured
    before = {r.route: r.shipped_minimum for r in proposal.routes_before}
    keeps_minimums = all(abs(r.shipped_minimum - before.get(r.route, -1.0)) < 1e-6 for r in proposal.routes)
    if measured is None or not proposal.keeps_map or not keeps_minimums:
        return ""
    brier = f"Brier {measured.brier_after:.4f}, now {measured.brier_before:.4f}"
    return f"not applied: it keeps the current map (a refit does not beat it out of sample: {brier}) and every minimum"


def refit_due(verdicts: int, newest: AppMap | None, review: ReviewSettings, now: datetime) -> bool:
    """Whether ``verdicts`` (on calls with a probability) in the review window call for a refit after ``newest``.

    ``newest``: the application's newest proposal, by a person or not.
    """
    threshold = review.auto_apply_after
    if threshold is None or verdicts < threshold:
        return False
    if newest is None or newest.at is None:
        return True
    stale = newest.at < now - timedelta(days=review.window_days)
    return stale or verdicts >= math.ceil(newest.verdicts * REFIT_GROWTH)
