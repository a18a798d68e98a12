"""Calls the detectors could not check are unverified, with the reason, in `halluwatch rate`, never faithful.

Four calls go through the worker's real processor and detectors and into chDB: a French answer
(the default embedding model covers English only), a source longer than grounding's
``max_source_chars``, a factual question answered without sources, and one plain English call
that the detectors could check.  The command's output names each reason and counts only the
checked call in the rate.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from detectors.llm_call import Source
from pipeline.cli import main
from pipeline.tools.demo import demo_settings
from tests.calls import make_llm_call
from tests.integration.demo_data import process_and_store

pytestmark = pytest.mark.integration

HANDBOOK = (
    "Employees accrue 25 paid vacation days per year. Up to 5 unused days carry over to the next year. "
    "Unused days beyond that are forfeited on 31 March."
)


def _call(answer: str, prompt: str, sources: list[Source]):
    now = time.time_ns()
    ids = {"trace_id": uuid.uuid4().hex, "span_id": uuid.uuid4().hex[:16]}
    return make_llm_call(
        answer, prompt, sources, service="hr-assistant", start_time_unix_nano=now, end_time_unix_nano=now + 1, **ids
    )


def test_a_french_answer_a_long_source_and_a_factual_prompt_without_sources_are_unverified_with_reasons(
    clickhouse, chdb_path: Path, exported_model, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    client, database = clickhouse
    monkeypatch.setenv("HALLUWATCH_DETECTORS__GROUNDING__MAX_SOURCE_CHARS", "2000")
    settings = demo_settings(tmp_path, "127.0.0.1:9")
    assert settings.detectors.grounding.max_source_chars == 2000
    question = "How many paid vacation days do employees get per year?"
    calls = [
        _call("Les employés ont droit à vingt-cinq jours de congés payés par an, dont cinq reportables.",
              question, [Source("handbook", HANDBOOK)]),
        _call("Employees get 25 paid vacation days per year.", question,
              [Source("handbook", HANDBOOK + " Other policies follow. " * 150)]),
        _call("The Eiffel Tower was completed in 1889 for the World's Fair in Paris.",
              "In what year was the Eiffel Tower completed?", []),
        _call("Employees get 25 paid vacation days per year, and up to 5 unused days carry over.", question,
              [Source("handbook", HANDBOOK)]),
    ]  # fmt: skip
    process_and_store(client, database, settings, lambda processor: processor.detect_joined(calls))

    config = tmp_path / "halluwatch.yaml"
    config.write_text(yaml.safe_dump({"clickhouse_dsn": f"chdb://{chdb_path}", "clickhouse_database": database}))
    result = CliRunner().invoke(main, ["rate", "--config", str(config), "--service", "hr-assistant"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("service hr-assistant, ") and lines[0].endswith(": 4 calls")
    unverified = next(line for line in lines if "unverified" in line)
    assert "3 (75.0 %)" in unverified
    for reason in (
        "answer in language fr, which the embedding model does not cover: 1",
        "a source cut at max_source_chars (2000): 1",
        "no sources for a factual prompt: 1",
    ):
        assert reason in unverified, unverified
    # Only the call the detectors could check is in the rate's population.
    assert "of 1 call)" in next(line for line in lines if "model-based rate" in line)
