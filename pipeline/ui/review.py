"""The review queue: one call at a time of an application's audit sample, judged with a key press.

``GET /review?app=NAME`` draws the next call (:func:`pipeline.rate.queue.draw_next`) and shows it
with the application's rate as the verdicts so far estimate it.  The draw (call, stratum,
inclusion probability) is kept in the signed session cookie, so the verdict posted for it is
stored with the probability the sampler drew it with, never one a form could claim.

Blind by default (``review.blind``): the page shows what the model did and nothing of what the
detectors found (no marks, no p_hallucination, no detector names, not the stratum, whose name
says the probability or the alert) until the verdict is in; ``/review/judged`` then shows the
call with its findings, so a reviewer learns the detectors by comparing.  A reviewer who sees
the detectors' marks first tends to confirm them, and the sample would stop measuring them.
Beside a blind call, the estimate names no stratum either.

``POST /review/undo`` withdraws the person's last verdict here (and only that: a verdict they
gave the call on its trace page is another row, :attr:`~pipeline.sinks.labels.Label.elsewhere`);
the call is drawable again.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from clickhouse_connect.driver.client import Client
from flask import Blueprint, abort, flash, g, jsonify, redirect, render_template, request, session, url_for
from flask.typing import ResponseReturnValue

from pipeline.calibration.app_map import operating_point_lines
from pipeline.calibration.proposals import AppCalibration
from pipeline.config.alert_routes import AlertRoutes
from pipeline.config.review import ReviewSettings
from pipeline.config.settings import Settings
from pipeline.rate.false_alarms import RouteFalseAlarms, false_alarm_lines, rate_with_false_alarms
from pipeline.rate.queue import draw_next
from pipeline.rate.report import RateReport, estimate_words, report_lines
from pipeline.rate.sampler import Strata
from pipeline.rate.store import Drawn, RateStore, Scope
from pipeline.rate.through_pages import RATE_PATH, scope_from_query
from pipeline.sinks.labels import Label, to_utc_ms
from pipeline.ui.call_context import call_context
from pipeline.ui.call_terms import NO_CONTRACTS, Contracts
from pipeline.ui.queries import TriageStore
from pipeline.words import counted

VERDICTS = {"hallucinated": True, "faithful": False}
MAX_NOTE_CHARS = 2000
_DRAW = "review_draw"  # the session key holding the call the page served
_JUDGED = "review_judged"  # the session key holding the person's last verdict here: its call, draw and verdict


@dataclass(frozen=True, slots=True)
class ReviewQueue:
    """What the review page works with: the rate store, its settings, the alert routes, the applications' maps."""

    rates: RateStore
    settings: ReviewSettings
    routes: AlertRoutes
    calibration: AppCalibration

    @classmethod
    def configured(cls, client: Client, settings: Settings) -> ReviewQueue:
        """The queue of ``settings`` on ``client``'s ClickHouse."""
        rates = RateStore(client, settings.clickhouse_database, Strata.configured(settings.review))
        routes = AlertRoutes.configured(settings.alerting, settings.policies)
        return cls(rates, settings.review, routes, AppCalibration.configured(client, settings))


def review_blueprint(triage: TriageStore, queue: ReviewQueue, contracts: Contracts = NO_CONTRACTS) -> Blueprint:
    """The review page and its verdict and skip forms; a verdict may refit the app's map (``auto_apply_after``)."""
    pages = Blueprint("review", __name__)
    rates, settings, routes = queue.rates, queue.settings, queue.routes

    def report_and_routes(window: Scope) -> tuple[RateReport, list[RouteFalseAlarms], list[str]]:
        """The rate report, each alert route's false alarms, and both as `halluwatch rate` prints them."""
        report, measured = rate_with_false_alarms(rates, window, routes, settings.target_half_width)
        lines = report_lines(report, settings.target_half_width) + false_alarm_lines(measured, window.app)
        return report, measured, lines

    def scope(app: str) -> Scope:
        return queue.calibration.window(app, datetime.now(UTC))

    @pages.get("/review")
    def page() -> ResponseReturnValue:
        apps = rates.apps()
        app = request.args.get("app", "")
        if not app:
            return render_template("review.html", apps=apps, app="", drawn=None)
        if app not in apps:
            abort(404, description=f"no calls of application {app!r}; known: {', '.join(apps) or 'none'}")
        window = scope(app)
        drawn = draw_next(rates, window, g.identity.user, settings.seed)
        if drawn is None:
            return _page("review.html", app, drawn=None, nothing_left=_nothing_left(window))
        session[_DRAW] = [drawn.trace_id, drawn.span_id, drawn.stratum, drawn.inclusion_probability]
        context = _context(drawn.trace_id, drawn.span_id)
        # Beside a blind call, the estimate says how many verdicts it needs, not in which strata.
        return _page("review.html", app, drawn=drawn, ctx=context, blind=settings.blind, name_strata=not settings.blind)

    def _nothing_left(window: Scope) -> str:
        """Why the queue serves this person nothing: what the window holds, judged by anyone, skipped by them."""
        population, judged, _ = rates.queue_state(window, g.identity.user)
        calls, with_verdict = sum(population.values()), sum(judged.values())
        if not calls:
            return "the window holds no call that the detectors could check"
        skipped = calls - with_verdict  # none left to serve: every call without a verdict is one this person skipped
        words = (
            f"the window holds {counted(calls, 'call')} that the detectors could check: {with_verdict} with a verdict"
        )
        return words + (f", {skipped} skipped by you" if skipped else "")

    @pages.get("/review/judged")
    def judged() -> ResponseReturnValue:
        app = request.args.get("app", "")
        kept = session.get(_JUDGED)
        if not kept:
            return redirect(url_for("review.page", app=app), code=303)
        trace_id, span_id, stratum, probability, choice = kept
        drawn = Drawn(trace_id, span_id, stratum, float(probability))
        return _page("judged.html", app, drawn=drawn, ctx=_context(trace_id, span_id), choice=choice)

    @pages.post("/review/undo")
    def undo() -> ResponseReturnValue:
        """Withdraw the person's last verdict here (a newer, withdrawn row); its call goes back to the queue."""
        app = request.form.get("app", "")
        kept = session.get(_JUDGED)
        if not kept or [request.form.get("trace_id"), request.form.get("span_id")] != kept[:2]:
            abort(409, description="Undo here withdraws your last verdict on the review page only, and this is not it.")
        trace_id, span_id, *_, choice = kept
        standing = triage.current_label(trace_id, span_id, g.identity.user, elsewhere=False)
        if standing is None:
            abort(409, description=f"{g.identity.user} has no review verdict on span {span_id} to undo.")
        triage.add_label(replace(standing, labelled_at=to_utc_ms(datetime.now(UTC)), withdrawn=True), source="review")
        session.pop(_JUDGED)
        flash(f"Withdrawn: your verdict ({choice}) on span {span_id}; the call is back in the queue")
        return redirect(url_for("review.page", app=app), code=303)

    def _context(trace_id: str, span_id: str) -> dict[str, Any] | None:
        view = triage.trace(trace_id)
        call = next((c for c in view.calls if c.span_id == span_id), None)
        return call_context(call, (), view.tool_runs, contracts) if call is not None else None

    def _page(template: str, app: str, name_strata: bool = True, **values: Any) -> str:
        report, routes, lines = report_and_routes(scope(app))
        words = estimate_words(report.rate, settings.target_half_width, report.counts.drawable, name_strata)
        return render_template(
            template, apps=rates.apps(), app=app, report=report, routes=routes, lines=lines, rate_words=words,
            name_strata=name_strata, last=session.get(_JUDGED), **values,
        )  # fmt: skip

    @pages.get(RATE_PATH)
    def rate_lines() -> ResponseReturnValue:
        """The rate report of a scope, as ``halluwatch rate`` prints it, for a ``rate`` that cannot open the store."""
        try:
            window = scope_from_query(request.args, request.args.getlist("attr"))
        except ValueError as exc:
            abort(400, description=f"not a scope: {exc}")
        lines = report_and_routes(window)[2]
        if window.app:  # as `halluwatch rate --app` prints them beside an open store
            lines += operating_point_lines(window.app, queue.calibration.maps.proposal(window.app))
        return jsonify(lines=lines)

    @pages.post("/review/verdict")
    def verdict() -> ResponseReturnValue:
        app, drawn = _posted_draw()
        choice = request.form.get("verdict", "")
        if choice not in VERDICTS:
            abort(400, description=f"verdict must be one of {', '.join(VERDICTS)}")
        label = Label(
            drawn.trace_id, drawn.span_id, VERDICTS[choice], g.identity.user, to_utc_ms(datetime.now(UTC)),
            note=request.form.get("note", "").strip()[:MAX_NOTE_CHARS],
            inclusion_probability=drawn.inclusion_probability, stratum=drawn.stratum, blind=settings.blind,
        )  # fmt: skip
        triage.add_label(label, source="review")
        session.pop(_DRAW)
        flash(f"Recorded: {choice} on span {drawn.span_id}")
        refit = queue.calibration.after_verdict(app, datetime.now(UTC))
        if refit is not None:
            proposal = refit.proposal
            done = "Applied" if refit.applied else "Proposed"
            kept = f"; {refit.kept}" if refit.kept else ""
            flash(f"{done} map {proposal.version} for {app} without a person: {counted(proposal.verdicts, 'verdict')} "
                  f"(review.auto_apply_after = {settings.auto_apply_after}){kept}")  # fmt: skip
        session[_JUDGED] = [drawn.trace_id, drawn.span_id, drawn.stratum, drawn.inclusion_probability, choice]
        if not settings.blind:
            return redirect(url_for("review.page", app=app), code=303)
        return redirect(url_for("review.judged", app=app), code=303)

    @pages.post("/review/skip")
    def skip() -> ResponseReturnValue:
        app, drawn = _posted_draw()
        rates.skip(drawn.trace_id, drawn.span_id, g.identity.user, to_utc_ms(datetime.now(UTC)))
        session.pop(_DRAW)
        flash(f"Skipped span {drawn.span_id}")
        return redirect(url_for("review.page", app=app), code=303)

    return pages


def _posted_draw() -> tuple[str, Drawn]:
    """The application and the call the form was served with, as the session recorded its draw."""
    app = request.form.get("app", "")
    kept = session.get(_DRAW)
    if not kept or [request.form.get("trace_id"), request.form.get("span_id")] != kept[:2]:
        abort(409, description="this is not the call the review page last served you: open the page again")
    trace_id, span_id, stratum, probability = kept
    return app, Drawn(trace_id, span_id, stratum, float(probability))
