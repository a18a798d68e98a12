"""The `halluwatch` command line as a user runs it (subprocesses, real broker and chDB)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

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
    assert "retention content 30 days, rows 180 days" in first.stdout
    second = halluwatch("migrate", **env)
    assert second.returncode == 0 and "is up to date" in second.stdout
    changed = halluwatch("migrate", **env, HALLUWATCH_RETENTION__CONTENT_DAYS="7")
    assert "applied retention content 7 days, rows 180 days (was content 30 days, rows 180 days)" in changed.stdout


def test_erase_that_matches_nothing_fails_and_keys_that_are_not_erasable_are_refused(tmp_path: Path):
    env = {"HALLUWATCH_DATA_DIR": str(tmp_path)}
    assert halluwatch("migrate", **env).returncode == 0  # erase only reads a store that is there
    erased = halluwatch("erase", "--key", "user.id=u-1", "--by", "dpo", **env)
    assert erased.returncode == 1
    assert erased.stdout == ""  # said once, on stderr
    assert erased.stderr.startswith("Error: user.id=u-1 matched 0 stored traces: nothing removed (audit row ")
    refused = halluwatch("erase", "--key", "service.name=shop", **env)
    assert refused.returncode == 1
    assert refused.stderr.strip() == (
        "Error: service.name is not erasable; erasable: trace_id, user.id, session.id, enduser.id"
        " (settings retention.erasable_keys)"
    )
    both = halluwatch("erase", "--trace", "t", "--key", "user.id=u", **env)
    assert both.returncode == 2 and "exactly one of --trace ID and --key KEY=VALUE" in both.stderr


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


def test_replay_says_what_it_produced_once(tansu: TansuBroker, topic_prefix: str, tmp_path: Path):
    traces = example_traces()
    write_proto(tmp_path / "traces.pb", traces)
    env = {"HALLUWATCH_KAFKA_BOOTSTRAP": tansu.bootstrap, "HALLUWATCH_LOG_LEVEL": "info"}
    result = halluwatch("replay", str(tmp_path / "traces.pb"), "--topic", f"{topic_prefix}-spans", **env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"produced {len(traces)} messages") and result.stdout.count("\n") == 1
    assert "replayed" not in result.stderr  # not the same numbers again in an INFO line
    assert "warning" not in result.stderr  # the examples are stamped now


def test_replay_warns_when_spans_are_older_than_retention(tansu: TansuBroker, topic_prefix: str, tmp_path: Path):
    traces = example_traces()
    for span in (span for t in traces for r in t.resource_spans for s in r.scope_spans for span in s.spans):
        span.start_time_unix_nano, span.end_time_unix_nano = 1_577_836_800 * 10**9, 1_577_836_801 * 10**9  # 2020
    write_proto(tmp_path / "traces.pb", traces)
    env = {"HALLUWATCH_KAFKA_BOOTSTRAP": tansu.bootstrap, "HALLUWATCH_RETENTION__DAYS": "365"}
    result = halluwatch("replay", str(tmp_path / "traces.pb"), "--topic", f"{topic_prefix}-spans", **env)
    assert result.returncode == 0, result.stderr
    assert "warning: spans from 2020-01-01 are older than retention.days (365 days" in result.stderr


def test_replay_of_a_file_that_is_not_otlp_is_one_line_and_produces_nothing(
    tansu: TansuBroker, topic_prefix: str, tmp_path: Path
):
    path = tmp_path / "notes.txt"
    path.write_text("not an OTLP file\n")
    topic = f"{topic_prefix}-spans"
    result = halluwatch("replay", str(path), "--topic", topic, HALLUWATCH_KAFKA_BOOTSTRAP=tansu.bootstrap)
    assert (result.returncode, result.stdout) == (1, "")  # no "produced ..." claimed
    assert result.stderr.splitlines() == [
        f"Error: {path}: not an OTLP file (the collector file exporter's JSON lines or length-prefixed protobuf): "
        "offset 0: truncated message (13 of 1852797984 bytes)"
    ]
    assert topic not in AdminClient({"bootstrap.servers": tansu.bootstrap}).list_topics(timeout=10).topics


def test_replay_of_a_file_damaged_further_on_produces_what_came_before(
    tansu: TansuBroker, topic_prefix: str, tmp_path: Path
):
    traces = example_traces()[:2]
    path = tmp_path / "traces.jsonl"
    write_json_lines(path, traces)
    path.write_bytes(path.read_bytes() + b'{"resourceSpans": [oops\n')
    topic = f"{topic_prefix}-spans"
    result = halluwatch("replay", str(path), "--topic", topic, HALLUWATCH_KAFKA_BOOTSTRAP=tansu.bootstrap)
    assert (result.returncode, result.stdout) == (1, "")
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"Error: {path}: line 3: malformed OTLP/JSON") or line.startswith(
        f"Error: {path}: line 3: not OTLP/JSON"
    ), line
    assert line.endswith(f"; the 2 messages before it were produced to {topic}")
    assert len(consume_all(tansu.bootstrap, topic, expected=2)) == 2


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


def write_sets(root: Path, per_set: int = 16) -> None:
    """Tiny labelled sets in the shared/data layout: invented years are the hallucinations."""
    import json

    for name in ("ragtruth", "begin", "faithdial_audit", "wice", "summedits"):
        (root / name).mkdir(parents=True)
        lines = []
        for i in range(per_set):
            context = f"Bridge {i} over the river was opened in {1900 + i} and is {100 + i} metres long."
            if name == "ragtruth" and i % 4 < 2:  # answers written from JSON records, as in its data-to-text task
                context = json.dumps({"name": f"Bridge {i}", "opened": 1900 + i, "length_m": 100 + i})
            invented = i % 2 == 1
            year = 1990 + i if invented else 1900 + i
            answer = f"Bridge {i} was opened in {year} and is {100 + i} metres long."
            start = answer.index(str(year))
            spans = [{"start": start, "end": start + 4}] if invented else []
            lines.append(json.dumps({"id": f"{name}-{i}", "task": "qa", "question": f"When did bridge {i} open?",
                                     "context": [context], "answer": answer, "hallucinated": invented,
                                     "spans": spans}))  # fmt: skip
        (root / name / f"{name}.jsonl").write_text("\n".join(lines) + "\n")


def test_train_writes_both_models_reproducibly(tmp_path: Path):
    import json

    write_sets(tmp_path / "data")
    runs = []
    for out in ("first", "second"):
        done = halluwatch("train", "--data", str(tmp_path / "data"), "--output-dir", str(tmp_path / out),
                          "--workers", "1")  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        assert "verdict model 3-" in done.stdout and "alert_probability:" in done.stdout
        runs.append({f: (tmp_path / out / f).read_text() for f in ("unsupported_spans.json", "verdict.json")})
    assert runs[0] == runs[1]  # same data, same files
    support = json.loads(runs[0]["unsupported_spans.json"])
    assert set(support["training"]["data"]) == {"ragtruth", "begin", "faithdial_audit", "wice"}
    verdict = json.loads(runs[0]["verdict.json"])
    assert "summedits" in verdict["training"]["data"] and verdict["model"]["kind"] == "scaled_logistic"
    # A worker or eval reads them when pointed at them.
    from detectors.unsupported_spans.detector import load_support_model
    from detectors.verdict import load_verdict_model

    assert load_support_model(tmp_path / "first" / "unsupported_spans.json").version == support["version"]
    assert load_verdict_model(tmp_path / "first" / "verdict.json").model.features
    assert set(verdict["alert_probability"]) == {"page", "slack"} and verdict["calibration"]["map"]["kind"] == "platt"
    missing = halluwatch("train", "--data", str(tmp_path / "nowhere"), "--output-dir", str(tmp_path / "x"))
    assert missing.returncode == 2 and "nowhere" in missing.stderr
    prose_only = tmp_path / "prose-only"
    write_sets(prose_only)
    ragtruth = prose_only / "ragtruth" / "ragtruth.jsonl"
    ragtruth.write_text(
        "".join(line for line in ragtruth.read_text().splitlines(True) if '"context": ["Bridge' in line)
    )
    refused = halluwatch("train", "--data", str(prose_only), "--output-dir", str(tmp_path / "y"), "--workers", "1")
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    assert "no span-labelled training records with json support" in refused.stderr


def test_commands_agree_on_one_line_errors_for_what_an_operator_must_fix(tmp_path: Path):
    unreachable = {"HALLUWATCH_CLICKHOUSE_DSN": "http://halluwatch:hunter2-secret@127.0.0.1:1/"}
    silence = ["silence", "add", "--match", "service=a", "--duration", "1h", "--reason", "r"]
    for command in (["migrate"], ["report"], silence, ["silence", "list"], ["silence", "expire", "abc"]):
        result = halluwatch(*command, **unreachable)
        assert result.returncode == 1, result.stderr
        assert "hunter2-secret" not in result.stderr
        (line,) = result.stderr.splitlines()  # no traceback, no driver warnings repeating it
        assert line.startswith("Error: cannot reach ClickHouse at 127.0.0.1:1 (from HALLUWATCH_CLICKHOUSE_DSN): ")
    blocked = tmp_path / "a-file"
    blocked.write_text("not a directory")
    for command in (["migrate"], ["report"], ["calibrate", "--output", str(blocked / "out"), str(blocked)]):
        result = halluwatch(*command, HALLUWATCH_DATA_DIR=str(blocked / "data"))
        assert result.returncode in (1, 2), result.stderr
        assert "Traceback" not in result.stderr


def test_unusable_silences_are_refused_in_one_line_before_clickhouse_is_asked(tmp_path: Path):
    env = {"HALLUWATCH_DATA_DIR": str(tmp_path / "data")}
    refusals = {
        ("--match", "colour=red", "--duration", "1h"): "unknown key 'colour'; use one of service, operation",
        ("--match", "service=a", "--duration", "45d"): "duration '45d' is longer than the 30-day maximum",
        ("--match", "service=a", "--duration", "soon"): "write a number and a unit (s, m, h, d)",
    }
    for args, says in refusals.items():
        result = halluwatch("silence", "add", *args, "--reason", "deploy", **env)
        assert result.returncode == 1, result.stderr
        (line,) = result.stderr.splitlines()
        assert line.startswith("Error: ") and says in line, line
    assert not (tmp_path / "data").exists()  # refused before any ClickHouse was opened
    assert halluwatch("migrate", **env).returncode == 0  # expire reads a store that is there
    unknown = halluwatch("silence", "expire", "nope", **env)
    assert (unknown.returncode, unknown.stderr.strip()) == (
        1,
        "Error: no silence 'nope': `halluwatch silence list --all` shows them",
    )


def test_every_output_directory_is_created_on_demand(tmp_path: Path):
    empty = tmp_path / "fresh"
    env = {"HALLUWATCH_DATA_DIR": str(empty / "state")}
    assert halluwatch("migrate", **env).returncode == 0  # report reads a store; migrate makes one
    assert halluwatch("report", "--output", str(empty / "reports" / "r.html"), **env).returncode == 0
    assert (empty / "reports" / "r.html").is_file()
    blocked = tmp_path / "a-file"
    blocked.write_text("not a directory")
    result = halluwatch("report", "--output", str(blocked / "reports" / "r.html"), **env)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert f"Error: cannot create the report directory {blocked / 'reports'}: Not a directory" in result.stderr


def test_a_misspelled_variable_stops_every_command_with_one_line(tmp_path: Path):
    for command in (["migrate"], ["worker"], ["report"]):
        result = halluwatch(*command, HALLUWATCH_KAFKA_BOOTSTRAPS="x:9092", HALLUWATCH_DATA_DIR=str(tmp_path))
        assert result.returncode == 1
        assert result.stderr == (
            "Error: unknown setting HALLUWATCH_KAFKA_BOOTSTRAPS (did you mean HALLUWATCH_KAFKA_BOOTSTRAP?)\n"
        )
