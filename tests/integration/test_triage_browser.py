"""An on-call engineer's minute in a real browser: headless Chromium (Debian's), driven by Playwright.

The pages run on a real HTTP server over the demo's data in embedded ClickHouse.  The
browser signs in with the token link, opens the trace that alerted from the list, sees
the flagged words highlighted, and marks a false alarm; the test reads the label back
from ClickHouse.  Slack's button clicks reach the same server: a signed one is stored,
a tampered one refused.  With TRIAGE_SCREENSHOTS_DIR set, the list and trace pages
are saved there (the README's screenshots come from this test).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlencode

import pytest
import requests
from flask import Flask
from playwright.sync_api import Page, sync_playwright
from pydantic import SecretStr
from werkzeug.serving import make_server

from pipeline.alerting.render import FALSE_ALARM_ACTION, VERDICT_BLOCK_ID
from pipeline.config.ui import UISettings
from pipeline.ui.queries import ListFilters, TriageStore
from pipeline.ui.web import create_app
from tests.chromium import chromium_path
from tests.servers import ScriptedServer

pytestmark = pytest.mark.integration

TOKEN = "browser-test-token-0123"
SLACK_SECRET = "slack-signing-secret-for-tests"


@contextmanager
def serving(app: Flask) -> Iterator[str]:
    """``app`` on a threaded HTTP server on a free loopback port; yields its base URL."""
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        thread.join()


def _screenshot(page: Page, name: str) -> None:
    folder = os.environ.get("TRIAGE_SCREENSHOTS_DIR")
    if folder:
        page.screenshot(path=str(Path(folder) / name), full_page=True)


# Hints and notes that stick out of the box they are in, or of their own (their first words, to name them).
_OVERFLOWING = """() => [...document.querySelectorAll('.hint, .note')].filter(e => {
  const box = e.getBoundingClientRect(), parent = e.parentElement.getBoundingClientRect();
  return box.right > parent.right + 1 || box.left < parent.left - 1 || e.scrollWidth > e.clientWidth + 1;
}).map(e => e.textContent.trim().slice(0, 60))"""


def overflowing(page: Page) -> list[str]:
    """The hints and notes of the page that overflow their boxes."""
    return list(page.evaluate(_OVERFLOWING))


def _slack_click(response_url: str, trace_id: str, span_id: str) -> bytes:
    value = json.dumps({"trace_id": trace_id, "span_id": span_id, "detector": "contradiction"})
    payload = {
        "type": "block_actions",
        "user": {"id": "U042", "username": "carol"},
        "response_url": response_url,
        "message": {"blocks": [{"type": "actions", "block_id": VERDICT_BLOCK_ID, "elements": []}]},
        "actions": [{"action_id": FALSE_ALARM_ACTION, "block_id": VERDICT_BLOCK_ID, "value": value}],
    }
    return urlencode({"payload": json.dumps(payload)}).encode()


def _signed(body: bytes) -> dict[str, str]:
    timestamp = str(int(time.time()))
    digest = hmac.new(SLACK_SECRET.encode(), f"v0:{timestamp}:".encode() + body, hashlib.sha256).hexdigest()
    return {"X-Slack-Request-Timestamp": timestamp, "X-Slack-Signature": f"v0={digest}"}


def test_on_call_opens_the_alerted_trace_sees_the_flagged_words_and_marks_a_false_alarm(demo_database):
    client, database = demo_database
    store = TriageStore(client, database)
    (alerted,) = store.flagged_calls(ListFilters(service="travel-guide", alerted_only=True), 10)
    alerted_calls = store.flagged_calls(ListFilters(alerted_only=True), 100)
    settings = UISettings(token=SecretStr(TOKEN), token_user="oncall", slack_signing_secret=SecretStr(SLACK_SECRET))

    def labels() -> list[tuple]:
        return client.query(
            f"SELECT span_id, label, detector, labeller, note, source FROM {database}.labels FINAL ORDER BY labelled_at"
        ).result_rows

    with serving(create_app(store, settings)) as base_url, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_path(), args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(f"{base_url}/?alerted=1&token={TOKEN}")
            assert "token=" not in page.url  # signed in; the token left the address bar
            rows = page.locator("table.list tbody tr")
            assert rows.count() == len(alerted_calls)
            _screenshot(page, "triage-list.png")
            page.get_by_label("trace id (or its first 8+ characters)").fill(alerted.trace_id[:8])
            page.keyboard.press("Enter")
            page.wait_for_url(f"**trace={alerted.trace_id[:8]}*")
            assert rows.count() == 1 and alerted.trace_id[:12] in rows.first.inner_text()

            page.locator(f'a[href^="/trace/{alerted.trace_id}"]').click()
            page.wait_for_url(f"**/trace/{alerted.trace_id}*")
            answer_marks = page.locator(".answer mark.flag")
            assert "1950" in answer_marks.all_inner_texts()
            highlight = answer_marks.first.evaluate("mark => getComputedStyle(mark).backgroundColor")
            assert highlight not in ("rgba(0, 0, 0, 0)", "transparent")  # visibly highlighted
            assert "1887" in page.locator("table.marks").inner_text()  # the source text beside it
            _screenshot(page, "triage-trace.png")
            # The answer with its marks on the first screen, before what the model was given and the detectors;
            # on every flagged call's page what the model did (its answer, or its tool calls) starts there too.
            assert page.locator(".answer").first.bounding_box()["y"] < 900
            for flagged in store.flagged_calls(ListFilters(), 100):
                page.goto(f"{base_url}/trace/{flagged.trace_id}")
                assert page.locator(".model-did").first.bounding_box()["y"] < 900, flagged.service
                # The decision on the whole call is on the first screen too, whole.
                whole = page.locator("div.whole-call").first.bounding_box()
                assert whole is not None and whole["y"] + whole["height"] <= 900, flagged.service
                assert overflowing(page) == [], flagged.service
                # A source's id is shown when it says more than its number ("[1] 1" does not).
                for label in page.locator("ol.sources span.source-id").all_inner_texts():
                    assert re.fullmatch(r"\[\d+\]( · id \S+)?( in the question)?", label.strip()), label
            page.goto(f"{base_url}/trace/{alerted.trace_id}")
            # Top-down: the probability and why, the answer, the alert, then the detectors; raw evidence a key away.
            heights = [page.locator(selector).first.bounding_box()["y"]
                       for selector in ("p.why", ".answer", "table.alerts", "table.findings")]  # fmt: skip
            assert heights == sorted(heights)
            assert "logged" in page.locator("table.alerts").inner_text()
            assert page.locator("ol.sources li").count() == 2  # the two passages, numbered, the prompt not among them
            claims = page.locator("table.evidence-table", has=page.locator("caption", has_text="claims"))
            assert "1887 and 1889" in claims.inner_text()
            raw = page.locator("tr.evidence", has=claims).locator("details.raw")
            assert not raw.locator("pre").is_visible()
            raw.locator("summary").focus()
            page.keyboard.press("Enter")
            assert '"context_start"' in raw.locator("pre").inner_text()

            contradiction = page.locator("table.findings tr.flagged", has_text="contradiction")
            contradiction.locator("input[name=note]").fill("the brochure says 1889")
            contradiction.locator("button.false-alarm").click()
            page.wait_for_selector(".flash")
            assert "Recorded: false alarm" in page.inner_text(".flash")
            # Back at its call, below the page's top: what was recorded is still in view.
            recorded = page.locator(".flash").bounding_box()
            assert recorded is not None and 0 <= recorded["y"] < 900, recorded
            assert "the brochure says 1889" in page.locator("section.labels").inner_text()
            # The verdict stands on the row it was given on, in place of the buttons, and can be undone.
            judged = page.locator("table.findings tr.flagged", has_text="contradiction")
            assert "False alarm by oncall" in judged.inner_text()
            assert judged.locator("button.false-alarm").count() == 0
            judged.get_by_role("button", name="Undo your verdict (false alarm on contradiction)").click()
            page.wait_for_selector(".flash")
            assert "Withdrawn: your false alarm" in page.inner_text(".flash")
            assert contradiction.locator("button.false-alarm").count() == 1
            contradiction.locator("input[name=note]").fill("the brochure says 1889")
            contradiction.locator("button.false-alarm").click()
            page.wait_for_selector(".flash")
        finally:
            browser.close()
        assert labels() == [(alerted.span_id, False, "contradiction", "oncall", "the brochure says 1889", "ui")]

        with ScriptedServer() as slack:
            body = _slack_click(slack.url + "/actions/T1/2/3", alerted.trace_id, alerted.span_id)
            tampered = body.replace(b"false_alarm", b"confirm")
            refused = requests.post(f"{base_url}/slack/interactions", data=tampered, headers=_signed(body), timeout=10)
            assert refused.status_code == 401 and len(labels()) == 1
            accepted = requests.post(f"{base_url}/slack/interactions", data=body, headers=_signed(body), timeout=10)
            assert accepted.status_code == 200
        assert labels()[1] == (alerted.span_id, False, "contradiction", "carol", "", "slack")
