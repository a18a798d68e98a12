"""The conditions a newcomer meets, run through the installed ``halluwatch`` as they would type it.

Each failure must be a few plain lines on stderr: no traceback, exit status 1, the setting,
variable or file it came from named (secrets masked), and nothing created where it looked.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

HALLUWATCH = str(Path(sys.executable).parent / "halluwatch")
# Every command that only reads the store: none may create one, nor the directory it looked in.
READERS = [
    ("rate", "--app", "default"),
    ("conventions",),
    ("report",),
    ("label", "export", "--output", "to_label.jsonl"),
    ("erase", "--trace", "0af7651916cd43dd8448eb211c80319c"),
    ("silence", "list"),
    ("calibrate", "--app", "default"),
    ("review-digest", "--app", "default", "--channel", "#x"),
    ("ui", "--port", "0"),  # it writes verdicts, but pages over no store would only say to migrate
]


def run(cwd: Path, *args: str, timeout: float = 120, **env: str) -> subprocess.CompletedProcess[str]:
    """``halluwatch ARGS`` in ``cwd`` with a shell that sets no HALLUWATCH_* variable but ``env``."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("HALLUWATCH_") or k == "HALLUWATCH_MODEL_CACHE"}
    return subprocess.run([HALLUWATCH, *args], cwd=cwd, env={**clean, **env}, capture_output=True, text=True,
                          timeout=timeout)  # fmt: skip


def failed_plainly(result: subprocess.CompletedProcess[str]) -> str:
    """stderr of a run that failed with a plain message: exit 1, no traceback, nothing on stdout said twice."""
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr + result.stdout, result.stderr
    assert result.stderr.startswith("Error: "), result.stderr
    return result.stderr


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def empty(tmp_path: Path) -> Path:
    """An empty directory, as a fresh clone's shell would start in."""
    return tmp_path


@pytest.mark.parametrize("command", READERS, ids=lambda c: " ".join(c[:2]))
def test_a_read_in_a_fresh_directory_says_there_is_no_store_and_creates_none(empty: Path, command: tuple[str, ...]):
    result = run(empty, *command, HALLUWATCH_ALERTING__SLACK_BOT_TOKEN="xoxb-test")  # review-digest's
    stderr = result.stdout + failed_plainly(result)  # doctor says it in its check's line
    assert "no halluwatch store yet" in stderr
    assert "data directory .halluwatch (the default, in this directory) holds no embedded ClickHouse" in stderr
    assert "halluwatch demo" in stderr
    assert "halluwatch migrate" in stderr
    assert list(empty.iterdir()) == [], "a read created a directory or file"


@pytest.mark.parametrize("command", READERS[:3], ids=lambda c: c[0])
def test_a_mistyped_data_dir_is_named_with_its_variable_and_left_uncreated(empty: Path, command: tuple[str, ...]):
    stderr = failed_plainly(run(empty, *command, HALLUWATCH_DATA_DIR=str(empty / "dmeo")))
    assert f"data directory {empty / 'dmeo'} (from HALLUWATCH_DATA_DIR)" in stderr
    assert not (empty / "dmeo").exists()


def test_data_dir_option_reads_its_store_whatever_an_exported_dsn_says(empty: Path):
    # The demo's follow-ups use --data-dir: an exported deployment DSN must not divert them.
    exported = {"HALLUWATCH_CLICKHOUSE_DSN": f"http://127.0.0.1:{closed_port()}"}
    stderr = failed_plainly(run(empty, "--data-dir", "demo", "rate", "--app", "default", **exported))
    assert "data directory demo (from --data-dir)" in stderr and "ClickHouse at http" not in stderr
    assert not (empty / "demo").exists()


def test_ui_on_a_taken_port_says_so_in_one_line_before_any_sign_in_address(empty: Path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run(empty, "ui", "--port", str(port), HALLUWATCH_DATA_DIR=str(empty / "store"))
    stderr = failed_plainly(result)
    assert stderr.strip() == (
        f"Error: cannot listen on 127.0.0.1:{port} (from --host and --port): address already in use; stop what "
        "listens there, or give another --port"
    )
    assert "token" not in result.stdout and not (empty / "store").exists()


@pytest.mark.parametrize(
    ("variable", "value", "said"),
    [
        ("HALLUWATCH_ESCALATION__ENABLED", "maybe", "escalation.enabled (from HALLUWATCH_ESCALATION__ENABLED=maybe)"),
        ("HALLUWATCH_ALERTING__ROUTES", "{bad", "HALLUWATCH_ALERTING__ROUTES is not JSON"),
        ("HALLUWATCH_METRICS_PORT", "eighty", "metrics_port (from HALLUWATCH_METRICS_PORT=eighty)"),
        ("HALLUWATCH_LOG_LEVEL", "LOUD", "log_level (from HALLUWATCH_LOG_LEVEL=LOUD)"),
        ("HALLUWATCH_CLICKHOUSE_DSN", "ftp://u:hunter2@h", "clickhouse_dsn (from HALLUWATCH_CLICKHOUSE_DSN)"),
        ("HALLUWATCH_KAFKA_BOOTSTARP", "h:9092", "did you mean HALLUWATCH_KAFKA_BOOTSTRAP?"),
        ("HALLUWATCH_CONFIG", "/no/such.yaml", "cannot read config file /no/such.yaml (from HALLUWATCH_CONFIG)"),
        ("HALLUWATCH_SECRETS_DIR", "/no/such", "HALLUWATCH_SECRETS_DIR=/no/such is not a directory"),
    ],
    ids=["bool", "json", "int", "choice", "dsn", "typo", "config", "secrets-dir"],
)
def test_a_bad_variable_is_named_as_that_variable(empty: Path, variable: str, value: str, said: str):
    stderr = failed_plainly(run(empty, "rate", "--app", "default", **{variable: value}))
    assert said in stderr and len(stderr.strip().splitlines()) == 1
    assert "hunter2" not in stderr
    if variable != "HALLUWATCH_CONFIG":
        assert "config file" not in stderr  # no file was given: it cannot be to blame
    assert list(empty.iterdir()) == []


def test_a_bad_config_file_value_is_named_by_file_and_key(empty: Path):
    config = empty / "halluwatch.yaml"
    config.write_text("escalation:\n  enabled: maybe\n", encoding="utf-8")
    stderr = failed_plainly(run(empty, "rate", "--config", str(config)))
    assert f"escalation.enabled (from escalation.enabled in config file {config})" in stderr


@pytest.mark.parametrize(
    ("dsn", "reason"),
    [
        (f"http://halluwatch:hunter2@127.0.0.1:{closed_port()}", "connection refused"),
        ("http://halluwatch:hunter2@no-such-host.invalid:8123", "name not resolved"),
    ],
    ids=["refused", "unresolved"],
)
@pytest.mark.parametrize("command", [READERS[0], ("migrate",), ("conventions",)], ids=lambda c: c[0])
def test_clickhouse_out_of_reach_is_named_with_its_address_source_and_reason(
    empty: Path, dsn: str, reason: str, command: tuple[str, ...]
):
    stderr = failed_plainly(run(empty, *command, HALLUWATCH_CLICKHOUSE_DSN=dsn))
    host = dsn.rsplit("@", 1)[1]
    assert f"cannot reach ClickHouse at {host} (from HALLUWATCH_CLICKHOUSE_DSN): {reason}; " in stderr
    assert "hunter2" not in stderr and "HTTPConnectionPool" not in stderr
    assert len(stderr.strip().splitlines()) == 1


@pytest.fixture
def trace_file(empty: Path) -> Iterator[Path]:
    path = empty / "traces.jsonl"
    span = {"traceId": "0af7651916cd43dd8448eb211c80319c", "spanId": "b7ad6b7169203331", "name": "chat",
            "startTimeUnixNano": "1", "endTimeUnixNano": "2"}  # fmt: skip
    path.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}) + "\n", encoding="utf-8")
    yield path


def test_kafka_out_of_reach_is_named_with_its_address_and_source(empty: Path, trace_file: Path):
    bootstrap = f"127.0.0.1:{closed_port()}"
    stderr = failed_plainly(run(empty, "replay", str(trace_file), HALLUWATCH_KAFKA_BOOTSTRAP=bootstrap, timeout=180))
    assert f"cannot reach Kafka at {bootstrap} (from HALLUWATCH_KAFKA_BOOTSTRAP): connection refused" in stderr


@pytest.mark.parametrize(
    "command",
    [("replay", "{path}"), ("label", "import", "{path}"), ("eval", "{path}", "--output", "out.jsonl")],
    ids=lambda c: " ".join(c[:2]),
)
def test_a_broken_input_file_is_named(empty: Path, command: tuple[str, ...]):
    broken = empty / "broken.jsonl"
    broken.write_text('{"id": 1, "label": \n', encoding="utf-8")
    stderr = failed_plainly(run(empty, *(part.format(path=broken) for part in command)))
    assert str(broken) in stderr
    assert sorted(p.name for p in empty.iterdir()) == ["broken.jsonl"]


def test_erase_with_a_short_prefix_says_the_length_it_needs_once(empty: Path):
    assert run(empty, "migrate").returncode == 0
    result = run(empty, "erase", "--trace", "0af7651")
    stderr = failed_plainly(result)
    assert "its 7 characters are too few: give 8 or more" in stderr
    assert result.stdout == "" and stderr.count("0af7651") == 1
