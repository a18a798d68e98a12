"""The review queue in headless Chromium (Debian's) on the demo's data: draw, judge with the keyboard, estimate.

A reviewer opens the review page for the demo's default application, judges ten calls with the
keys (one with a note), skips one, and watches the verdict-corrected rate appear; the test reads
each verdict back from ClickHouse with the stratum and inclusion probability the page showed,
and checks that the skipped call is not served again.  With TRIAGE_SCREENSHOTS_DIR set, the
page after the ten verdicts is saved there (the README's screenshot).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from playwright.sync_api import Page, sync_playwright
from pydantic import SecretStr

from pipeline.config.review import ReviewSettings
from pipeline.config.ui import UISettings
from pipeline.rate.report import rate_report
from pipeline.rate.sampler import Strata
from pipeline.rate.store import RateStore, Scope
from pipeline.ui.queries import TriageStore
from pipeline.ui.web import create_app
from tests.chromium import chromium_path
from tests.integration.test_triage_browser import _screenshot, serving

pytestmark = pytest.mark.integration

TOKEN = "review-test-token-0123"
APP = "default"


def test_a_reviewer_judges_ten_calls_with_the_keyboard_and_the_estimate_follows(demo_database):
    client, database = demo_database
    review = ReviewSettings()
    rates = RateStore(client, database, Strata.configured(review))
    settings = UISettings(token=SecretStr(TOKEN), token_user="reviewer")
    app = create_app(TriageStore(client, database), settings, review=(rates, review))
    served: list[tuple[str, str, float, bool]] = []  # span, stratum, inclusion probability, hallucinated

    with serving(app) as base_url, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_path(), args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(f"{base_url}/review?app={APP}&token={TOKEN}")
            assert "too few verdicts" in page.inner_text("section.estimate p.rate")
            assert not page.locator("details.detectors table").is_visible()  # the evidence starts collapsed
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
            _screenshot(page, "review.png")
        finally:
            browser.close()

    stored = client.query(
        f"SELECT span_id, stratum, inclusion_probability, label, labeller, note, source FROM {database}.labels FINAL "
        "ORDER BY labelled_at"
    ).result_rows
    assert [(s, stratum, pytest.approx(p, abs=5e-4), h) for s, stratum, p, h in served] == [row[:4] for row in stored]
    assert {row[4:6] for row in stored[:1]} == {("reviewer", "checked against the brochure")}
    assert {row[6] for row in stored} == {"review"}
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


def rates_scope(review: ReviewSettings) -> Scope:
    now = datetime.now(UTC)
    return Scope(now - timedelta(days=review.window_days), now + timedelta(seconds=1), app=APP)


def _span(page: Page) -> str:
    return page.locator("section.review p.meta code").nth(1).inner_text()
