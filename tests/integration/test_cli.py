"""The `halluwatch` command line as a user runs it (subprocesses, real broker and chDB)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from pipeline.broker import TansuBroker
from pipeline.examples import example_traces
from pipeline.otlp import decode_traces
from pipeline.replay import write_json_lines, write_proto
from tests.integration.support import consume_all


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
