"""The review queue in headless Chromium (Debian's) on the demo's data: draw, judge with the keyboard, estimate.

With the findings shown up front (``review.blind: false``), a reviewer opens the review page for
the demo's default application, judges ten calls with the keys (one with a note), skips one, and
watches the verdict-corrected rate appear; the test reads each verdict back from ClickHouse with
the stratum and inclusion probability the page showed, and checks that the skipped call is not
served again.  Blind, as by default, a reviewer walks every application's queue to its end: each
call shows what the model did and nothing the detectors said until the verdict is in, then the
findings.  With TRIAGE_SCREENSHOTS_DIR set, a blind review page and the page revealing the
findings after its verdict are saved there (the README's screenshots).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from clickhouse_connect.driver.client import Client
from playwright.sync_api import Page, sync_playwright
from pydantic import SecretStr

from detectors.registry import DETECTORS
from pipeline.config.review import ReviewSettings
from pipeline.config.settings import Settings
from pipeline.config.ui import UISettings
from pipeline.rate.report import rate_report, report_lines
from pipeline.rate.sampler import Strata
from pipeline.rate.store import RateStore, Scope
from pipeline.tools.example_traces import EXAMPLES, LOG_EVENT_EXAMPLES
from pipeline.ui.queries import TriageStore
from pipeline.ui.review import ReviewQueue
from pipeline.ui.web import create_app
from tests.chromium import chromium_path
from tests.integration.test_triage_browser import _screenshot, overflowing, serving

pytestmark = pytest.mark.integration

TOKEN = "review-test-token-0123"
APP = "default"


def test_a_reviewer_judges_ten_calls_with_the_keyboard_and_the_estimate_follows(demo_database):
    client, database = demo_database
    review = ReviewSettings(blind=False)
    rates = RateStore(client, database, Strata.configured(review))
    settings = UISettings(token=SecretStr(TOKEN), token_user="reviewer")
    app = create_app(TriageStore(client, database), settings, review=_queue(client, database, review))
    served: list[tuple[str, str, float, bool]] = []  # span, stratum, inclusion probability, hallucinated

    with serving(app) as base_url, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_path(), args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(f"{base_url}/review?app={APP}&token={TOKEN}")
            assert "needs 2 more verdicts among alerted calls" in page.inner_text("section.estimate p.rate")
            assert page.locator("section.found").is_visible()  # not blind: the findings show up front
            skipped = _span(page)
            page.keyboard.press("s")
            page.wait_for_selector(".flash")
            assert f"Skipped span {skipped}" in page.inner_text(".flash")
            for turn in range(10):
                span, stratum = _span(page), page.inner_text("strong.stratum")
                probability = page.inner_text("span.inclusion")
                assert span != skipped and span not in [s for s, *_ in served]
                hallucinated = stratum == "alerted"  # the demo's alerted calls are its planted hallucinations
                if turn == 0:
                    page.keyboard.press("n")
                    page.keyboard.type("checked against the brochure")
                    page.keyboard.press("Escape")
                page.keyboard.press("h" if hallucinated else "f")
                page.wait_for_selector(".flash")
                verdict = "hallucinated" if hallucinated else "faithful"
                assert f"Recorded: {verdict} on span {span}" in page.inner_text(".flash")
                served.append((span, stratum, float(probability), hallucinated))
            rate_text = page.inner_text("section.estimate p.rate")
        finally:
            browser.close()

    stored = client.query(
        f"SELECT span_id, stratum, inclusion_probability, label, labeller, note, source, blind "
        f"FROM {database}.labels FINAL ORDER BY labelled_at"
    ).result_rows
    assert [(s, stratum, pytest.approx(p, abs=5e-4), h) for s, stratum, p, h in served] == [row[:4] for row in stored]
    assert {row[4:6] for row in stored[:1]} == {("reviewer", "checked against the brochure")}
    assert {row[6:8] for row in stored} == {("review", False)}  # given with the findings in view
    # The sampler served every stratum holding calls, the alerted ones and calls nobody flagged.
    strata = {stratum for _, stratum, *_ in served}
    assert "alerted" in strata and any(s.startswith("p 0.00") for s in strata)
    # Each stratum's k-th verdict was drawn with probability k / N.
    population, _, _ = rates.queue_state(rates_scope(review), "nobody")
    for stratum in strata:
        drawn = [p for _, s, p, _ in served if s == stratum]
        assert drawn == pytest.approx([k / population[stratum] for k in range(1, len(drawn) + 1)], abs=5e-4)
    assert client.query(f"SELECT span_id, reviewer FROM {database}.review_skips").result_rows == [(skipped, "reviewer")]
    # The estimate the page showed is the stratified one: alerted calls' share of the app's calls.
    expected = population["alerted"] / sum(population.values())
    assert re.search(rf"{100 * expected:.1f} % ± [\d.]+ \(95 % CI", rate_text), rate_text
    report = rate_report(rates, rates_scope(review), review.target_half_width)
    assert report.rate.value == pytest.approx(expected) and report.verdicts == 10


def _queue(client: Client, database: str, review: ReviewSettings) -> ReviewQueue:
    return ReviewQueue.configured(client, Settings(clickhouse_database=database, review=review))


def rates_scope(review: ReviewSettings, app: str = APP) -> Scope:
    now = datetime.now(UTC)
    return Scope(now - timedelta(days=review.window_days), now + timedelta(seconds=1), app=app)


def _span(page: Page) -> str:
    return page.locator("section.review p.meta code").nth(1).inner_text()


def test_blind_review_of_every_application_shows_what_the_model_did_and_the_findings_only_after_the_verdict(
    demo_database,
):
    client, database = demo_database
    review = ReviewSettings()  # blind, as by default
    rates = RateStore(client, database, Strata.configured(review))
    settings = UISettings(token=SecretStr(TOKEN), token_user="reviewer")
    app = create_app(TriageStore(client, database), settings, review=_queue(client, database, review))
    detector_names = re.compile(r"\b(" + "|".join(spec.name for spec in DETECTORS) + r")\b")
    examples = EXAMPLES + LOG_EVENT_EXAMPLES
    judged: dict[str, int] = {}

    with serving(app) as base_url, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_path(), args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(f"{base_url}/review?token={TOKEN}")
            for name in rates.apps():
                page.goto(f"{base_url}/review?app={name}")
                while not page.locator("text=Nothing left to review").count():
                    call = page.locator("section.review")
                    before = call.inner_text()
                    # Nothing of the detectors before the verdict: no marks, no probability, no detector, no stratum.
                    assert page.locator("mark.flag").count() == 0 and page.locator("section.found").count() == 0
                    assert "p_hallucination" not in before and "stratum" not in before
                    assert not detector_names.search(before), detector_names.search(before)
                    did = page.locator(".model-did")
                    answer = did.locator(".answer").all_inner_texts()
                    uses = did.locator(".tool-use").all()
                    assert any(text.strip() for text in answer) or uses, before
                    for use in uses:
                        assert use.locator("dd.arguments pre").first.inner_text().strip()
                        result = use.locator("dd.result").inner_text().strip()
                        assert result and "no result in this trace" not in result, before
                    # The question, the sources' line and the answer with its buttons fit a 1280x900 screen.
                    buttons = page.locator("form.review-verdict").bounding_box()
                    assert buttons is not None and buttons["y"] + buttons["height"] <= 900, (
                        name,
                        buttons,
                        before[:200],
                    )
                    assert page.locator("section.estimate").bounding_box()["y"] > buttons["y"]  # type: ignore[index]
                    estimate = page.inner_text("section.estimate")  # names no stratum: the next call's would show
                    assert "stratum" not in estimate and "alerted" not in estimate and "p_hallucination" not in estimate
                    question = page.locator("pre.question").first.inner_text()
                    (example,) = [e for e in examples if e.question.strip() in " ".join(question.split())]
                    if not judged:
                        _screenshot(page, "review.png")
                    page.keyboard.press("h" if example.hallucinated else "f")
                    # Then the call again, with what the detectors found on it.
                    page.wait_for_selector("section.found")
                    assert "p_hallucination" in page.inner_text("section.found")
                    assert page.locator("strong.stratum").count() == 1
                    assert "inclusion probability" in page.inner_text("p.drawn")
                    assert page.locator("form.review-undo button").is_visible()
                    assert overflowing(page) == [], name
                    if not judged:
                        _screenshot(page, "review-judged.png")
                    judged[name] = judged.get(name, 0) + 1
                    page.keyboard.press("n")
                    page.wait_for_selector("section.estimate")
        finally:
            browser.close()

    # Every verified call of every application was served and judged, each blind.
    assert judged == {name: sum(rates.queue_state(rates_scope(review, name), "x")[0].values()) for name in rates.apps()}
    blind = client.query(f"SELECT countIf(blind), count() FROM {database}.labels FINAL").result_rows
    assert blind == [(sum(judged.values()), sum(judged.values()))]
    # Every servable call of default judged: `halluwatch rate --app default` has its estimate.
    lines = report_lines(rate_report(rates, rates_scope(review), review.target_half_width), review.target_half_width)
    (rate_line,) = [line for line in lines if "verdict-corrected rate:" in line]
    assert re.search(r"rate: \d+\.\d % *, every call judged \(\d+ verdicts\)", rate_line), rate_line
