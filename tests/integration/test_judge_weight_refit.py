"""The judge's weight refitted where an application's map is proposed, on real chDB.

Blind review verdicts on calls the judge answered move its weight: verdicts that agree with it
raise its weight above the shipped prior, verdicts that agree no more than chance leave it no
weight once there are ten of each label, no judged verdicts leave the prior; the applied map
carries what was proposed, and the command says it in one line.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from clickhouse_connect.driver.client import Client

from pipeline.calibration.proposals import AppCalibration
from pipeline.cli import main
from pipeline.config.settings import Settings
from pipeline.judge.weight import PRIOR_VERDICTS, SHIPPED_PRIOR
from pipeline.rate.maps import JUDGE_REPORT_KEY
from pipeline.sinks.clickhouse import migrate
from tests.integration.escalated_calls import APP, Escalated, insert_escalated, insert_verdicts

pytestmark = pytest.mark.integration


@pytest.fixture
def database(clickhouse: tuple[Client, str]) -> Iterator[tuple[Client, str]]:
    client, name = clickhouse
    migrate(client, name)
    yield client, name


def _judged(client: Client, database: str, answers: list[tuple[str, bool]]) -> None:
    """One escalated call per (judgment, verdict), its p spread over the band."""
    calls = [Escalated(i, 0.3 + 0.2 * i / len(answers), judgment) for i, (judgment, _) in enumerate(answers)]
    insert_escalated(client, database, calls)
    insert_verdicts(client, database, [(c, hallucinated) for c, (_, hallucinated) in zip(calls, answers, strict=True)])


def _calibration(client: Client, database: str) -> AppCalibration:
    return AppCalibration.configured(client, Settings(clickhouse_database=database))


def test_verdicts_that_agree_with_the_judge_raise_its_weight_and_the_applied_map_carries_it(
    database: tuple[Client, str],
) -> None:
    client, name = database
    agreeing = [("hallucinated", True)] * 12 + [("faithful", False)] * 12 + [("unknown", True)] * 3
    _judged(client, name, agreeing)
    calibration = _calibration(client, name)
    proposal = calibration.propose(APP, datetime.now(UTC), "reviewer").proposal
    judge = proposal.judge
    assert judge.verdicts == 24  # the unknown answers say nothing about the judge
    assert judge.sensitivity > SHIPPED_PRIOR.sensitivity and judge.specificity > SHIPPED_PRIOR.specificity
    stored = calibration.maps.proposal(APP, proposal.version)
    assert (
        stored is not None and stored.report[JUDGE_REPORT_KEY]["note"] == "24 verdicts, shrunk toward the shipped prior"
    )
    applied = calibration.maps.apply(APP, proposal.version, datetime.now(UTC), "reviewer")
    read_back = calibration.maps.applied()[APP].judge
    assert read_back == applied.judge
    assert read_back.sensitivity == pytest.approx(judge.sensitivity, abs=1e-4) and read_back.verdicts == 24


def test_a_judge_the_verdicts_find_no_better_than_chance_gets_no_weight(database: tuple[Client, str]) -> None:
    client, name = database
    each = PRIOR_VERDICTS  # verdicts of each label the chance test waits for
    chance = [("hallucinated", True), ("faithful", True)] * (each // 2) + [
        ("hallucinated", False),
        ("faithful", False),
    ] * (each // 2)
    _judged(client, name, chance)
    judge = _calibration(client, name).propose(APP, datetime.now(UTC), "reviewer").proposal.judge
    assert not judge.weighs and judge.verdicts == 2 * each
    assert judge.note.startswith("no better than chance")


def test_no_judged_verdicts_leave_the_prior_and_the_command_says_so(
    database: tuple[Client, str], chdb_path: Path, tmp_path: Path
) -> None:
    client, name = database
    unjudged = [Escalated(i, 0.2 + 0.05 * i, judgment=None) for i in range(6)]
    insert_escalated(client, name, unjudged)
    insert_verdicts(client, name, [(c, c.index % 2 == 0) for c in unjudged])
    config = tmp_path / "halluwatch.yaml"
    base = {"clickhouse_dsn": f"chdb://{chdb_path}", "clickhouse_database": name}
    # With escalation on, the judge's weight is part of what the proposal says; with it off, it is not shown.
    config.write_text(yaml.safe_dump({**base, "escalation": {"enabled": True}}))
    result = CliRunner().invoke(main, ["calibrate", "--config", str(config), "--app", APP])
    assert result.exit_code == 0, result.output
    assert "the judge's answers: sensitivity 0.65, specificity 0.65" in result.output
    assert "the shipped prior" in result.output
    config.write_text(yaml.safe_dump(base))
    quiet = CliRunner().invoke(main, ["calibrate", "--config", str(config), "--app", APP])
    assert quiet.exit_code == 0, quiet.output
    assert "the judge's answers" not in quiet.output
    stored = _calibration(client, name).maps.proposal(APP)
    assert stored is not None and stored.judge == SHIPPED_PRIOR
