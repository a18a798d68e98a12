"""The one place failures become plain lines: sources named, connection reasons read, faults of ours kept apart."""

from __future__ import annotations

import socket
import ssl
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from pipeline.cli.failures import explain
from pipeline.cli.group import Commands
from pipeline.config.settings import Settings, load_settings
from pipeline.config.sources import Sources


def test_a_setting_is_traced_to_the_most_specific_variable_then_the_file_key():
    sources = Sources(
        {"HALLUWATCH_ESCALATION__ENABLED": "maybe", "HALLUWATCH_UI": '{"token": "t"}'},
        config_path=Path("conf.yaml"),
        file_values={"escalation": {"enabled": True}, "review": {"seed": 3}},
    )
    assert sources.of(["escalation", "enabled"]) == "HALLUWATCH_ESCALATION__ENABLED"
    assert sources.of(["ui", "token"]) == "HALLUWATCH_UI (its key token)"
    assert sources.of(["review", "seed"]) == "review.seed in config file conf.yaml"
    assert sources.of(["review", "window_days"]) == ""
    assert sources.quoted(["escalation", "enabled"]) == "HALLUWATCH_ESCALATION__ENABLED=maybe"


def test_a_secret_variable_is_named_but_its_value_never_quoted():
    sources = Sources({"HALLUWATCH_CLICKHOUSE_DSN": "ftp://u:hunter2@h"})
    assert sources.quoted(["clickhouse_dsn"]) == "HALLUWATCH_CLICKHOUSE_DSN"


def _chained(outer: Exception, inner: BaseException) -> Exception:
    outer.__cause__ = inner
    return outer


class _ClickHouseLike(Exception):
    """Stands for clickhouse_connect's errors: the module is what names the service."""


_ClickHouseLike.__module__ = "clickhouse_connect.driver.exceptions"


@pytest.fixture
def server_settings(monkeypatch: pytest.MonkeyPatch) -> Settings:
    monkeypatch.setenv("HALLUWATCH_CLICKHOUSE_DSN", "https://reader:hunter2@ch.example:8443")
    return load_settings()


@pytest.mark.parametrize(
    ("inner", "reason"),
    [
        (ConnectionRefusedError(111, "Connection refused"), "connection refused"),
        (socket.gaierror(-2, "Name or service not known"), "name not resolved"),
        (TimeoutError("timed out"), "timed out"),
        (ssl.SSLCertVerificationError(1, "certificate verify failed"), "TLS failed"),
        (Exception("Code: 516. DB::Exception: reader: Authentication failed"), "authentication failed"),
    ],
)
def test_each_connection_failure_reads_as_its_own_reason_with_address_and_source(
    server_settings: Settings, inner: BaseException, reason: str
):
    line = explain(_chained(_ClickHouseLike("HTTPConnectionPool(host=...): Max retries exceeded"), inner),
                   server_settings)  # fmt: skip
    assert line is not None
    assert line.startswith(f"cannot reach ClickHouse at ch.example:8443 (from HALLUWATCH_CLICKHOUSE_DSN): {reason}; ")
    assert "hunter2" not in line and "HTTPConnectionPool" not in line


def test_a_fault_of_ours_is_one_line_and_its_traceback_is_behind_debug():
    @click.group(cls=Commands)
    @click.option("--debug", is_flag=True)
    def root(debug: bool) -> None:
        pass

    @root.command()
    def boom() -> None:
        raise KeyError("stage")

    plain = CliRunner().invoke(root, ["boom"])
    assert plain.exit_code == 1
    assert plain.output.strip() == (
        "Error: halluwatch boom failed on a fault of its own (KeyError: 'stage'), not on anything in your setup; "
        "`halluwatch --debug boom ...` shows the traceback to report"
    )
    debugged = CliRunner().invoke(root, ["--debug", "boom"])
    assert isinstance(debugged.exception, KeyError)  # raised as it is: click's runner holds the traceback


def test_the_judges_endpoint_is_named_by_its_own_setting(monkeypatch: pytest.MonkeyPatch):
    import httpx
    import openai

    monkeypatch.setenv("HALLUWATCH_CONSISTENCY__LLM__BASE_URL", "http://llm.internal:8000/v1")
    failed = openai.APIConnectionError(request=httpx.Request("POST", "http://llm.internal:8000/v1/chat/completions"))
    line = explain(_chained(failed, ConnectionRefusedError(111, "Connection refused")), load_settings())
    assert line == (
        "cannot reach the judge's endpoint at llm.internal:8000 (from HALLUWATCH_CONSISTENCY__LLM__BASE_URL): "
        "connection refused; start it there, or fix the host and port in HALLUWATCH_CONSISTENCY__LLM__BASE_URL"
    )
