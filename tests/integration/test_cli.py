"""The `halluwatch` command line as a user runs it (subprocesses, real broker and chDB)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.ingest.otlp_traces import decode_traces
from pipeline.tools.demo_broker import TansuBroker
from pipeline.tools.example_traces import example_traces
from pipeline.tools.replay import write_json_lines, write_proto
from tests.integration.support import consume_all

# Worker and demo processes load the embedding model from the session's export cache.
pytestmark = pytest.mark.usefixtures("exported_model")


def halluwatch(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pipeline.cli", *args],
        capture_output=True, text=True, timeout=120, env={**os.environ, **env},
    )  # fmt: skip


def test_help_explains_every_command():
    out = halluwatch("--help").stdout
    for command in ("worker", "migrate", "replay", "demo"):
        assert command in out


def test_migrate_is_idempotent_from_the_command_line(tmp_path: Path):
    env = {"HALLUWATCH_DATA_DIR": str(tmp_path)}
    first = halluwatch("migrate", **env)
    assert first.returncode == 0, first.stderr
    assert "applied 001_llm_calls, 002_findings, 003_llm_calls_logprobs" in first.stdout
    second = halluwatch("migrate", **env)
    assert second.returncode == 0 and "is up to date" in second.stdout


def test_bad_configuration_is_reported_with_the_field(tmp_path: Path):
    config = tmp_path / "c.yaml"
    config.write_text("batch_max_messages: -3\n")
    result = halluwatch("migrate", "--config", str(config))
    assert result.returncode != 0
    assert "batch_max_messages" in result.stderr and "Traceback" not in result.stderr


def test_replay_produces_both_file_exporter_formats(tansu: TansuBroker, topic_prefix: str, tmp_path: Path):
    traces = example_traces()
    write_json_lines(tmp_path / "traces.jsonl", traces)
    write_proto(tmp_path / "traces.pb", traces)
    topic = f"{topic_prefix}-spans"
    env = {"HALLUWATCH_KAFKA_BOOTSTRAP": tansu.bootstrap}
    for path, extra in ((tmp_path / "traces.jsonl", []), (tmp_path / "traces.pb", ["--encoding", "otlp_json"])):
        result = halluwatch("replay", str(path), "--topic", topic, *extra, **env)
        assert result.returncode == 0, result.stderr
        assert f"produced {len(traces)} messages" in result.stdout
    messages = consume_all(tansu.bootstrap, topic, expected=2 * len(traces))
    assert len(messages) == 2 * len(traces)
    assert all(decode_traces(m.value()).resource_spans for m in messages)
    unkeyed = halluwatch("replay", str(tmp_path / "traces.pb"), "--topic", f"{topic}-u", "--unkeyed", **env)
    assert unkeyed.returncode == 0, unkeyed.stderr


def test_baseline_command_feeds_the_confidence_detector(tmp_path: Path):
    from detectors.thresholds import load_thresholds
    from pipeline.config.settings import load_settings
    from pipeline.ingest.normalize import normalize_span
    from pipeline.ingest.otlp_traces import iter_spans
    from pipeline.spans.suite import suite_from_settings

    traces = example_traces()
    write_json_lines(tmp_path / "good.jsonl", traces)
    out = tmp_path / "baselines.yaml"
    result = halluwatch(
        "baseline", "--input", str(tmp_path / "good.jsonl"), "--output", str(out), "--min-responses", "2"
    )
    assert result.returncode == 0, result.stderr
    assert f"HALLUWATCH_BASELINES_FILE={out}" in result.stdout
    refused = halluwatch("baseline", "--input", str(tmp_path / "good.jsonl"), "--output", str(tmp_path / "x.yaml"))
    assert refused.returncode != 0 and "need 30" in refused.stderr

    calls = [c for t in traces for s in iter_spans(t) if (c := normalize_span(s)) is not None and c.logprobs]
    suite = suite_from_settings(load_settings(baselines_file=out), load_thresholds())
    runs = {run.detector: run.results for run in suite.run(calls)}
    assert {str(r.status) for r in runs["confidence"]} == {"ok"}
    without = {run.detector: run.results for run in suite_from_settings(load_settings(), load_thresholds()).run(calls)}
    assert {str(r.status) for r in without["confidence"]} == {"skipped"}
