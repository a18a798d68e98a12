"""An application's map proposed where its verdicts are given: automatically, by the button, by the command.

On the demo's calls in embedded ClickHouse: with ``review.auto_apply_after`` set, the verdict
that brings the review window to that many verdicts (on calls with a probability) proposes a map
without a person, applied when it beats the current map out of sample, and later verdicts refit
it only once the window holds a quarter more than the newest proposal was fitted on.  The
Propose button stores a proposal without applying it while too few verdicts are in;
``halluwatch calibrate --app`` proposes the same way and ``--apply shipped`` reverts.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from clickhouse_connect.driver.client import Client
from flask.testing import FlaskClient
from pydantic import SecretStr

from pipeline.calibration.proposals import REFIT_GROWTH
from pipeline.cli import main
from pipeline.config.review import ReviewSettings
from pipeline.config.settings import Settings
from pipeline.config.ui import UISettings
from pipeline.rate.maps import MapStore
from pipeline.ui.queries import TriageStore
from pipeline.ui.review import ReviewQueue
from pipeline.ui.web import create_app

pytestmark = pytest.mark.integration

TOKEN = "proposals-test-token-0123"
BEARER = {"Authorization": f"Bearer {TOKEN}"}
APP = "default"
AUTO_AFTER = 3


def _judge_next(web: FlaskClient, verdict: Callable[[str, str], str]) -> tuple[str, list[str]] | None:
    """Draw the next call of the queue and judge it (``verdict`` of its trace and span); its span and the flashes.

    None when no call is left to judge.
    """
    page = web.get(f"/review?app={APP}", headers=BEARER).get_data(as_text=True)
    form = r'class="review-verdict".*?name="trace_id" value="([0-9a-f]+)".*?name="span_id" value="([0-9a-f]+)"'
    drawn = re.search(form, page, re.S)
    if drawn is None:
        return None
    trace_id, span_id = drawn.groups()
    form = {"app": APP, "trace_id": trace_id, "span_id": span_id, "verdict": verdict(trace_id, span_id)}
    answer = web.post("/review/verdict", data=form, headers=BEARER, follow_redirects=True)
    assert answer.status_code == 200
    return span_id, re.findall(r'class="flash"[^>]*>([^<]+)<', answer.get_data(as_text=True))


def _alternating() -> Callable[[str, str], str]:
    turns = itertools.count()
    return lambda trace_id, span_id: "hallucinated" if next(turns) % 2 else "faithful"


def _verdicts_with_probability(client: Client, database: str) -> int:
    rows = client.query(
        f"SELECT count() FROM {database}.labels AS l FINAL INNER JOIN "
        f"(SELECT trace_id, span_id FROM {database}.llm_calls FINAL WHERE p_hallucination IS NOT NULL) AS c "
        "USING (trace_id, span_id) WHERE l.inclusion_probability > 0"
    ).result_rows
    return int(rows[0][0])


def test_verdicts_propose_maps_without_a_person_and_apply_those_that_beat_the_current_one(demo_database):
    client, database = demo_database
    settings = Settings(clickhouse_database=database, review=ReviewSettings(blind=False, auto_apply_after=AUTO_AFTER))
    ui = UISettings(token=SecretStr(TOKEN), token_user="reviewer")
    web = create_app(TriageStore(client, database), ui, review=ReviewQueue.configured(client, settings)).test_client()
    maps = MapStore(client, database)

    # Verdicts that say the shipped p is upside down (low p hallucinated, high p faithful): a refit
    # beats it out of sample, so automatic maps are applied.
    probability = {(t, sp): p for t, sp, p in client.query(
        f"SELECT trace_id, span_id, p_hallucination FROM {database}.llm_calls FINAL").result_rows}  # fmt: skip

    def upside_down(trace_id: str, span_id: str) -> str:
        p = probability.get((trace_id, span_id))
        return "hallucinated" if p is not None and p < 0.5 else "faithful"

    proposed_at: list[int] = []  # the verdict counts each automatic proposal was fitted on
    applied: list[str] = []
    while (judged := _judge_next(web, upside_down)) is not None:
        _, flashes = judged
        counted = _verdicts_with_probability(client, database)
        due = counted >= AUTO_AFTER and (not proposed_at or counted >= math.ceil(proposed_at[-1] * REFIT_GROWTH))
        newest, now = maps.proposal(APP), maps.applied().get(APP)
        if not due:
            assert not any("without a person" in f for f in flashes), (counted, flashes)
            assert (newest.verdicts if newest else None) == (proposed_at[-1] if proposed_at else None)
            continue
        assert newest is not None and newest.verdicts == counted and newest.by == "auto", (counted, newest)
        proposed_at.append(counted)
        report = newest.report
        minimums_moved = [r["shipped_minimum"] for r in report["routes"]] != [
            r["shipped_minimum"] for r in report["routes_before"]
        ]
        if not report["keeps_map"] or minimums_moved:  # a better map out of sample, or minimums for calls to come
            assert now is not None and now.version == newest.version and now.by.startswith("auto: "), now
            assert any(f"Applied map {newest.version} for {APP} without a person" in f for f in flashes), flashes
            applied.append(newest.version)
        else:  # the current map stays, and the page says why
            assert (now.version if now else None) == (applied[-1] if applied else None)
            assert report["brier_after"] >= report["brier_before"]
            assert any(f"Proposed map {newest.version}" in f and "keeps the current map" in f for f in flashes), flashes
    assert proposed_at[0] == AUTO_AFTER and len(proposed_at) >= 2, proposed_at
    assert applied, "some automatic proposal beat the current map on the demo's verdicts"


def test_the_propose_button_and_the_command_propose_and_the_command_reverts(
    demo_database, chdb_path: Path, tmp_path: Path
):
    client, database = demo_database
    settings = Settings(clickhouse_database=database, review=ReviewSettings(blind=False))  # no automatic maps
    ui = UISettings(token=SecretStr(TOKEN), token_user="reviewer")
    web = create_app(TriageStore(client, database), ui, review=ReviewQueue.configured(client, settings)).test_client()
    maps = MapStore(client, database)

    refused = web.post("/review/propose", data={"app": APP}, headers=BEARER)
    assert refused.status_code == 409 and "no review verdicts" in refused.get_data(as_text=True)
    alternating = _alternating()
    for _ in range(4):
        assert _judge_next(web, alternating) is not None
    page = web.post("/review/propose", data={"app": APP}, headers=BEARER, follow_redirects=True).get_data(as_text=True)
    proposal = maps.proposal(APP)
    assert proposal is not None and proposal.by == "reviewer"
    assert f"Proposed map {proposal.version} for {APP} from {proposal.verdicts} verdicts" in page
    assert f'class="proposal-version">{proposal.version}<' in page and APP not in maps.applied()

    config = tmp_path / "halluwatch.yaml"
    config.write_text(yaml.safe_dump({"clickhouse_dsn": f"chdb://{chdb_path}", "clickhouse_database": database}))
    proposed = CliRunner().invoke(main, ["calibrate", "--config", str(config), "--app", APP])
    assert proposed.exit_code == 0, proposed.output
    assert f"{proposal.verdicts} review verdicts" in proposed.output and "ECE out of sample" in proposed.output
    version = re.search(r"--apply (\S+)", proposed.output).group(1)  # type: ignore[union-attr]
    applied = CliRunner().invoke(main, ["calibrate", "--config", str(config), "--app", APP, "--apply", version])
    assert applied.exit_code == 0 and f"applied {version} to {APP}" in applied.output, applied.output
    assert maps.applied()[APP].version == version
    reverted = CliRunner().invoke(main, ["calibrate", "--config", str(config), "--app", APP, "--apply", "shipped"])
    assert reverted.exit_code == 0, reverted.output
    assert APP not in maps.applied()
