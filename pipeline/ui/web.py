"""The triage pages as a Flask application: the list, a page per trace, verdicts, sign-in.

Server-rendered Jinja templates with autoescaping: every answer, prompt and evidence
string is text, never markup.  Every page needs an identity (:mod:`pipeline.ui.access`);
every form POST from a browser carries a CSRF token (Flask-WTF) and the session cookie is
``SameSite=Lax``, so another site cannot make a signed-in browser record a verdict.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any
from urllib.parse import urlencode, urlsplit

from flask import Flask, Response, abort, flash, g, redirect, render_template, request, session, url_for
from flask.typing import ResponseReturnValue
from flask_wtf.csrf import CSRFError, CSRFProtect
from werkzeug.exceptions import HTTPException

from pipeline.alerting.console import delivery_words
from pipeline.config.ui import UISettings
from pipeline.sinks.labels import SPAN_ID, TRACE_ID, Label, to_utc_ms
from pipeline.sinks.timestamps import as_utc
from pipeline.ui.access import Access, Identity
from pipeline.ui.calibration import calibration_blueprint
from pipeline.ui.call_context import call_context
from pipeline.ui.call_terms import NO_CONTRACTS, Contracts
from pipeline.ui.defences import with_security_headers, without_bidi_controls
from pipeline.ui.pagerduty_webhook import pagerduty_blueprint
from pipeline.ui.queries import ORDERS, ListFilters, TriageStore
from pipeline.ui.review import ReviewQueue, review_blueprint
from pipeline.ui.slack_actions import slack_blueprint
from pipeline.ui.story import fold
from pipeline.ui.verdicts import WHOLE_CALL, verdict_words
from pipeline.words import counted

# The trace page's buttons: on a flagged call, whether the flag was right; on another, what the call is.
VERDICTS = {"confirmed": True, "false_alarm": False, "hallucinated": True, "faithful": False}
_TRACE_PREFIX = re.compile(r"[0-9a-f]{8,32}")
MAX_NOTE_CHARS = 2000
SESSION_DAYS = 7
# Reached without an identity: signing in, the stylesheet and icon, Slack and PagerDuty (they sign their requests).
_OPEN_ENDPOINTS = {"login", "static", "favicon", "slack.interactions", "pagerduty.webhook"}
_ANY_SIGNED_IN = {"logout"}  # the only post a viewer makes; every other one judges or changes something


def create_app(
    store: TriageStore,
    settings: UISettings,
    access: Access | None = None,
    review: ReviewQueue | None = None,
    contracts: Contracts = NO_CONTRACTS,
) -> Flask:
    """The triage application over ``store``; ``access`` defaults to one built from ``settings``.

    ``review``: the review queue's stores and settings (its page and the calibration section are there
    only with them).  ``contracts``: the detectors' settings that say which end user and output schema
    a call's page shows (none: neither shows).
    """
    app = Flask(__name__)
    app.wsgi_app = with_security_headers(app.wsgi_app)  # type: ignore[method-assign,assignment]  # WSGI middleware
    app.jinja_env.finalize = without_bidi_controls
    secret = settings.session_secret.get_secret_value() if settings.session_secret else secrets.token_hex(32)
    app.config.update(
        SECRET_KEY=secret,
        SESSION_COOKIE_HTTPONLY=True,
        SESSION_COOKIE_SAMESITE="Lax",
        SESSION_COOKIE_NAME="halluwatch_session",
        PERMANENT_SESSION_LIFETIME=timedelta(days=SESSION_DAYS),
        WTF_CSRF_CHECK_DEFAULT=False,  # checked below, for cookie-carried identities only
        WTF_CSRF_TIME_LIMIT=None,  # valid for the session's life: a page left open still submits
    )
    csrf = CSRFProtect(app)
    app.extensions["halluwatch.access"] = access = access or Access(settings)
    app.jinja_env.filters |= {
        "when": _when,
        "pretty_json": _pretty_json,
        "score": _score,
        "verdict_words": verdict_words,
        "delivery_words": delivery_words,
        "fold": fold,
        "counted": counted,
    }
    app.jinja_env.globals |= {
        "page_url": _page_url,
        "review_enabled": review is not None,
        "may_judge": lambda: settings.may_judge(g.identity.user),
    }

    @app.before_request
    def _identify() -> ResponseReturnValue | None:
        if request.endpoint in _OPEN_ENDPOINTS:
            return None
        identity = access.identify(request)
        if identity is None and access.accepts(request.args.get("token", "")):
            access.sign_in()
            return redirect(_without_token())  # the token leaves the address bar and the history
        if identity is None:
            return redirect(url_for("login", next=request.full_path.rstrip("?")))
        g.identity = identity
        if request.method != "POST":
            return None
        if not identity.bearer:
            if not _same_origin(settings.origins):
                return _message_page(403, "Sent from another site", "This form must be sent from these pages.")
            csrf.protect()
        if request.endpoint not in _ANY_SIGNED_IN and not settings.may_judge(identity.user):
            detail = f"{identity.user} may read these pages; ui.reviewers names who may judge."
            return _message_page(403, "Viewers cannot post verdicts", detail)
        return None

    @app.errorhandler(CSRFError)
    def _csrf_refused(error: CSRFError) -> ResponseReturnValue:
        return _message_page(400, "Form expired or sent from another site", str(error.description))

    @app.errorhandler(HTTPException)
    def _http_error(error: HTTPException) -> ResponseReturnValue:
        return _message_page(error.code or 500, error.name, error.description or "")

    app.add_url_rule("/", "calls", _calls_page(store, settings.page_size))
    app.add_url_rule("/trace/<trace_id>", "trace", _trace_page(store, contracts))
    app.add_url_rule("/trace/<trace_id>/verdict", "verdict", _verdict(store), methods=["POST"])
    app.add_url_rule("/trace/<trace_id>/undo", "undo", _undo(store), methods=["POST"])
    # Browsers ask for /favicon.ico whatever the pages link: the same small SVG answers it.
    app.add_url_rule("/favicon.ico", "favicon", lambda: app.send_static_file("favicon.svg"))
    app.add_url_rule("/login", "login", _login(access, settings.identity_header), methods=["GET", "POST"])
    app.add_url_rule("/logout", "logout", _logout, methods=["POST"])
    if review is not None:
        app.register_blueprint(review_blueprint(store, review, contracts))
        app.register_blueprint(calibration_blueprint(review.calibration, review.settings))
    if settings.slack_signing_secret is not None:
        refit = review.calibration.after_verdict_on if review is not None else None
        app.register_blueprint(slack_blueprint(store, settings.slack_signing_secret.get_secret_value(),
                                               after_audit_verdict=refit))  # fmt: skip
    # Always there: without a secret it answers 404 itself, rather than sending PagerDuty to sign in.
    pagerduty_secret = settings.pagerduty_webhook_secret
    app.register_blueprint(
        pagerduty_blueprint(store, pagerduty_secret.get_secret_value() if pagerduty_secret else None)
    )
    return app


def _calls_page(store: TriageStore, page_size: int) -> Callable[[], ResponseReturnValue]:
    def calls() -> ResponseReturnValue:
        filters = _filters()
        page = _int_arg("page", 1)
        # One more than a page says whether there is a next one.
        rows = store.flagged_calls(filters, page_size + 1, (page - 1) * page_size)
        return render_template(
            "calls.html",
            rows=rows[:page_size],
            page=page,
            has_next=len(rows) > page_size,
            filters=filters,
            choices=store.choices(),
        )

    return calls


def _trace_page(store: TriageStore, contracts: Contracts) -> Callable[[str], ResponseReturnValue]:
    def trace(trace_id: str) -> ResponseReturnValue:
        trace_id = _checked(trace_id, TRACE_ID, "trace id")
        view = store.trace(trace_id)
        if not view.found:
            abort(404, description=f"ClickHouse holds nothing of trace {trace_id}.")
        calls = [call_context(call, view.labels, view.tool_runs, contracts) for call in view.calls]
        return render_template("trace.html", trace=view, calls=calls, whole_call=WHOLE_CALL)

    return trace


def _verdict(store: TriageStore) -> Callable[[str], ResponseReturnValue]:
    def verdict(trace_id: str) -> ResponseReturnValue:
        trace_id = _checked(trace_id, TRACE_ID, "trace id")
        span_id = _checked(request.form.get("span_id", ""), SPAN_ID, "span id")
        choice = request.form.get("verdict", "")
        if choice not in VERDICTS:
            abort(400, description=f"verdict must be one of {', '.join(VERDICTS)}")
        identity: Identity = g.identity
        label = Label(
            trace_id,
            span_id,
            VERDICTS[choice],
            identity.user,
            to_utc_ms(datetime.now(UTC)),
            note=request.form.get("note", "").strip()[:MAX_NOTE_CHARS],
            detector=request.form.get("detector", "").strip(),
        )
        store.add_label(label, source="ui")
        what = verdict_words(label.hallucinated, flagged=choice in ("confirmed", "false_alarm"))
        flash(f"Recorded: {what} on span {span_id}" + (f" ({label.detector})" if label.detector else ""))
        return redirect(url_for("trace", trace_id=trace_id, _anchor=f"call-{span_id}"), code=303)

    return verdict


def _undo(store: TriageStore) -> Callable[[str], ResponseReturnValue]:
    """Withdraw the person's own standing verdict given on trace pages: a newer label row that supersedes it.

    Their review-queue verdict on the call, if any, stands: it is withdrawn on the review page only.
    """

    def undo(trace_id: str) -> ResponseReturnValue:
        trace_id = _checked(trace_id, TRACE_ID, "trace id")
        span_id = _checked(request.form.get("span_id", ""), SPAN_ID, "span id")
        identity: Identity = g.identity
        standing = store.current_label(trace_id, span_id, identity.user, elsewhere=True)
        if standing is None:
            abort(409, description=f"{identity.user} has no verdict on span {span_id} to undo.")
        store.add_label(replace(standing, labelled_at=to_utc_ms(datetime.now(UTC)), withdrawn=True), source="ui")
        # A verdict on a finding was given on a flag; one on the whole call says what the call is.
        flash(f"Withdrawn: your {verdict_words(standing.hallucinated, bool(standing.detector))} on span {span_id}")
        return redirect(url_for("trace", trace_id=trace_id, _anchor=f"call-{span_id}"), code=303)

    return undo


def _login(access: Access, proxy_header: str) -> Callable[[], ResponseReturnValue]:
    """Sign in with the token; behind a proxy with no token configured, the page says the proxy signs people in."""

    def login() -> ResponseReturnValue:
        target = _local(request.values.get("next", "")) or url_for("calls")
        page = partial(render_template, "login.html", target=target, proxy_header=proxy_header,
                       token=bool(access.token))  # fmt: skip
        if request.method == "POST":
            if access.accepts(request.form.get("token", "")):
                access.sign_in()
                return redirect(target, code=303)
            return page(refused=True), 401
        return page(refused=False)

    return login


def _logout() -> ResponseReturnValue:
    session.clear()
    return redirect(url_for("login"), code=303)


def _filters() -> ListFilters:
    args = request.args
    return ListFilters(
        service=args.get("service", ""),
        operation=args.get("operation", ""),
        detector=args.get("detector", ""),
        rule=args.get("rule", ""),
        since=_time_arg("since"),
        until=_time_arg("until"),
        alerted_only=args.get("alerted") == "1",
        min_probability=_probability_arg("min_p"),
        order=_choice_arg("order", ORDERS),
        trace=_trace_prefix_arg("trace"),
    )


def _trace_prefix_arg(name: str) -> str:
    """A trace id or its first 8+ characters (fewer would match too many traces to mean one)."""
    value = request.args.get(name, "").strip().lower()
    if value and not _TRACE_PREFIX.fullmatch(value):
        abort(400, description=f"{name}: a trace id or its first 8 or more hex characters, not {value[:64]!r}")
    return value


def _probability_arg(name: str) -> float | None:
    value = request.args.get(name, "")
    if not value:
        return None
    try:
        probability = float(value)
    except ValueError:
        probability = -1.0
    if not 0.0 <= probability <= 1.0:
        abort(400, description=f"{name}: not a probability in [0, 1]: {value!r}")
    return probability


def _choice_arg(name: str, choices: tuple[str, ...]) -> str:
    value = request.args.get(name, "") or choices[0]
    if value not in choices:
        abort(400, description=f"{name}: one of {', '.join(choices)}, not {value!r}")
    return value


def _time_arg(name: str) -> datetime | None:
    """A ``datetime-local`` field's value, read as UTC."""
    value = request.args.get(name, "")
    if not value:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        abort(400, description=f"{name}: not a date and time: {value!r}")
    return as_utc(moment)


def _int_arg(name: str, default: int) -> int:
    value = request.args.get(name, "")
    if not value:
        return default
    if not value.isdigit() or int(value) < 1:
        abort(400, description=f"{name} must be a whole number from 1")
    return int(value)


def _checked(value: str, pattern: re.Pattern[str], what: str) -> str:
    value = value.lower()
    if not pattern.fullmatch(value):
        abort(400, description=f"not a {what}: {value[:64]!r}")
    return value


def _same_origin(allowed: list[str]) -> bool:
    """Whether a browser's post comes from these pages: its ``Origin`` (when sent) is theirs or an allowed one.

    The CSRF token alone admits a post from any page that got hold of it; browsers send
    ``Origin`` with every cross-site post, so one from elsewhere is refused before the token is read.
    """
    origin = request.headers.get("Origin")
    if origin is None:
        return True  # older browsers and same-origin navigations without it: the CSRF token decides
    own = request.host_url.rstrip("/")
    return origin in (own, *(allowed_origin.rstrip("/") for allowed_origin in allowed))


def _local(target: str) -> str:
    """``target`` if it is a path on this site, else "" (no redirects elsewhere after sign-in)."""
    parts = urlsplit(target)
    return target if target.startswith("/") and not target.startswith("//") and not parts.netloc else ""


def _without_token() -> str:
    args = [(key, value) for key, value in request.args.items(multi=True) if key != "token"]
    return request.path + (f"?{urlencode(args)}" if args else "")


def _page_url(page: int) -> str:
    args = {key: value for key, value in request.args.items() if key != "page"}
    return f"{request.path}?{urlencode({**args, 'page': page})}"


def _message_page(status: int, title: str, detail: str) -> Response:
    return Response(render_template("message.html", title=title, detail=detail), status=status)


def _when(moment: datetime | None) -> str:
    if moment is None or moment.year < 1971:
        return "-"
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def _pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


def _score(value: float) -> str:
    return f"{value:.3f}"
