"""The triage pages on the demo's data in embedded ClickHouse, through Flask's test client.

The demo's example traces went through the real detectors, row builders and agreement
rule (``demo_database``); the pages read them back as a user would: lists, filters,
pages, the alerted trace with its flagged words, verdicts with and without the right
credentials.
"""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from html import unescape

import pytest
from clickhouse_connect.driver.client import Client
from flask.testing import FlaskClient
from pydantic import SecretStr

from detectors.base import DetectorResult
from pipeline.config.content_policy import ContentPolicy
from pipeline.config.ui import UISettings
from pipeline.offline.human_labels import labelled_scores_from_clickhouse
from pipeline.sinks.clickhouse import ClickHouseSink, migrate
from pipeline.sinks.labels import Label, insert_labels
from pipeline.sinks.rows import finding_record, finding_row, llm_call_row
from pipeline.ui.defences import BIDI_CONTROLS, SECURITY_HEADERS
from pipeline.ui.queries import ListFilters, TriageStore
from pipeline.ui.web import create_app
from tests.calls import make_llm_call

pytestmark = pytest.mark.integration

TOKEN = "test-token-0123456789"
BEARER = {"Authorization": f"Bearer {TOKEN}"}


def _client(database: tuple[Client, str], page_size: int = 50, **ui: object) -> FlaskClient:
    client, name = database
    settings = UISettings(**{"token": SecretStr(TOKEN), "token_user": "alice", "page_size": page_size, **ui})
    app = create_app(TriageStore(client, name), settings)
    return app.test_client()


def _html(response) -> str:
    assert response.status_code == 200, response.get_data(as_text=True)[:500]
    return response.get_data(as_text=True)


def _listed_traces(html: str) -> list[str]:
    return re.findall(r'href="/trace/([0-9a-f]{32})#call-', html)


def _trace_of(database: tuple[Client, str], service: str) -> str:
    client, name = database
    (call,) = TriageStore(client, name).flagged_calls(ListFilters(service=service, alerted_only=True), 10)
    return call.trace_id


def _labels(database: tuple[Client, str]) -> list[tuple]:
    client, name = database
    return client.query(
        f"SELECT trace_id, span_id, label, detector, labeller, note, source FROM {name}.labels FINAL "
        "ORDER BY labelled_at"
    ).result_rows


def test_list_shows_every_flagged_call_newest_first_with_filters_and_pages(demo_database):
    client, name = demo_database
    query = f"SELECT uniqExact(trace_id, span_id) FROM {name}.llm_calls FINAL WHERE flagged"
    flagged = client.query(query).result_rows[0][0]
    web = _client(demo_database)

    unfiltered = _html(web.get("/", headers=BEARER))
    everything = _listed_traces(unfiltered)
    assert len(everything) == flagged > 5
    assert unfiltered.count("selected>") == 1 and 'value="newest" selected>' in unfiltered  # filters show "any"

    travel = _html(web.get("/?service=travel-guide", headers=BEARER))
    assert '<option value="travel-guide" selected>' in travel
    assert set(_listed_traces(travel)) == {_trace_of(demo_database, "travel-guide")}
    assert "severe-contradiction" in travel  # the alert's rule beside the call

    severe = _listed_traces(_html(web.get("/?rule=severe-contradiction", headers=BEARER)))
    alerted = _listed_traces(_html(web.get("/?alerted=1", headers=BEARER)))
    (severe_traces,) = client.query(
        f"SELECT groupUniqArray(trace_id) FROM {name}.alerts WHERE rule = 'severe-contradiction'"
    ).result_rows[0]
    assert set(severe) == set(severe_traces) and len(severe) >= 2
    assert set(severe) < set(alerted) < set(everything)
    tool_facts = _html(web.get("/?detector=tool_facts", headers=BEARER))
    assert len(_listed_traces(tool_facts)) == 2 and "shop-assistant" in tool_facts
    future = _html(web.get("/?since=2999-01-01T00:00", headers=BEARER))
    assert _listed_traces(future) == [] and "No flagged calls match." in future

    paged = _client(demo_database, page_size=5)
    pages = [_html(paged.get(f"/?page={page}", headers=BEARER)) for page in (1, 2, 3, 4)]
    assert [len(_listed_traces(page)) for page in pages[:2]] == [5, 5]
    assert sum(len(_listed_traces(page)) for page in pages) == len(everything)
    assert "older</a>" in pages[0] and "newer</a>" in pages[1]

    assert web.get("/?since=yesterday", headers=BEARER).status_code == 400
    assert web.get("/?page=0", headers=BEARER).status_code == 400


def test_the_list_sorts_and_filters_by_probability(demo_database):
    client, name = demo_database
    rows = client.query(
        f"SELECT trace_id, p_hallucination FROM {name}.llm_calls FINAL WHERE flagged AND p_hallucination IS NOT NULL"
    ).result_rows
    web = _client(demo_database)
    likely_first = _listed_traces(_html(web.get("/?order=probability", headers=BEARER)))
    by_trace = dict(rows)
    judged = [by_trace[trace] for trace in likely_first if trace in by_trace]
    assert len(judged) >= 3 and judged == sorted(judged, reverse=True)
    assert likely_first[: len(judged)] == [t for t in likely_first if t in by_trace]  # unjudged (facts) last
    confident = _listed_traces(_html(web.get("/?min_p=0.9", headers=BEARER)))
    assert set(confident) == {trace for trace, p in rows if p >= 0.9}
    assert web.get("/?min_p=2", headers=BEARER).status_code == 400
    assert web.get("/?order=random", headers=BEARER).status_code == 400


def test_trace_page_highlights_the_flagged_words_beside_the_source_they_were_compared_with(demo_database):
    trace = _trace_of(demo_database, "travel-guide")
    html = _html(_client(demo_database).get(f"/trace/{trace}", headers=BEARER))
    assert re.search(r'p_hallucination <strong class="p">0\.9\d\d</strong> · flagged', html)  # the call as a whole

    (answer,) = re.findall(r'<div class="answer">(.*?)</div>', html, re.S)
    marked = [unescape(text) for text in re.findall(r"<mark[^>]*>(.*?)</mark>", answer, re.S)]
    assert "1950" in marked and "500 m" in marked  # the wrong year and height, each its own mark
    assert "Eiffel Tower" not in " ".join(marked)  # the words the sources support stay plain
    # Each flagged value beside what the context says instead.
    row = r'<tr><td><mark class="flag">(.*?)</mark></td><td>(\w+)</td>\s*<td class="source">(.*?)</td>'
    rows = re.findall(row, html)
    compared = {(unescape(text), detector): unescape(source) for text, detector, source in rows}
    assert "1887 and 1889" in compared[("1950", "contradiction")]  # the sentence that states the value
    assert compared[("500 m", "contradiction")].startswith("The tower is 330 m tall")
    assert "severe-contradiction" in html and ">logged</span>" in html  # the alert, delivered to the log only
    assert "No verdicts yet." in html


def test_unknown_and_malformed_traces(demo_database):
    web = _client(demo_database)
    missing = web.get(f"/trace/{'ab' * 16}", headers=BEARER)
    assert missing.status_code == 404 and "holds nothing of trace" in missing.get_data(as_text=True)
    assert web.get("/trace/not-a-trace", headers=BEARER).status_code == 400


def test_a_browser_signs_in_with_the_token_and_records_a_verdict_behind_csrf(demo_database):
    trace = _trace_of(demo_database, "travel-guide")
    web = _client(demo_database)

    anonymous = web.get(f"/trace/{trace}")
    assert anonymous.status_code == 302 and anonymous.location.startswith(f"/login?next=/trace/{trace}")
    signed_in = web.get(f"/trace/{trace}?token={TOKEN}")
    assert signed_in.status_code == 302 and signed_in.location == f"/trace/{trace}"  # the token leaves the URL
    html = _html(web.get(signed_in.location))
    span = re.search(r'name="span_id" value="([0-9a-f]{16})"', html)[1]
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', html)[1]
    form = {"span_id": span, "detector": "contradiction", "verdict": "false_alarm", "note": "the tower <is> 330 m"}

    assert web.post(f"/trace/{trace}/verdict", data=form).status_code == 400  # no CSRF token: refused
    assert _labels(demo_database) == []
    recorded = web.post(f"/trace/{trace}/verdict", data={**form, "csrf_token": csrf})
    assert recorded.status_code == 303 and recorded.location.endswith(f"/trace/{trace}#call-{span}")
    assert _labels(demo_database) == [(trace, span, False, "contradiction", "alice", "the tower <is> 330 m", "ui")]
    # What `halluwatch calibrate --from-clickhouse` fits on: the verdict with the call's findings.
    (judged,) = labelled_scores_from_clickhouse(*demo_database)
    assert judged.id == f"{trace}:{span}" and judged.hallucinated is False
    assert judged.detectors["contradiction"].status == "ok" and judged.detectors["contradiction"].score > 0.5

    page = _html(web.get(f"/trace/{trace}"))
    assert "Recorded: false alarm on span" in page
    assert "the tower &lt;is&gt; 330 m" in page  # escaped, never markup

    # A script with the token needs no session and no CSRF token (no cookie to ride on).
    confirmed = web.post(f"/trace/{trace}/verdict", data={**form, "verdict": "confirmed", "note": ""}, headers=BEARER)
    assert confirmed.status_code == 303
    assert _labels(demo_database)[-1][2:] == (True, "contradiction", "alice", "", "ui")  # the newer verdict replaces

    bad = {**form, "verdict": "maybe", "csrf_token": csrf}
    assert web.post(f"/trace/{trace}/verdict", data=bad).status_code == 400


def test_sign_in_form_refuses_wrong_tokens_and_foreign_redirects(demo_database):
    web = _client(demo_database)
    page = _html(web.get("/login"))
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', page)[1]
    refused = web.post("/login", data={"token": "wrong", "next": "/", "csrf_token": csrf})
    assert refused.status_code == 401 and "not this halluwatch" in refused.get_data(as_text=True)
    accepted = web.post("/login", data={"token": TOKEN, "next": "//evil.example/", "csrf_token": csrf})
    assert accepted.status_code == 303 and accepted.location == "/"
    assert web.get("/").status_code == 200
    assert web.get("/", headers={"Authorization": "Bearer wrong"}).status_code == 302


def test_proxy_identity_is_believed_only_from_a_trusted_address(demo_database):
    web = _client(demo_database, identity_header="X-Forwarded-Email", trusted_proxies=["10.0.0.0/8"])
    named = {"X-Forwarded-Email": "bob@example.com"}
    from_proxy = web.get("/", headers=named, environ_base={"REMOTE_ADDR": "10.1.2.3"})
    assert "bob@example.com" in _html(from_proxy)
    spoofed = web.get("/", headers=named, environ_base={"REMOTE_ADDR": "192.0.2.7"})
    assert spoofed.status_code == 302 and spoofed.location.startswith("/login")


def test_behind_a_proxy_the_sign_in_page_asks_for_no_token_that_was_never_made(demo_database):
    page = _html(_client(demo_database, identity_header="X-Forwarded-Email", token=None).get("/login"))
    proxied = " ".join(page.split())
    assert "Sign-in goes through the authenticating proxy" in proxied and "<code>X-Forwarded-Email</code>" in proxied
    assert "there is none to enter here" in proxied and 'name="token"' not in proxied and "Paste" not in proxied
    both = " ".join(_html(_client(demo_database, identity_header="X-Forwarded-Email").get("/login")).split())
    assert "or enter the UI token below" in both and 'name="token"' in both
    plain = _html(_client(demo_database).get("/login"))
    assert "proxy" not in plain and 'name="token"' in plain


def test_hashed_content_is_explained_not_shown_and_text_is_escaped(clickhouse):
    client, name = clickhouse
    migrate(client, name)
    now = datetime.now(UTC)
    sink = ClickHouseSink(client, name)
    hashed = make_llm_call(answer="secret answer", prompt="q", trace_id="c" * 32, span_id="1" * 16)
    plain = make_llm_call(answer="<script>alert(1)</script> It is 500 m.", prompt="q", trace_id="c" * 32,
                          span_id="2" * 16, start_time_unix_nano=10)  # fmt: skip
    sink.add("llm_calls", [llm_call_row(hashed, ContentPolicy("hash", SecretStr("k")), now)])
    sink.add("llm_calls", [llm_call_row(plain, ContentPolicy("store"), now)])
    at = plain.answer.index("500 m")
    span = {"start": at, "end": at + 5, "text": "500 m", "source_text": "330 m <b>tall</b>"}
    result = DetectorResult("unsupported_spans", "1", 0.9, True, 0.5, evidence={"spans": [span]})
    sink.add("findings", [finding_row(finding_record(plain, result, "v1", ContentPolicy("store")), now)])
    sink.flush()

    html = _html(_client((client, name)).get(f"/trace/{'c' * 32}", headers=BEARER))
    assert "stored as HMAC digests under content_mode=hash" in html and "secret answer" not in html
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert '<mark class="flag" data-detectors="unsupported_spans"' in html and ">500 m</mark>" in html
    assert "330 m &lt;b&gt;tall&lt;/b&gt;" in html


def test_an_unmigrated_database_is_named_with_what_it_lacks(clickhouse):
    client, name = clickhouse
    client.command(f"CREATE DATABASE IF NOT EXISTS {name}")
    assert TriageStore(client, name).schema_gaps() == [
        "llm_calls.transcript",
        "findings.evidence",
        "alerts.resolved_by",
        "labels.elsewhere",
        "review_skips.reviewer",
        "tool_runs.result",
    ]
    migrate(client, name)
    assert TriageStore(client, name).schema_gaps() == []


def _findings_row(html: str, detector: str) -> str:
    (row,) = re.findall(rf'<tr class="flagged">\s*<td>{detector}</td>.*?</tr>', html, re.S)
    return row


def test_a_verdict_shows_on_the_row_it_was_given_on_and_can_be_undone(demo_database):
    trace = _trace_of(demo_database, "travel-guide")
    web = _client(demo_database)
    html = _html(web.get(f"/trace/{trace}", headers=BEARER))
    span = re.search(r'name="span_id" value="([0-9a-f]{16})"', html)[1]
    form = {"span_id": span, "detector": "contradiction", "verdict": "false_alarm", "note": "330 m is right"}
    assert web.post(f"/trace/{trace}/verdict", data=form, headers=BEARER).status_code == 303

    judged = _html(web.get(f"/trace/{trace}", headers=BEARER))
    row = _findings_row(judged, "contradiction")
    assert re.search(r"<strong>False alarm</strong> by alice · \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", row)
    assert "330 m is right" in row and 'class="false-alarm"' not in row  # the verdict instead of the buttons
    assert 'class="false-alarm"' in _findings_row(judged, "unsupported_spans")  # other rows keep theirs

    assert web.post(f"/trace/{trace}/undo", data={"span_id": span}, headers=BEARER).status_code == 303
    undone = _html(web.get(f"/trace/{trace}", headers=BEARER))
    assert 'class="false-alarm"' in _findings_row(undone, "contradiction")
    assert "withdrawn (was false alarm)" in undone
    # The undo is a newer row that supersedes the verdict: calibration no longer counts the call.
    assert _labels(demo_database)[-1][2:] == (False, "contradiction", "alice", "330 m is right", "ui")
    assert labelled_scores_from_clickhouse(*demo_database) == []
    assert web.post(f"/trace/{trace}/undo", data={"span_id": span}, headers=BEARER).status_code == 409


def test_the_list_finds_a_trace_by_its_id_or_prefix_and_shows_probabilities_and_verdicts(demo_database):
    trace = _trace_of(demo_database, "travel-guide")
    web = _client(demo_database)
    for search in (trace, trace[:8].upper(), f" {trace[:8]} "):
        found = _html(web.get("/", query_string={"trace": search}, headers=BEARER))
        assert set(_listed_traces(found)) == {trace}
        assert f'value="{search.strip().lower()}"' in found  # the search stays in its box
    assert f"<code>{trace[:12]}…</code></a>" in found  # the trace id is the link's text
    assert web.get("/?trace=45e33e3", headers=BEARER).status_code == 400  # 7 characters match too much
    assert web.get("/?trace=not-hex-at-all", headers=BEARER).status_code == 400
    unknown = _html(web.get(f"/?trace={'0' * 32}", headers=BEARER))
    assert _listed_traces(unknown) == [] and f'href="/trace/{"0" * 32}"' in unknown

    everything = _html(web.get("/", headers=BEARER))
    probabilities = re.findall(r'<td class="probability">([0-9.]+)</td>', everything)
    assert len(set(probabilities)) >= 4  # rows differ by the call's calibrated probability
    assert everything.count("none yet") == len(_listed_traces(everything))
    span = re.search(rf'href="/trace/{trace}#call-([0-9a-f]{{16}})"', everything)[1]
    form = {"span_id": span, "detector": "contradiction", "verdict": "confirmed"}
    assert web.post(f"/trace/{trace}/verdict", data=form, headers=BEARER).status_code == 303
    judged = _html(web.get("/", query_string={"trace": trace}, headers=BEARER))
    assert '<span class="tag alert">1 hallucination</span>' in judged and "none yet" not in judged
    # alice's review-queue verdict on the call stands beside it; the list counts her once, by her newest.
    client, name = demo_database
    drawn = Label(trace, span, True, "alice", datetime.now(UTC) - timedelta(hours=1), stratum="alerted",
                  inclusion_probability=0.5)  # fmt: skip
    insert_labels(client, name, [drawn, replace(drawn, labeller="bob", hallucinated=False)], "review")
    judged = _html(web.get("/", query_string={"trace": trace}, headers=BEARER))
    assert '<span class="tag alert">1 hallucination</span>' in judged
    assert '<span class="tag ok">1 false alarm</span>' in judged


def test_the_trace_page_reads_top_down_for_a_decision(demo_database):
    trace = _trace_of(demo_database, "travel-guide")
    html = _html(_client(demo_database).get(f"/trace/{trace}", headers=BEARER))
    # The call's probability and why it is flagged, the answer, the alert, the detectors that flagged, the others.
    why = html.index('class="why"')
    assert why < html.index('class="answer"') < html.index("severe-contradiction") < html.index('class="findings"')
    assert re.search(r'p_hallucination <strong class="p">0\.9\d\d</strong> · flagged', html)
    assert "Flagged by its probability: p_hallucination 0.9" in unescape(html)
    quiet = re.search(r'<details class="quiet"><summary>(\d+) detectors did not flag this call</summary>', html)
    assert quiet and html.index('class="findings"') < quiet.start()
    # Detectors that did not run show no score, and no severity is left unexplained.
    skipped = re.search(
        r"<td>tool_outcome</td><td>skipped</td>\s*<td class=\"sentence\">.*?</td>\s*<td>(.*?)</td>", html, re.S
    )
    assert skipped and skipped[1] == ""
    assert "sev." not in html

    def sentence(detector: str) -> str:
        row = re.search(rf"<td>{detector}</td><td>\w+</td>\s*<td class=\"sentence\">(.*?)</td>", html, re.S)
        return unescape(row[1])

    assert sentence("grounding").startswith("Checked whether each answer sentence is about")
    assert "did not flag the call: its score stayed below its threshold (every sentence supported" in sentence(
        "grounding"
    )
    assert "cannot judge values: it compares meaning" in sentence("grounding")  # why it passes what contradiction flags
    assert "decides whether the content detectors apply; let the content detectors run" in sentence("sentinel")
    assert sentence("contradiction").startswith("Checked the numbers, dates") and "; flagged (answer says 1950" in (
        sentence("contradiction")
    )

    # Evidence as tables without character offsets; the raw JSON one click away.
    claims = re.search(r"<caption>claims</caption>(.*?)</table>", html, re.S)[1]
    assert '<th scope="col">context text</th>' in claims and "start" not in claims
    # The value the context states, then the sentence that states it.
    year_row = r"<tr><td>year</td><td>1950</td><td>conflict</td><td>1887 and 1889</td><td>[^<]*built between"
    assert re.search(year_row, claims)
    raw = re.findall(r'<details class="raw"><summary>raw JSON</summary><pre>(.*?)</pre>', html, re.S)
    assert any('"context_start": 35' in unescape(block) for block in raw)


def test_the_favicon_is_served_without_signing_in(clickhouse):
    icon = _client(clickhouse).get("/favicon.ico")
    assert icon.status_code == 200 and icon.mimetype == "image/svg+xml"
    assert icon.get_data(as_text=True).startswith("<svg")


def test_every_response_carries_the_security_headers(demo_database):
    web = _client(demo_database)
    trace = _trace_of(demo_database, "travel-guide")
    paths = ["/", f"/trace/{trace}", "/nowhere"]
    responses = [web.get(path, headers=BEARER) for path in paths] + [web.get("/login"), web.get("/static/triage.css")]
    for response in responses:
        assert {name: response.headers.get(name) for name, _ in SECURITY_HEADERS} == dict(SECURITY_HEADERS)
    policy = dict(SECURITY_HEADERS)["Content-Security-Policy"]
    assert "'unsafe-inline'" not in policy and "frame-ancestors 'none'" in policy
    assert "<script>" not in _html(responses[1]) and " on" + "click=" not in _html(responses[1])  # nothing inline


def _signed_in(web: FlaskClient, trace: str) -> dict[str, str]:
    """Sign ``web`` in with the token; the verdict form's fields of ``trace``'s page, CSRF token included."""
    web.get(f"/trace/{trace}?token={TOKEN}")
    html = _html(web.get(f"/trace/{trace}"))
    span = re.search(r'id="call-([0-9a-f]{16})"', html)[1]
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', html)[1]
    return {"span_id": span, "detector": "contradiction", "verdict": "confirmed", "note": "", "csrf_token": csrf}


def test_a_cross_origin_post_is_refused_even_with_a_valid_csrf_token(demo_database):
    trace = _trace_of(demo_database, "travel-guide")
    web = _client(demo_database)
    form = _signed_in(web, trace)
    refused = web.post(f"/trace/{trace}/verdict", data=form, headers={"Origin": "http://evil.example"})
    assert refused.status_code == 403 and _labels(demo_database) == []
    own = web.post(f"/trace/{trace}/verdict", data=form, headers={"Origin": "http://localhost"})
    assert own.status_code == 303 and len(_labels(demo_database)) == 1
    proxied = _client(demo_database, origins=["https://halluwatch.example.com"])
    form = _signed_in(proxied, trace)
    assert (
        proxied.post(
            f"/trace/{trace}/verdict", data=form, headers={"Origin": "https://halluwatch.example.com"}
        ).status_code
        == 303
    )


def test_a_viewer_reads_but_cannot_post_verdicts(demo_database):
    trace = _trace_of(demo_database, "travel-guide")
    viewer = _client(demo_database, reviewers=["bob"])  # the token's holder is alice
    form = _signed_in(viewer, trace)
    page = _html(viewer.get(f"/trace/{trace}"))
    assert '<form class="verdict"' not in page and "alice may read these pages, not judge" in page  # no 403 buttons
    refused = viewer.post(f"/trace/{trace}/verdict", data=form)
    assert refused.status_code == 403 and "ui.reviewers" in refused.get_data(as_text=True)
    assert viewer.post(f"/trace/{trace}/verdict", data=form, headers=BEARER).status_code == 403  # scripts too
    assert _labels(demo_database) == []
    reviewer = _client(demo_database, reviewers=["alice"])
    assert reviewer.post(f"/trace/{trace}/verdict", data=_signed_in(reviewer, trace)).status_code == 303


def test_bidirectional_controls_in_span_text_are_shown_neutralized(clickhouse):
    client, name = clickhouse
    migrate(client, name)
    spoofed = make_llm_call(answer="It is 500 m.", prompt="q", trace_id="d" * 32, span_id="3" * 16,
                            service="billing\u202egnp.exe", model="gpt\u2066-4o")  # fmt: skip
    sink = ClickHouseSink(client, name)
    now = datetime.now(UTC)
    sink.add("llm_calls", [llm_call_row(spoofed, ContentPolicy("store"), now)])
    result = DetectorResult("contradiction", "1", 0.9, True, 0.5, summary="answer says \u202e005")
    sink.add("findings", [finding_row(finding_record(spoofed, result, "v1", ContentPolicy("store")), now)])
    sink.flush()
    web = _client((client, name))
    for page in (_html(web.get("/", headers=BEARER)), _html(web.get(f"/trace/{'d' * 32}", headers=BEARER))):
        assert not any(control in page for control in BIDI_CONTROLS)
        assert "billing\ufffdgnp.exe" in page


@pytest.mark.parametrize(
    ("service", "marker", "arguments", "result"),
    [
        ("support-bot", '"unit": "kelvin"', '"city": "Oslo"', "unit must be celsius or fahrenheit, not 'kelvin'"),
        ("product-qa", '"customer_id": "ACME-4411"', '"title": "SSO broken for Okta users"', "expected an integer"),
    ],
)
def test_a_call_that_only_called_tools_shows_them_with_their_arguments_and_results_outside_the_evidence(
    demo_database, service, marker, arguments, result
):
    client, name = demo_database
    calls = TriageStore(client, name).flagged_calls(ListFilters(service=service), 20)
    page = _client(demo_database)
    pages = [_html(page.get(f"/trace/{call.trace_id}", headers=BEARER)) for call in calls]
    (html,) = [html for html in pages if marker in unescape(html)]
    did = unescape(re.search(r'<div class="model-did" data-judged="tool calls">(.*?)<h3', html, re.S)[1])
    assert "Tool calls (no text answer: these are what you judge)" in did
    assert arguments in did and result in did  # the call's arguments and its run's result
    assert "definition the model had" in did
    # Not inside any evidence table: the model's own story comes before the findings.
    assert html.index('class="model-did"') < html.index('class="findings"')
