"""`halluwatch doctor` against a real Tansu broker and chDB, and against closed ports."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

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
    config = tmp_path / "halluwatch.yaml"
    api = f"http://127.0.0.1:{closed}/openapi.json"
    config.write_text(f"detectors:\n  tool_facts:\n    openapi: [{{tools: [http_request], document: '{api}'}}]\n")
    result = doctor(
        tmp_path,
        HALLUWATCH_CONFIG=str(config),
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
    # librdkafka printed nothing itself (~200 lines of %3|...|FAIL|rdkafka#...), and says why once, in our format.
    assert "|FAIL|" not in result.stderr
    (refused,) = [line for line in result.stderr.splitlines() if " librdkafka: " in line]
    assert " WARNING librdkafka: " in refused and "Connection refused" in refused, result.stderr
    # A registry that cannot load only warns: the worker runs, skipping the calls it covers.
    assert f"warn  openapi {api}: cannot be loaded, the calls it covers are skipped: cannot fetch {api}" in output
    assert_no_secret(output, password, sasl_password)


def test_input_topics_compacted_or_written_in_transactions_fail(tansu: TansuBroker, topic_prefix: str, tmp_path):
    spans, logs = f"{topic_prefix}.spans", f"{topic_prefix}.logs"
    admin = AdminClient({"bootstrap.servers": tansu.bootstrap})
    created = admin.create_topics(
        [
            NewTopic(spans, 1, config={"cleanup.policy": "compact"}),
            NewTopic(logs, 2, config={"cleanup.policy": "delete"}),
        ]
    )
    for future in created.values():
        future.result(timeout=10)
    plain = Producer({"bootstrap.servers": tansu.bootstrap})
    for n in range(3):
        plain.produce(spans, key=b"trace", value=b"span %d" % n)
    assert plain.flush(10) == 0
    transactional = Producer({"bootstrap.servers": tansu.bootstrap, "transactional.id": f"{topic_prefix}.tx"})
    transactional.init_transactions(10)
    transactional.begin_transaction()
    for n in range(3):
        transactional.produce(logs, value=b"log %d" % n, partition=1)
    transactional.commit_transaction(10)  # the commit marker takes partition 1's offset 3

    with AlertingServer() as slack:
        result = doctor(
            tmp_path,
            HALLUWATCH_KAFKA_BOOTSTRAP=tansu.bootstrap,
            HALLUWATCH_KAFKA_INPUT_TOPIC=spans,
            HALLUWATCH_KAFKA_LOGS_TOPIC=logs,
            HALLUWATCH_ALERTING__SLACK_BASE_URL=slack.slack_base_url,
        )
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    for line in (
        f"FAIL  kafka input topic cleanup.policy: {spans} is compacted (cleanup.policy=compact); the worker's "
        "commit work-around (pipeline/stream/dropped_records.py) takes offsets without records",
        f"ok    kafka input topic transactions: none seen in the newest 3 offsets of {spans} (1 partition(s))",
        f"ok    kafka logs topic cleanup.policy: delete on {logs}",
        f"FAIL  kafka logs topic transactions: {logs} is written in transactions: offsets without records "
        "(transaction markers) at partition 1 offset 3;",
        "check(s) failed: kafka input topic cleanup.policy, kafka logs topic transactions",
    ):
        assert line in output, output
    assert_no_secret(output)


FILL = """
import sys
from datetime import UTC, datetime
import clickhouse_connect
from detectors.base import DetectorResult
from pipeline.config.content_policy import STORE_ALL
from pipeline.sinks.clickhouse import migrate
from pipeline.sinks.rows import FINDING_COLUMNS, finding_record, finding_row
from tests.calls import make_llm_call
client = clickhouse_connect.get_client(dsn=sys.argv[1])
migrate(client, "halluwatch")
now = datetime.now(UTC)
rows = []
for index, (service, policy) in enumerate([("medical-answers", "medbot"), ("shop", "default"), ("shop", "default")]):
    call = make_llm_call("An answer.", trace_id=f"{index:032x}", service=service,
                         start_time_unix_nano=int(now.timestamp() * 1e9))
    result = DetectorResult("grounding", "1", 0.1, False, 0.5)
    rows.append(finding_row(finding_record(call, result, "t1", STORE_ALL.findings, policy), now))
client.insert("halluwatch.findings", rows, column_names=FINDING_COLUMNS)
client.close()
"""


def test_a_policy_that_matched_no_call_today_is_named(tmp_path):
    dsn = f"chdb://{(tmp_path / 'data' / 'clickhouse').resolve()}"
    subprocess.run([sys.executable, "-c", FILL, dsn], check=True, timeout=120)
    config = tmp_path / "halluwatch.yaml"
    policies = {"medbot": {"match": {"service": "medical-answers"}}, "docs": {"match": {"service": "docs-serch"}}}
    config.write_text(json.dumps({"policies": policies}))  # JSON is YAML
    result = doctor(tmp_path, HALLUWATCH_CONFIG=str(config), HALLUWATCH_KAFKA_BOOTSTRAP=f"127.0.0.1:{free_port()}")
    output = result.stdout + result.stderr
    assert "ok    config: valid" in output and "policies: medbot (service=medical-answers)" in output
    assert "warn  policies: docs matched no call in the last 24 h: check their match" in output
    assert "(services seen: medical-answers, shop)" in output


def test_a_broker_that_is_down_is_one_json_line_of_librdkafka(tmp_path):
    closed = free_port()
    result = doctor(tmp_path, HALLUWATCH_KAFKA_BOOTSTRAP=f"127.0.0.1:{closed}", HALLUWATCH_LOG_FORMAT="json")
    assert result.returncode == 1, result.stdout + result.stderr
    *logged, error = result.stderr.splitlines()
    assert error.startswith("Error: ") and "failed: kafka" in error  # click's own line, after the log
    records = [json.loads(line) for line in logged]  # every line a log shipper reads, librdkafka's too
    (refused,) = [r for r in records if r["logger"] == "librdkafka"]
    assert refused["level"] == "WARNING"
    assert refused["message"].startswith(f"127.0.0.1:{closed}/bootstrap: Connect to ipv4#127.0.0.1:{closed} failed: "
                                         "Connection refused")  # fmt: skip
