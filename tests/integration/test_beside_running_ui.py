"""Commands run beside a running `halluwatch ui`, which holds the embedded ClickHouse (chDB admits one process).

`rate` reads through the pages: with the token the pages made up, or behind an authenticating proxy
with the identity header the proxy would send.  Every other command that needs the store says in
one line which process holds it and what works instead.  Real processes, as a user runs them.
"""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from pipeline.tools.demo_broker import free_port

PROXY_HEADER = "X-Forwarded-Email"


def halluwatch(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pipeline.cli", *args], capture_output=True, text=True,
                          timeout=180, env={**os.environ, **env}, check=False)  # fmt: skip


def _serving(data: Path, **settings: str) -> Iterator[tuple[dict[str, str], subprocess.Popen[str], str]]:
    """`halluwatch ui` on a migrated data directory with ``settings`` (HALLUWATCH_UI__*): env, process, address."""
    env = {"HALLUWATCH_DATA_DIR": str(data), **{f"HALLUWATCH_UI__{k.upper()}": v for k, v in settings.items()}}
    migrated = halluwatch(env, "migrate")
    assert migrated.returncode == 0, migrated.stderr
    port = free_port()
    ui = subprocess.Popen([sys.executable, "-m", "pipeline.cli", "ui", "--port", str(port)], env={**os.environ, **env},
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)  # fmt: skip
    address = f"http://127.0.0.1:{port}"
    try:
        assert ui.stdout is not None
        first = ui.stdout.readline()
        assert first.startswith(f"triage pages on {address}/"), first + ui.stdout.read()
        deadline = time.monotonic() + 90  # a loaded machine starts Python and chDB slowly
        while True:
            try:
                requests.get(f"{address}/login", timeout=5)
                break
            except requests.ConnectionError:
                assert time.monotonic() < deadline and ui.poll() is None, "halluwatch ui did not start"
                time.sleep(0.2)
        yield env, ui, address
    finally:
        ui.terminate()
        ui.wait(timeout=30)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[dict[str, str], subprocess.Popen[str], str]]:
    """`halluwatch ui` with a token of its own making."""
    yield from _serving(tmp_path / "data")


@pytest.fixture
def proxied(tmp_path: Path) -> Iterator[tuple[dict[str, str], subprocess.Popen[str], str]]:
    """`halluwatch ui` behind an authenticating proxy (loopback trusted by default), no token; a stale one on disk."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "ui_token").write_text("an-earlier-run-s-token\n", encoding="utf-8")
    yield from _serving(data, identity_header=PROXY_HEADER)


@pytest.mark.parametrize(
    "command",
    [
        ["conventions"],
        ["report"],
        ["label", "export", "--output", "out.jsonl"],
        ["erase", "--trace", "4bf92f3577b34da6a3ce929d0e0e4736"],
    ],
)
def test_a_command_beside_ui_names_the_process_and_what_works_instead_in_one_line(served, command):
    env, ui, _ = served
    result = halluwatch(env, *command)
    assert result.returncode == 1
    (line,) = result.stderr.splitlines()
    where = f"chdb://{(Path(env['HALLUWATCH_DATA_DIR']) / 'clickhouse').resolve()}"
    holder = re.escape(f"Error: ClickHouse at {where} is in use by process {ui.pid} (")
    assert re.match(rf"{holder}[^)]*-m pipeline\.cli ui --port \d+\): chDB admits one process per directory; ", line)
    # Not its pages: they neither erase, export nor write a report.
    assert line.endswith("stop it, run this again, then start it again; "
                         "or point HALLUWATCH_CLICKHOUSE_DSN at a ClickHouse server, which admits many")  # fmt: skip


def test_rate_reads_through_the_pages_and_says_why_when_they_refuse_it(served):
    env, _, address = served
    through = halluwatch(env, "rate", "--app", "default")
    assert through.returncode == 0, through.stderr
    assert through.stdout.startswith("app default, ") and "false alarms by route" in through.stdout

    # doctor names the holder and what works, not the DSN's user and password: nothing there is wrong.
    doctor = halluwatch(env, "doctor", "--timeout", "2")
    (checked,) = [line for line in doctor.stdout.splitlines() if line.startswith("FAIL  clickhouse:")]
    assert f"is in use by process {served[1].pid}" in checked and "check it while that process is stopped" in checked
    assert "check clickhouse_dsn" not in checked

    wrong_token = halluwatch({**env, "HALLUWATCH_UI__TOKEN": secrets.token_hex(24)}, "rate", "--app", "default")
    assert wrong_token.returncode == 1
    (line,) = wrong_token.stderr.splitlines()
    refused = (
        f"the triage pages at {address} did not sign this command in (they answered /login with their sign-in page)"
    )
    assert f"{refused}: the token sent is not theirs; set HALLUWATCH_UI__TOKEN to a token both use" in line
    # This command believes a proxy signs people in; the pages do not: their sign-in page answers, named as such.
    as_proxy = halluwatch({**env, "HALLUWATCH_UI__IDENTITY_HEADER": PROXY_HEADER}, "rate", "--app", "default")
    assert as_proxy.returncode == 1
    assert f"they believe {PROXY_HEADER} only from ui.trusted_proxies, which must include" in as_proxy.stderr


def test_behind_a_proxy_rate_reads_through_the_pages_and_sign_in_names_the_proxy(proxied):
    env, _, address = proxied
    through = halluwatch(env, "rate", "--app", "default")
    assert through.returncode == 0, through.stderr
    assert through.stdout.startswith("app default, ") and "false alarms by route" in through.stdout
    assert not (Path(env["HALLUWATCH_DATA_DIR"]) / "ui_token").exists(), "no earlier run's token is left to send"
    sign_in = " ".join(requests.get(f"{address}/login", timeout=30).text.split())
    proxy = "Sign-in goes through the authenticating proxy in front of these pages, which names you in"
    assert f"{proxy} <code>{PROXY_HEADER}</code>" in sign_in
    assert 'name="token"' not in sign_in
