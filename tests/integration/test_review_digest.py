"""The Slack digest "5 calls to review": posted by the command, judged through the pages' Slack endpoint.

The command draws the review queue's next five calls of the demo's default application and
posts them to a local Slack Web API with a row of verdict buttons each; a signed click on one
row stores the verdict with the inclusion probability it was drawn with, replaces only that
row in the message, counts in the application's estimate, and (``review.auto_apply_after``)
may refit the application's map as a verdict on the review page does.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlencode

import pytest
import requests
import yaml
from click.testing import CliRunner
from pydantic import SecretStr

from pipeline.alerting.render import CONFIRM_ACTION, VERDICT_BLOCK_ID
from pipeline.cli import main
from pipeline.config.review import ReviewSettings
from pipeline.config.settings import Settings
from pipeline.config.ui import UISettings
from pipeline.rate.maps import MapStore
from pipeline.rate.report import rate_report
from pipeline.rate.sampler import Strata
from pipeline.rate.store import RateStore, Scope
from pipeline.ui.queries import TriageStore
from pipeline.ui.review import ReviewQueue
from pipeline.ui.web import create_app
from tests.integration.test_triage_browser import SLACK_SECRET, _signed, serving
from tests.servers import SLACK_POST_PATH, AlertingServer

pytestmark = pytest.mark.integration


def test_the_digest_posts_five_drawn_calls_and_a_click_joins_the_audit_sample(
    demo_database, chdb_path: Path, tmp_path: Path
):
    client, database = demo_database
    with AlertingServer() as slack:
        config = tmp_path / "halluwatch.yaml"
        config.write_text(yaml.safe_dump({
            "clickhouse_dsn": f"chdb://{chdb_path}", "clickhouse_database": database,
            "alerting": {"slack_bot_token": "xoxb-digest-test", "slack_base_url": slack.slack_base_url,
                         "ui_base_url": "https://halluwatch.example"},
        }))  # fmt: skip
        posted = CliRunner().invoke(
            main, ["review-digest", "--config", str(config), "--app", "default", "--channel", "#review"]
        )
        assert posted.exit_code == 0, posted.output
        assert "posted 5 calls to review for default to #review" in posted.output
        (request,) = slack.requests(SLACK_POST_PATH)
        message = request.body
        assert message["channel"] == "#review" and message["text"] == "5 calls to review for default"
        blocks = json.loads(message["blocks"]) if isinstance(message["blocks"], str) else message["blocks"]
        rows = [b for b in blocks if b["type"] == "actions"]
        assert [b["block_id"] for b in rows] == [f"{VERDICT_BLOCK_ID}:{n}" for n in range(1, 6)]
        drawn = [json.loads(row["elements"][0]["value"]) for row in rows]
        assert len({(d["trace_id"], d["span_id"]) for d in drawn}) == 5
        # Judged as on the review page: no stratum shown (it tells the probability), no "false alarm" to click.
        assert "stratum" not in json.dumps([b.get("text") for b in blocks])
        assert [[e["text"]["text"] for e in row["elements"]] for row in rows] == [["Hallucinated", "Faithful"]] * 5
        # The queue's shares: the alerted calls and the calls nobody flagged both come up.
        strata = [d["stratum"] for d in drawn]
        assert "alerted" in strata and "p 0.00-0.10" in strata
        rates = RateStore(client, database, Strata.configured(ReviewSettings()))
        now = datetime.now(UTC)
        scope = Scope(now - timedelta(days=7), now + timedelta(seconds=1), app="default")
        population, _, _ = rates.queue_state(scope, "")
        for stratum in set(strata):
            probabilities = [d["inclusion_probability"] for d in drawn if d["stratum"] == stratum]
            expected = [k / population[stratum] for k in range(1, len(probabilities) + 1)]
            assert probabilities == pytest.approx(expected, abs=1e-6)

        second = drawn[1]
        assert second["stratum"] != "no probability"  # a call with p, so one verdict can refit the map
        settings = UISettings(token=SecretStr("digest-test-token-0123"), slack_signing_secret=SecretStr(SLACK_SECRET))
        # One verdict is enough for an automatic map: the click proposes one, after answering Slack.
        queue = ReviewQueue.configured(client, Settings(clickhouse_database=database,
                                                        review=ReviewSettings(auto_apply_after=1)))  # fmt: skip
        app = create_app(TriageStore(client, database), settings, review=queue)
        click = {
            "type": "block_actions", "user": {"id": "U7", "username": "dana"},
            "response_url": slack.url + "/actions/T1/9/9", "message": {"text": message["text"], "blocks": blocks},
            "actions": [{"action_id": CONFIRM_ACTION, "block_id": rows[1]["block_id"],
                         "value": rows[1]["elements"][0]["value"]}],
        }  # fmt: skip
        body = urlencode({"payload": json.dumps(click)}).encode()
        with serving(app) as base_url:
            answer = requests.post(f"{base_url}/slack/interactions", data=body, headers=_signed(body), timeout=10)
        assert answer.status_code == 200
        (update,) = slack.wait_for(1, path_prefix="/actions/")
    stored = client.query(
        f"SELECT span_id, label, labeller, source, stratum, inclusion_probability FROM {database}.labels FINAL"
    ).result_rows
    assert stored == [(second["span_id"], True, "dana", "slack", second["stratum"], second["inclusion_probability"])]
    replaced = update.body["blocks"]
    assert "✅ Hallucinated by @dana" in json.dumps(replaced, ensure_ascii=False)
    assert [b.get("block_id") for b in replaced if b["type"] == "actions"] == [
        f"{VERDICT_BLOCK_ID}:{n}" for n in (1, 3, 4, 5)
    ]
    assert rate_report(rates, scope).verdicts == 1
    maps = MapStore(client, database)
    deadline = time.monotonic() + 30
    while (proposal := maps.proposal("default")) is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert proposal is not None and proposal.by == "auto" and proposal.verdicts == 1
