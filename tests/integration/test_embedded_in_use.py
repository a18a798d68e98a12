"""Commands on an embedded ClickHouse directory another process has open: the advice, not chDB's raw failure.

chDB admits one process per directory; the other process here is a real one, holding the
directory the way a running worker does.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipeline.sinks.embedded_lock import holder

# A second process with embedded ClickHouse open on argv[1], as a worker has it, until it is killed.
HOLD = """
import sys, time
from pipeline.sinks.clickhouse import connect
client = connect(f"chdb://{sys.argv[1]}")  # kept: chDB closes the directory with its last client
client.command("SELECT 1")
print("holding", flush=True)
time.sleep(300)
"""


@pytest.fixture
def held(tmp_path: Path) -> Iterator[tuple[Path, int]]:
    """A data directory whose embedded ClickHouse another process has open, and that process's id."""
    data = tmp_path / "data"
    process = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(data / "clickhouse")], stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None and process.stdout.readline() == "holding\n"
        yield data, process.pid
    finally:
        process.kill()
        process.wait()


@pytest.mark.parametrize(
    ("command", "advice"),
    [
        (["ui", "--port", "0"], "a worker serves the pages on its metrics port (HALLUWATCH_METRICS_PORT); or stop it"),
        (["silence", "list"], "set silences while it is stopped (a worker applies them when it starts)"),
        (["conventions"], "stop it, run this again, then start it again; or point HALLUWATCH_CLICKHOUSE_DSN at a"),
    ],
)
def test_a_directory_a_worker_holds_gets_the_advice_in_one_line(held: tuple[Path, int], command, advice):
    data, pid = held
    result = subprocess.run([sys.executable, "-m", "pipeline.cli", *command], capture_output=True, text=True,
                            timeout=120, env={**os.environ, "HALLUWATCH_DATA_DIR": str(data)}, check=False)  # fmt: skip
    assert result.returncode == 1
    (line,) = result.stderr.splitlines()  # not chDB's "Code: 76 ... Cannot lock file" before it
    where = f"chdb://{(data / 'clickhouse').resolve()}"
    # The holder's command line, one line however many its -c script has.
    assert line.startswith(f"Error: ClickHouse at {where} is in use by process {pid} ({sys.executable} -c import sys")
    assert "): chDB admits one process per directory; " in line and advice in line


def test_the_lock_tells_another_process_from_this_one(held: tuple[Path, int], clickhouse, chdb_path: Path):
    data, pid = held
    assert holder(data / "clickhouse") == pid
    assert holder(chdb_path) is None  # this process has it open (the fixture's client): chDB reuses that
    assert holder(data / "nothing-here") is None
