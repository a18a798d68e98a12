"""The review queue's verdicts beside the trace page's, on the demo's calls in embedded ClickHouse (Flask test client).

A verdict given on a trace page (or through Slack's alert buttons, or a label file) is kept apart
from the person's blind review verdict on the same call: it neither replaces nor withdraws it,
and the estimate counts the review queue's verdicts only.  The review page's Undo withdraws the
person's last verdict there and puts its call back in the queue.  Viewers see why they cannot
judge instead of buttons that would answer 403, and the queue's end says what is true.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from clickhouse_connect.driver.client import Client
from flask.testing import FlaskClient
from pydantic import SecretStr

from pipeline.config.review import ReviewSettings
from pipeline.config.settings import Settings
from pipeline.config.ui import UISettings
from pipeline.rate.report import rate_report, report_lines
from pipeline.rate.sampler import Strata
from pipeline.rate.store import RateStore, Scope
from pipeline.ui.queries import TriageStore
from pipeline.ui.review import ReviewQueue
from pipeline.ui.web import create_app

pytestmark = pytest.mark.integration

TOKEN = "review-verdicts-token-0123"
BEARER = {"Authorization": f"Bearer {TOKEN}"}
APP = "default"
REVIEW = ReviewSettings()  # blind, as by default


def _web(database: tuple[Client, str], **ui: object) -> FlaskClient:
    client, name = database
    settings = UISettings(token=SecretStr(TOKEN), token_user="alice", **ui)
    queue = ReviewQueue.configured(client, Settings(clickhouse_database=name, review=REVIEW))
    return create_app(TriageStore(client, name), settings, review=queue).test_client()


def _served(web: FlaskClient, headers: dict[str, str] = BEARER) -> tuple[str, str] | None:
    """The call the review page serves next: (trace, span), None when nothing is left."""
    page = web.get(f"/review?app={APP}", headers=headers)
    assert page.status_code == 200, page.get_data(as_text=True)[:500]
    found = re.search(
        r'id="call-([0-9a-f]{16})".*?trace <code>([0-9a-f]{32})</code>', page.get_data(as_text=True), re.S
    )
    return (found[2], found[1]) if found else None


def _judge(web: FlaskClient, call: tuple[str, str], verdict: str) -> str:
    form = {"app": APP, "trace_id": call[0], "span_id": call[1], "verdict": verdict}
    answer = web.post("/review/verdict", data=form, headers=BEARER, follow_redirects=True)
    assert answer.status_code == 200
    return answer.get_data(as_text=True)


_NOW = datetime.now(UTC)  # one window for every estimate a test compares (its header names the window's minutes)


def _scope() -> Scope:
    return Scope(_NOW - timedelta(days=REVIEW.window_days), _NOW + timedelta(hours=1), app=APP)


def _estimate(database: tuple[Client, str]) -> list[str]:
    """`halluwatch rate --app default` as it prints now."""
    rates = RateStore(*database, Strata.configured(REVIEW))
    return report_lines(rate_report(rates, _scope(), REVIEW.target_half_width), REVIEW.target_half_width)


def _review_rows(database: tuple[Client, str], span: str) -> list[tuple]:
    client, name = database
    return client.query(
        f"SELECT label, labeller, labelled_at, source, withdrawn, inclusion_probability, stratum, blind "
        f"FROM {name}.labels FINAL WHERE span_id = {{span:String}} AND NOT elsewhere",
        parameters={"span": span},
    ).result_rows


def test_a_verdict_on_the_trace_page_and_its_undo_leave_the_blind_review_verdict_and_the_estimate_alone(
    demo_database,
):
    web = _web(demo_database)
    for _ in range(3):  # a few verdicts first, so the estimate has something to lose
        call = _served(web)
        assert call is not None
        _judge(web, call, "faithful")
    trace, span = call
    estimate, review_verdict = _estimate(demo_database), _review_rows(demo_database, span)
    assert [row[:2] + row[3:5] + row[7:] for row in review_verdict] == [(False, "alice", "review", False, True)]
    next_call = _served(web)
    assert next_call is not None and next_call != call

    # The opposite verdict on the call's trace page, on the whole call: kept beside the review verdict.
    form = {"span_id": span, "detector": "", "verdict": "hallucinated", "note": "second look"}
    assert web.post(f"/trace/{trace}/verdict", data=form, headers=BEARER).status_code == 303
    assert _estimate(demo_database) == estimate and _review_rows(demo_database, span) == review_verdict
    page = web.get(f"/trace/{trace}", headers=BEARER).get_data(as_text=True)
    assert page.count('class="undo"') == 2  # one form with its one button: the trace page's verdict alone
    assert "via review" in page and "second look" in page

    # Its Undo withdraws the trace page's verdict only.
    assert web.post(f"/trace/{trace}/undo", data={"span_id": span}, headers=BEARER).status_code == 303
    assert _estimate(demo_database) == estimate and _review_rows(demo_database, span) == review_verdict
    assert web.post(f"/trace/{trace}/undo", data={"span_id": span}, headers=BEARER).status_code == 409
    assert _served(web) == next_call  # the judged call is not served again


def test_undo_on_the_review_page_withdraws_the_last_verdict_and_serves_its_call_again(demo_database):
    web = _web(demo_database)
    first = _served(web)
    assert first is not None
    before = _estimate(demo_database)
    judged = _judge(web, first, "hallucinated")
    assert "Undo it" in judged and f"on span <code>{first[1]}</code>" in judged
    assert _estimate(demo_database) != before
    second = _served(web)
    assert second is not None and second != first

    stale = {"app": APP, "trace_id": second[0], "span_id": second[1]}  # not the last verdict: refused
    assert web.post("/review/undo", data=stale, headers=BEARER).status_code == 409
    undo = {"app": APP, "trace_id": first[0], "span_id": first[1]}
    undone = web.post("/review/undo", data=undo, headers=BEARER, follow_redirects=True).get_data(as_text=True)
    assert f"Withdrawn: your verdict (hallucinated) on span {first[1]}; the call is back in the queue" in undone
    assert _estimate(demo_database) == before
    ((withdrawn, *_),) = [row[4:5] for row in _review_rows(demo_database, first[1])]
    assert withdrawn is True
    assert _served(web) == first  # drawn again: the queue is as it was before the verdict
    assert web.post("/review/undo", data=undo, headers=BEARER).status_code == 409  # once only


def test_a_viewer_sees_why_they_cannot_judge_and_the_queue_end_says_who_judged(demo_database):
    viewer = _web(demo_database, reviewers=["carol"]).get(f"/review?app={APP}", headers=BEARER)
    html = viewer.get_data(as_text=True)
    assert 'id="call-' in html and "review-verdict" not in html and "review-skip" not in html
    assert "alice may read the review queue, not judge it" in html

    # Another reviewer judges every call; alice judged and skipped none.
    proxied = _web(demo_database, identity_header="X-Forwarded-Email")
    dana = {"X-Forwarded-Email": "dana@example.com"}
    judged = 0
    while (call := _served(proxied, dana)) is not None:
        page = proxied.get(f"/review?app={APP}", headers=dana).get_data(as_text=True)
        csrf = re.search(r'name="csrf_token" value="([^"]+)"', page)[1]  # a browser's session, not a script's
        form = {"app": APP, "trace_id": call[0], "span_id": call[1], "verdict": "faithful", "csrf_token": csrf}
        assert proxied.post("/review/verdict", data=form, headers=dana).status_code == 303
        judged += 1
    end = _web(demo_database).get(f"/review?app={APP}", headers=BEARER).get_data(as_text=True)
    words = re.search(r'class="note nothing-left">([^<]+)<', end)
    assert words is not None
    assert words[1] == (
        f"Nothing left to review for {APP}: the window holds {judged} calls that the detectors could check: "
        f"{judged} with a verdict."
    )
