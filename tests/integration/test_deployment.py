"""The worker exactly as infra/docker-compose.yml runs it, from the compose file's own environment.

Its environment is derived, not copied: the image's ``ENV`` (../Dockerfile), then the
``env_file`` (``.env``, made from ``.env.example`` with its optional lines switched on),
then the service's ``environment``, with ``${VAR}`` interpolated from ``.env`` as compose
does.  Only what names a place inside the compose network or the container is replaced,
by :data:`ADDRESSES`; every other variable reaches the processes unchanged, so a variable
added to the compose file reaches this test without an edit.  `halluwatch migrate` and
`halluwatch worker` run as the ``migrate`` and ``worker`` services do: the console script,
started in an empty directory, with that environment and nothing else.

Stand-ins: a Tansu broker for ``kafka``, a ClickHouse that insists on the password (the
HTTP shim over chDB) for ``clickhouse``, the local fakes of tests/servers.py for Slack and
PagerDuty, an OTLP/HTTP receiver for the collector, and tests/openai_server.py for the
sampled detectors' LLM endpoint.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import clickhouse_connect
import pytest

from pipeline.tools.demo_broker import TansuBroker, free_port
from pipeline.tools.example_traces import EXAMPLES, LOG_EVENT_EXAMPLES, example_log_event_telemetry, example_traces
from tests.integration.compose_env import (
    ADDRESSES,
    HALLUWATCH,
    LOGS_PATH,
    OPTIONAL,
    REQUIRED,
    SECRET_VARIABLES,
    Local,
    check_triage_service,
    compose_file,
    dot_env_file,
    empty_dir,
    interpolate,
    local_environment,
    service_environment,
    setting,
    start_halluwatch,
    tail,
)
from tests.integration.faults import (
    PasswordClickHouseShim,
    assert_alerts_match_findings,
    keyed_messages,
    read_topic,
)
from tests.integration.support import committed_total, consume_distinct, produce
from tests.openai_server import OpenAIServer
from tests.servers import PAGERDUTY_PATH, SLACK_POST_PATH, AlertingServer, Reply, Request, ScriptedServer

pytestmark = pytest.mark.usefixtures("exported_model")


def _otlp_ok(request: Request) -> Reply:
    """An OTLP/HTTP collector's answer: an empty ExportLogsServiceResponse."""
    return Reply(200, {"Content-Type": "application/x-protobuf"}, b"")


JUNK = [b"\x00\xffthis is not an OTLP payload", b"\x0a\x05trunc", b'{"resourceSpans": 5}']


def _secret_parts(value: str) -> list[str]:
    """A secret value and the secrets inside it (a JSON mapping's values, a bearer token)."""
    try:
        inner = json.loads(value)
    except json.JSONDecodeError:
        inner = None
    parts = [value, *(inner.values() if isinstance(inner, dict) else ())]
    return [*parts, *(part.split(" ", 1)[1] for part in parts if part.startswith("Bearer "))]


def _health_check(compose_env: Mapping[str, str], local: Local) -> list[str]:
    """The worker service's health-check command, pointed at the worker's metrics port here."""
    kind, *command = compose_file()["services"]["worker"]["healthcheck"]["test"]
    assert kind == "CMD" and command[0] == "python", command
    port = compose_env["HALLUWATCH_METRICS_PORT"]
    return [
        str(HALLUWATCH.parent / "python"),
        *(part.replace(f":{port}/", f":{local.metrics_port}/") for part in command[1:]),
    ]


def _stored_exactly_once(query: Callable[[str], list[tuple[Any, ...]]], database: str, calls: int) -> str:
    """Every call stored once with one finding per detector, once duplicates from redelivery are merged."""
    for table in ("llm_calls", "findings"):
        query(f"OPTIMIZE TABLE {database}.{table} FINAL")
    ((stored, detectors, findings),) = query(
        f"SELECT (SELECT count() FROM {database}.llm_calls), uniqExact(detector), count() FROM {database}.findings"
    )
    assert (stored, findings) == (calls, calls * detectors) and detectors >= 5, (stored, detectors, findings)
    return f"{stored} LLM calls stored, {findings} findings from {detectors} detectors"


def test_worker_as_compose_runs_it(tmp_path: Path, chdb_path: Path, model_cache_dir: Path):
    dot_env = dot_env_file()
    clickhouse = compose_file()["services"]["clickhouse"]["environment"]
    user, password = (
        interpolate(str(clickhouse[name]), dot_env) for name in ("CLICKHOUSE_USER", "CLICKHOUSE_PASSWORD")
    )
    secret_values = [part for name in SECRET_VARIABLES for part in _secret_parts(dot_env[name])]
    spans, (log_event_traces, logs) = example_traces(), example_log_event_telemetry()
    traces = [*spans, *log_event_traces]
    worker_compose_env = service_environment("worker", dot_env)
    with ExitStack() as stack:
        broker = stack.enter_context(TansuBroker(log_path=tmp_path / "tansu.log"))
        ui_user, ui_password = "halluwatch_ui", dot_env["CLICKHOUSE_UI_PASSWORD"]  # infra/README.md's triage user
        worker_user = {"halluwatch_worker": dot_env["CLICKHOUSE_WORKER_PASSWORD"]}  # and its workers' user
        shim = stack.enter_context(
            PasswordClickHouseShim(chdb_path, user, password, {ui_user: ui_password, **worker_user})
        )
        alerting = stack.enter_context(AlertingServer())
        collector = stack.enter_context(ScriptedServer(_otlp_ok))
        llm = stack.enter_context(OpenAIServer(default_answer="The warranty lasts two years."))
        local = Local(broker.bootstrap, shim.port, collector.url, llm.base_url, alerting,
                      empty_dir(tmp_path / "worker-data"), model_cache_dir, free_port())  # fmt: skip
        home = empty_dir(tmp_path / "home")
        client = clickhouse_connect.get_client(dsn=shim.dsn_for(user, password))
        stack.callback(client.close)
        database = setting(worker_compose_env, "clickhouse_database")
        client.command(f"DROP DATABASE IF EXISTS {database}")  # the session's chDB is shared
        stack.callback(client.command, f"DROP DATABASE IF EXISTS {database}")

        def query(sql: str) -> list[tuple[Any, ...]]:
            return [tuple(row) for row in client.query(sql).result_rows]

        # The order of work infra/README.md gives: doctor (`docker compose run --rm worker halluwatch
        # doctor`: the worker's environment), then the migrate service, then the worker.
        outputs = {name: tmp_path / f"{name}.log" for name in ("doctor", "refused", "migrate", "worker", "triage")}
        missing = {name for name in ADDRESSES if name not in worker_compose_env} - set(OPTIONAL)
        assert not missing, f"the compose files no longer set {missing}: drop them from ADDRESSES"
        assert worker_compose_env["HALLUWATCH_CONTENT_MODE"] == "hash"  # .env's, for the triage check below
        worker_env = local_environment(worker_compose_env, local, home)
        doctor = start_halluwatch(["doctor"], worker_env, empty_dir(tmp_path / "doctor-cwd"), outputs["doctor"])
        assert doctor.wait(timeout=120) == 0, tail(outputs["doctor"])
        assert "ok    slack: bot token accepted" in outputs["doctor"].read_text(), tail(outputs["doctor"])
        # The migrate service: once, to completion, before the worker starts.  First with a password
        # ClickHouse refuses (a handled fault: one line, exit status 1), then as compose runs it.
        wrong = {**dot_env, "CLICKHOUSE_PASSWORD": REQUIRED["CLICKHOUSE_PASSWORD"]()}
        secret_values.append(wrong["CLICKHOUSE_PASSWORD"])
        for name, env in (("refused", wrong), ("migrate", dot_env)):
            migrate_env = local_environment(service_environment("migrate", env), local, home)
            migration = start_halluwatch(["migrate"], migrate_env, empty_dir(tmp_path / f"{name}-cwd"), outputs[name])
            assert migration.wait(timeout=120) == (1 if name == "refused" else 0), tail(outputs[name])
        said = outputs["refused"].read_text()
        refusal = "authentication failed; check the user and password in HALLUWATCH_CLICKHOUSE_DSN"
        assert shim.refused > 0 and refusal in said
        assert wrong["CLICKHOUSE_PASSWORD"] not in said
        refused = shim.refused

        worker = start_halluwatch(["worker"], worker_env, empty_dir(tmp_path / "worker-cwd"), outputs["worker"])
        stack.callback(lambda: worker.poll() is None and worker.kill())

        def wait(what: str, done: Callable[[], bool], timeout: float) -> None:
            deadline = time.monotonic() + timeout
            while not done():
                assert worker.poll() is None, f"worker exited ({worker.returncode}):\n{tail(outputs['worker'])}"
                assert time.monotonic() < deadline, f"no {what} in {timeout:g}s:\n{tail(outputs['worker'])}"
                time.sleep(0.5)

        # Traffic as the collector writes it: one message per trace keyed by its id, the GenAI
        # log records on the logs topic, and junk on both.
        spans_topic, logs_topic = (setting(worker_env, name) for name in ("kafka_input_topic", "kafka_logs_topic"))
        max_bytes = int(setting(worker_env, "max_message_bytes"))
        junk = [(None, value) for value in JUNK]
        sent = produce(broker.bootstrap, spans_topic, [*keyed_messages(traces), *junk], max_bytes)
        produce(broker.bootstrap, logs_topic, [(None, logs.SerializeToString()), junk[0]], max_bytes)
        group = setting(worker_env, "kafka_group_id")
        wait("the input committed", lambda: committed_total(broker.bootstrap, group, spans_topic) >= sent, 300)
        calls = len(EXAMPLES) + len(LOG_EVENT_EXAMPLES)  # one LLM call each
        findings_sql = f"SELECT uniqExact(trace_id, span_id) FROM {database}.findings"
        wait("findings for every LLM call", lambda: query(findings_sql)[0][0] >= calls, timeout=120)
        wait("a Slack post", lambda: bool(alerting.requests(SLACK_POST_PATH)), timeout=120)
        wait("findings sent to the collector", lambda: bool(collector.requests(LOGS_PATH)), timeout=60)
        dlq_topic = setting(worker_env, "kafka_dlq_topic")
        dead = consume_distinct(broker.bootstrap, dlq_topic, len(JUNK) + 1, timeout_seconds=60)
        alerts_sql = f"SELECT trace_id, destination, status FROM {database}.alerts FINAL ORDER BY ALL"
        deliveries: list[tuple[Any, ...]] = []

        def settled() -> bool:
            """Every alert delivered, and no delivery added for three seconds."""
            before = query(alerts_sql)
            time.sleep(3)
            deliveries[:] = query(alerts_sql)
            return bool(deliveries) and deliveries == before and all(row[2] == "delivered" for row in deliveries)

        wait("alert deliveries to settle", settled, timeout=120)
        health = subprocess.run(_health_check(worker_compose_env, local), capture_output=True, timeout=10, check=False)
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=90) == 0, tail(outputs["worker"])
        assert health.returncode == 0, health.stderr

        stored = _stored_exactly_once(query, database, calls)
        alerted = assert_alerts_match_findings(
            query, database, read_topic(broker.bootstrap, setting(worker_env, "kafka_alerts_topic"))
        )
        # The triage service, as compose runs it, on what the worker stored (over HTTP, with the password).
        triage_env = local_environment(service_environment("triage", dot_env), local, home)
        assert urlsplit(triage_env["HALLUWATCH_CLICKHOUSE_DSN"]).username == ui_user
        alerted_traces = {trace for trace, _, _ in deliveries}
        check_triage_service(triage_env, dot_env["HALLUWATCH_UI__TOKEN"], alerted_traces, tmp_path, outputs["triage"])
    print(stored, alerted, deliveries, sep="\n")
    assert shim.refused == refused  # the worker's password was right from the start

    # Alerts reached Slack and PagerDuty with the credentials of .env, and link where compose says.
    token = dot_env["HALLUWATCH_ALERTING__SLACK_BOT_TOKEN"]
    posts = alerting.requests(SLACK_POST_PATH)
    assert posts and all(post.headers["authorization"] == f"Bearer {token}" for post in posts)
    dashboard = worker_compose_env["HALLUWATCH_ALERTING__DASHBOARD_URL"]
    assert dashboard == f"{dot_env['GRAFANA_URL']}/d/halluwatch" and all(dashboard in json.dumps(p.body) for p in posts)
    trace_link = dot_env["HALLUWATCH_ALERTING__TRACE_URL_TEMPLATE"].split("{trace_id}")[0]
    assert all(trace_link in json.dumps(post.body) for post in posts)
    triage_link = f"{dot_env['HALLUWATCH_ALERTING__UI_BASE_URL']}/trace/"
    assert all(triage_link in json.dumps(p.body) and "halluwatch_false_alarm" in json.dumps(p.body) for p in posts)
    pages = alerting.requests(PAGERDUTY_PATH)
    assert all(page.body["routing_key"] == dot_env["HALLUWATCH_ALERTING__PAGERDUTY_ROUTING_KEY"] for page in pages)
    assert len(posts) == sum(d.startswith("slack:") for _, d, _ in deliveries)
    assert len(pages) == sum(d.startswith("pagerduty") for _, d, _ in deliveries)
    # Findings went back to the collector with the configured headers.
    headers = json.loads(dot_env["HALLUWATCH_FINDINGS_OTLP_HEADERS"])
    assert all(r.headers["authorization"] == headers["authorization"] for r in collector.requests(LOGS_PATH))

    # Clean logs: no logging failure, no traceback for handled faults, no secret, each dead letter told.
    for name, path in outputs.items():
        lines = path.read_text(errors="replace").splitlines()
        for line in lines:
            assert "Logging error" not in line and "Traceback" not in line, f"{name}: {line}\n{tail(path)}"
            assert not [s for s in secret_values if s in line], f"{name} logs a secret: {line}"
    assert len(dead) == len(JUNK) + 1, [letter.key() for letter in dead]
    worker_log = outputs["worker"].read_text(errors="replace")
    for letter in dead:  # the log names each letter by its identity: topic, partition, offset
        assert f"dead-lettered {letter.key().decode()}: " in worker_log, letter.key()
