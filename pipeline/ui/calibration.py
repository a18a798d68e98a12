"""The review page's calibration section: the application's applied map, the newest proposal, an Apply button.

The proposal (``halluwatch calibrate --app``) shows what it was measured to do on the
application's verdicts: ECE out of sample now and with it, and each route's minimum with the
share of faithful calls it alerts on (95 % interval) and its precision.  A signed-in person
applies it with one POST, which carries the page's CSRF token like every other form; the
worker takes it up within ``review.map_refresh_seconds``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from flask import Blueprint, abort, flash, g, redirect, request, url_for
from flask.typing import ResponseReturnValue

from pipeline.calibration.app_map import judge_line
from pipeline.calibration.proposals import AppCalibration, NoVerdicts
from pipeline.config.review import ReviewSettings
from pipeline.rate.maps import AppMap, UnknownVersion


def _route_row(route: dict[str, Any], now: dict[str, Any], proposal: AppMap, name: str) -> dict[str, Any]:
    """One route of a proposal as the table shows it: both minimums on the proposal's scale, named as alerts are."""
    current = now.get("shipped_minimum")
    return {**route, "name": name, "now": now,
            "current_minimum": proposal.calibration.apply_one(current) if current is not None else None}  # fmt: skip


def calibration_blueprint(calibration: AppCalibration, settings: ReviewSettings) -> Blueprint:
    """The section's data for the review template (``calibration_of``) and its Propose and Apply forms."""
    pages = Blueprint("calibration", __name__)
    maps = calibration.maps

    @pages.app_context_processor
    def _section() -> dict[str, Any]:
        def calibration_of(app: str) -> dict[str, Any]:
            proposal = maps.proposal(app)
            routes = [_route_row(r, now, proposal, calibration.route_name(app, r["route"]))
                      for r, now in zip(proposal.report.get("routes", []), proposal.report.get("routes_before", []),
                                        strict=False)] if proposal else []  # fmt: skip
            return {"applied": maps.applied().get(app), "proposal": proposal, "routes": routes,
                    "judging": calibration.judging}  # fmt: skip

        return {"calibration_of": calibration_of, "map_refresh_seconds": settings.map_refresh_seconds,
                "auto_apply_after": settings.auto_apply_after, "judge_line": judge_line}  # fmt: skip

    @pages.post("/review/propose")
    def propose() -> ResponseReturnValue:
        app = request.form.get("app", "")
        if not app:
            abort(400, description="the form names no application")
        try:
            proposed = calibration.propose(app, datetime.now(UTC), g.identity.user)
        except NoVerdicts as exc:
            abort(409, description=str(exc))
        proposal = proposed.proposal
        applied = f" and applied it (review.auto_apply_after = {settings.auto_apply_after})" if proposed.applied else ""
        kept = f"; {proposed.kept}" if proposed.kept else ""
        flash(f"Proposed map {proposal.version} for {app} from {proposal.verdicts} verdicts{applied}{kept}")
        return redirect(url_for("review.page", app=app), code=303)

    @pages.post("/review/apply")
    def apply() -> ResponseReturnValue:
        app, version = request.form.get("app", ""), request.form.get("version", "")
        if not app or not version:
            abort(400, description="the form names no application or version")
        try:
            maps.apply(app, version, datetime.now(UTC), g.identity.user)
        except UnknownVersion as exc:
            abort(404, description=str(exc))
        flash(f"Applied map {version} to {app}: calls are scored with it within {settings.map_refresh_seconds:g} s")
        return redirect(url_for("review.page", app=app), code=303)

    return pages
