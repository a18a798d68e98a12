"""What decides a call, on the page before any verdict: on the trace page and on the blind review page.

Over the demo's calls in embedded ClickHouse, through Flask's test client, with the demo's
detector settings: the end user a tool call acts for (the role the permissions registry
checks), the output schema an extraction must meet, the tools the model was offered when it
names another, the sources an app pasted into the question, numbered.  Blind review shows these
facts about the call and nothing of what the detectors concluded.
"""

from __future__ import annotations

import re
from html import unescape
from pathlib import Path

import pytest
from clickhouse_connect.driver.client import Client
from flask import Flask
from flask.testing import FlaskClient
from pydantic import SecretStr

from pipeline.config.review import ReviewSettings
from pipeline.config.ui import UISettings
from pipeline.tools.demo import demo_settings
from pipeline.ui.call_terms import Contracts
from pipeline.ui.queries import TriageStore
from pipeline.ui.review import ReviewQueue
from pipeline.ui.web import create_app

pytestmark = pytest.mark.integration

TOKEN = "terms-test-token-0123456"
BEARER = {"Authorization": f"Bearer {TOKEN}"}


def _web(database: tuple[Client, str], data_dir: Path) -> Flask:
    client, name = database
    settings = demo_settings(data_dir, "127.0.0.1:9")
    settings = settings.model_copy(update={"clickhouse_database": name, "review": ReviewSettings(blind=True)})
    ui = UISettings(token=SecretStr(TOKEN), token_user="reviewer")
    review = ReviewQueue.configured(client, settings)
    return create_app(TriageStore(client, name), ui, review=review, contracts=Contracts.configured(settings.detectors))


def _call(database: tuple[Client, str], service: str, asked: str) -> tuple[str, str]:
    """(trace, span) of the one call of ``service`` whose question holds ``asked``."""
    client, name = database
    (found,) = client.query(
        f"SELECT trace_id, span_id FROM {name}.llm_calls FINAL "
        "WHERE service = {s:String} AND position(prompt, {q:String}) > 0",
        parameters={"s": service, "q": asked},
    ).result_rows
    return found[0], found[1]


def _text(html: str) -> str:
    """The page as words: tags dropped, entities read, runs of white space one space, none before a comma."""
    return re.sub(r" ([.,;])", r"\1", " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split()))


def _trace_page(web: FlaskClient, trace: str) -> str:
    response = web.get(f"/trace/{trace}", headers=BEARER)
    assert response.status_code == 200
    return response.get_data(as_text=True)


def _drawn_until(web: FlaskClient, app: str, span: str) -> str:
    """The drawn call's section of ``app``'s review page once it draws ``span``, skipping the calls drawn before."""
    for _ in range(50):
        page = web.get(f"/review?app={app}", headers=BEARER).get_data(as_text=True)
        drawn = re.search(r'name="trace_id" value="([0-9a-f]+)".*?name="span_id" value="([0-9a-f]+)"', page, re.S)
        assert drawn is not None, f"{span} never drawn in {app}"
        if drawn[2] == span:
            # The call, not the rate and calibration panels below it.
            return page[page.index('<section class="call review"') : page.index('<section class="estimate"')]
        skip = {"app": app, "trace_id": drawn[1], "span_id": drawn[2]}
        assert web.post("/review/skip", data=skip, headers=BEARER).status_code == 303
    raise AssertionError(f"{span} not drawn in 50 draws")


def test_the_trace_page_shows_the_end_user_the_schema_the_tools_offered_and_the_sources_in_the_question(
    demo_database, tmp_path
):
    web = _web(demo_database, tmp_path).test_client()

    not_permitted, _ = _call(demo_database, "shop-assistant", "Cancel order A-18")
    page = _trace_page(web, not_permitted)
    words = _text(page)
    assert "The call acts for enduser.id u-2230 · enduser.role viewer." in words
    # Given with the question, above the alerts and the detectors that say what it means.
    assert page.index('class="identity"') < page.index('id="alerts"') < page.index('class="findings"')

    extraction, _ = _call(demo_database, "order-intake", "toner cartridges")
    words = _text(_trace_page(web, extraction))
    assert (
        "Output schema the answer must meet operation extract_order · required: sku, quantity, currency, ship_to"
        in (words)
    )
    assert '"ship_to": { "type": "string" }' in words  # the whole schema, one click away

    unknown_tool, _ = _call(demo_database, "docs-assistant", "webhook retries")
    words = _text(_trace_page(web, unknown_tool))
    assert (
        "not defined: the model was offered no tool named search_documents; it was offered search_docs, create_ticket"
        in words
    )

    pasted, _ = _call(demo_database, "support-bot", "Context:")
    page = _trace_page(web, pasted)
    words = _text(page)
    assert "No sources" not in words
    assert "[1] in the question Customers can return unused items within 30 days of delivery" in words
    assert "Context: [1] (source 1, below) Question: Can I still return the headphones" in words
    assert page.count('<li value="1">') == 1


def test_the_blind_review_page_shows_what_decides_the_call_and_nothing_the_detectors_concluded(demo_database, tmp_path):
    web = _web(demo_database, tmp_path).test_client()

    _, span = _call(demo_database, "shop-assistant", "Cancel order A-18")
    page = _drawn_until(web, "default", span)
    words = _text(page)
    assert "Blind review" in words
    assert "The call acts for enduser.id u-2230 · enduser.role viewer." in words
    assert "it was offered" not in words  # it called the tool it was offered: no list in the way
    for concluded in ("tool_facts", "may not call", "p_hallucination", "flagged", 'class="flag"'):
        assert concluded not in page, concluded

    _, span = _call(demo_database, "order-intake", "toner cartridges")
    page = _drawn_until(web, "order-extraction", span)
    words = _text(page)
    assert "operation extract_order · required: sku, quantity, currency, ship_to" in words
    for concluded in ("schema_violation", "missing required", "p_hallucination", "flagged"):
        assert concluded not in page, concluded
