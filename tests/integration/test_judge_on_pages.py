"""The judge's answer on the pages, on real chDB (Flask test client).

The trace page shows why a call was escalated, the judge's claims (the ones that decide first)
and what the answer cost; a call over budget says it was not judged.  The blind review page hides
the escalation and the judge's answer with the rest of what was found, until the verdict is in.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from clickhouse_connect.driver.client import Client
from flask.testing import FlaskClient
from pydantic import SecretStr

from pipeline.config.review import ReviewSettings
from pipeline.config.settings import Settings
from pipeline.config.ui import UISettings
from pipeline.sinks.clickhouse import migrate
from pipeline.ui.queries import TriageStore
from pipeline.ui.review import ReviewQueue
from pipeline.ui.web import create_app
from tests.integration.escalated_calls import APP, Escalated, insert_escalated

pytestmark = pytest.mark.integration

TOKEN = "judge-pages-token-0123"
BEARER = {"Authorization": f"Bearer {TOKEN}"}
CLAIMS = (
    ("The museum opens at nine.", "supported", "the context gives nine"),
    ("The museum was founded in 1950.", "contradicted", "the context says 1921"),
)
JUDGED = Escalated(0, 0.42, "hallucinated", CLAIMS)
OVER_BUDGET = Escalated(1, 0.45, None, over_budget=True)


@pytest.fixture
def web(clickhouse: tuple[Client, str]) -> Iterator[FlaskClient]:
    client, name = clickhouse
    migrate(client, name)
    insert_escalated(client, name, [JUDGED, OVER_BUDGET])
    queue = ReviewQueue.configured(client, Settings(clickhouse_database=name, review=ReviewSettings()))  # blind
    settings = UISettings(token=SecretStr(TOKEN), token_user="reviewer")
    yield create_app(TriageStore(client, name), settings, review=queue).test_client()


def test_the_trace_page_shows_why_the_call_was_escalated_and_the_judges_claims_contradicted_first(
    web: FlaskClient,
) -> None:
    page = web.get(f"/trace/{JUDGED.trace_id}", headers=BEARER).get_data(as_text=True)
    assert "Escalated: p 0.41 within the band of route page." in page
    assert re.search(r'The judge says <strong class="judgment-hallucinated">hallucinated</strong>', page)
    assert "812 tokens, 2.5 s" in page
    assert page.index("founded in 1950") < page.index("opens at nine")  # what decides comes first
    skipped = web.get(f"/trace/{OVER_BUDGET.trace_id}", headers=BEARER).get_data(as_text=True)
    assert "Not judged: over the judge&#39;s token budget for today." in skipped
    assert "The judge says" not in skipped


def test_blind_review_hides_the_judge_until_the_verdict_and_shows_it_after(web: FlaskClient) -> None:
    shown_after = {JUDGED.span_id: "founded in 1950", OVER_BUDGET.span_id: "Not judged: over the judge&#39;s token"}
    for _ in range(len(shown_after)):  # each call the queue serves, in its order
        served = web.get(f"/review?app={APP}", headers=BEARER).get_data(as_text=True)
        span = re.search(r'id="call-([0-9a-f]{16})".*?trace <code>([0-9a-f]{32})</code>', served, re.S)
        assert span is not None and span[1] in shown_after
        for hidden in ("founded in 1950", "The judge says", "Escalated:", "Not judged", "over the judge"):
            assert hidden not in served, hidden
        form = {"app": APP, "trace_id": span[2], "span_id": span[1], "verdict": "hallucinated"}
        after = web.post("/review/verdict", data=form, headers=BEARER, follow_redirects=True).get_data(as_text=True)
        assert shown_after.pop(span[1]) in after
        if span[1] == JUDGED.span_id:
            assert "The judge says" in after and "812 tokens" in after
    assert not shown_after
