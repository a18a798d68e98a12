"""`halluwatch doctor` against a real Tansu broker and chDB, and against closed ports."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from pipeline.tools.demo_broker import TansuBroker, free_port
from tests.servers import SLACK_API_PREFIX, AlertingServer

# Secret values no output may show.
CANARIES = {
    "HALLUWATCH_ALERTING__SLACK_BOT_TOKEN": "xoxb-canary-slack-7f3a9c",
    "HALLUWATCH_ALERTING__PAGERDUTY_ROUTING_KEY": "canary-pd-key-51c2e8",
    "HALLUWATCH_CONTENT_HMAC_KEY": "canary-hmac-key-0b7d44",
    "HALLUWATCH_CONSISTENCY__LLM__API_KEY": "sk-canary-llm-key-93e1aa",
}


def doctor(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "HALLUWATCH_DATA_DIR": str(tmp_path / "data"), **CANARIES, **env}
    return subprocess.run(
        [sys.executable, "-m", "pipeline.cli", "doctor", "--timeout", "5"],
        env=environment,
        capture_output=True,
        text=True,
        timeout=180,
    )


def assert_no_secret(output: str, *secrets: str) -> None:
    for secret in (*CANARIES.values(), *secrets):
        assert secret not in output


def test_every_check_passes_on_a_working_setup(tansu: TansuBroker, tmp_path):
    with AlertingServer() as slack:
        result = doctor(tmp_path, HALLUWATCH_KAFKA_BOOTSTRAP=tansu.bootstrap,
                        HALLUWATCH_ALERTING__SLACK_BASE_URL=slack.slack_base_url)  # fmt: skip
        auth_tests = slack.requests(SLACK_API_PREFIX + "auth.test")
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    for line in (
        "ok    config: valid",
        f"ok    kafka: reached 1 broker(s) at {tansu.bootstrap}",
        "ok    kafka permissions: created, wrote, read and deleted a scratch topic",
        "ok    clickhouse: connected to chdb://",
        "ok    clickhouse permissions: created, inserted into, selected from and dropped a table in halluwatch",
        "ok    embedding model:",
        "ok    slack: bot token accepted",
        "all checks passed",
    ):
        assert line in output
    assert "warn  kafka input topic: otlp_spans does not exist yet" in output
    assert "warn  clickhouse schema:" in output and "run halluwatch migrate" in output
    assert (
        auth_tests
        and auth_tests[0].headers["authorization"] == f"Bearer {CANARIES['HALLUWATCH_ALERTING__SLACK_BOT_TOKEN']}"
    )
    assert_no_secret(output)


def test_closed_ports_fail_with_what_to_fix_and_no_secret(tmp_path):
    closed = free_port()  # nothing listens there
    password, sasl_password = "canary-ch-password-e29f", "canary-sasl-password-4d1b"
    result = doctor(
        tmp_path,
        HALLUWATCH_KAFKA_BOOTSTRAP=f"127.0.0.1:{closed}",
        HALLUWATCH_KAFKA_SECURITY__PROTOCOL="SASL_PLAINTEXT",
        HALLUWATCH_KAFKA_SECURITY__SASL_MECHANISM="SCRAM-SHA-512",
        HALLUWATCH_KAFKA_SECURITY__SASL_USERNAME="halluwatch",
        HALLUWATCH_KAFKA_SECURITY__SASL_PASSWORD=sasl_password,
        HALLUWATCH_CLICKHOUSE_DSN=f"http://halluwatch:{password}@127.0.0.1:{closed}/",
        HALLUWATCH_ALERTING__SLACK_BASE_URL=f"http://127.0.0.1:{closed}/api/",
    )
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "FAIL  kafka: cannot reach the brokers" in output
    assert f"check kafka_bootstrap (127.0.0.1:{closed})" in output
    assert "kafka_security (protocol SASL_PLAINTEXT, SASL SCRAM-SHA-512 user 'halluwatch')" in output
    assert f"FAIL  clickhouse: cannot connect to http://halluwatch:***@127.0.0.1:{closed}/" in output
    assert "check clickhouse_dsn (user, password, host, port)" in output
    assert f"FAIL  alerting: cannot reach Slack at http://127.0.0.1:{closed}/api/" in output
    assert "check(s) failed: kafka, clickhouse, alerting" in output
    assert_no_secret(output, password, sasl_password)
