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
import re
import secrets
import signal
import subprocess
import time
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import clickhouse_connect
import pytest
import requests
import yaml

from pipeline.config.settings import Settings
from pipeline.tools.demo_broker import TansuBroker, free_port
from pipeline.tools.example_traces import EXAMPLES, LOG_EVENT_EXAMPLES, example_log_event_telemetry, example_traces
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


REPO = Path(__file__).resolve().parents[2]
INFRA = REPO / "infra"
HALLUWATCH = REPO / ".venv" / "bin" / "halluwatch"  # the console script the image's `halluwatch` is
LOGS_PATH = "/v1/logs"

# The optional lines of .env.example ("# HALLUWATCH_...=..."), each switched on here: a
# secret placeholder ("..." in the file) gets a random value of the same shape, anything
# else is used as written.  A new optional line fails the test until it is listed.
AS_WRITTEN = None
OPTIONAL: dict[str, Callable[[], str] | None] = {
    "HALLUWATCH_ALERTING__SLACK_BOT_TOKEN": lambda: f"xoxb-{secrets.token_hex(12)}",
    "HALLUWATCH_ALERTING__PAGERDUTY_ROUTING_KEY": lambda: secrets.token_hex(16),
    "HALLUWATCH_ALERTING__TRACE_URL_TEMPLATE": AS_WRITTEN,
    "HALLUWATCH_FINDINGS_OTLP_ENDPOINT": AS_WRITTEN,
    "HALLUWATCH_FINDINGS_OTLP_HEADERS": lambda: json.dumps({"authorization": f"Bearer {secrets.token_hex(12)}"}),
    "HALLUWATCH_CONSISTENCY__ENABLED": AS_WRITTEN,
    "HALLUWATCH_CONSISTENCY__LLM__BASE_URL": AS_WRITTEN,
    "HALLUWATCH_CONSISTENCY__LLM__API_KEY": lambda: f"sk-{secrets.token_hex(12)}",
    "HALLUWATCH_CONTENT_MODE": AS_WRITTEN,
    "HALLUWATCH_CONTENT_HMAC_KEY": lambda: secrets.token_hex(16),
    "HALLUWATCH_UI__SLACK_SIGNING_SECRET": lambda: secrets.token_hex(16),
    "HALLUWATCH_UI__PAGERDUTY_WEBHOOK_SECRET": lambda: secrets.token_hex(16),
}
# The required lines' values are the user's to choose: random ones here.  The ClickHouse password
# goes into a URL (HALLUWATCH_CLICKHOUSE_DSN), so .env.example asks for URL-safe characters.
REQUIRED = {
    "CLICKHOUSE_PASSWORD": lambda: f"pw-{secrets.token_urlsafe(18)}.x~",
    "CLICKHOUSE_UI_PASSWORD": lambda: f"ui-{secrets.token_urlsafe(18)}.x~",
    "CLICKHOUSE_WORKER_PASSWORD": lambda: f"wk-{secrets.token_urlsafe(18)}.x~",
    "CLICKHOUSE_GRAFANA_PASSWORD": lambda: f"gf-{secrets.token_urlsafe(18)}.x~",
    "GRAFANA_ADMIN_PASSWORD": lambda: secrets.token_urlsafe(12),
    "HALLUWATCH_UI__TOKEN": lambda: secrets.token_hex(24),
    "HALLUWATCH_UI__SESSION_SECRET": lambda: secrets.token_hex(24),
}
# Variables whose values are secrets (given random values here): none may appear in any output.
SECRET_VARIABLES = {name for name, make in {**OPTIONAL, **REQUIRED}.items() if make is not AS_WRITTEN}


def _setting(env: Mapping[str, str], name: str) -> str:
    """A setting of the worker with environment ``env``: its variable, or the default when compose sets none."""
    return env.get(f"HALLUWATCH_{name.upper()}", str(Settings.model_construct().model_dump()[name]))


@dataclass(frozen=True)
class Local:
    """The processes here that stand in for the compose services."""

    bootstrap: str
    clickhouse_port: int
    collector_url: str
    llm_url: str
    alerting: AlertingServer
    data_dir: Path
    model_cache: Path
    metrics_port: int


def _host_port(value: str, host: str, port: int) -> str:
    """The URL ``value`` pointed at ``host:port`` instead, user and password kept."""
    parts = urlsplit(value)
    userinfo = parts.netloc.rpartition("@")[0]
    return urlunsplit(parts._replace(netloc=f"{userinfo}@{host}:{port}" if userinfo else f"{host}:{port}"))


# What the compose files name that does not exist here, and what stands in for it.  Hostnames
# of the compose network (kafka, clickhouse, otel-collector) and the LLM endpoint become the
# local stand-ins; the container's paths (volumes) become directories of this test, the
# models volume the session's export cache (a restart, not a first start: the export takes a
# minute); the metrics listener moves to loopback on a free port, as every test here listens.
ADDRESSES: dict[str, Callable[[str, Local], str]] = {
    "HALLUWATCH_KAFKA_BOOTSTRAP": lambda value, local: local.bootstrap,
    "HALLUWATCH_CLICKHOUSE_DSN": lambda value, local: _host_port(value, "127.0.0.1", local.clickhouse_port),
    "HALLUWATCH_FINDINGS_OTLP_ENDPOINT": lambda value, local: local.collector_url + urlsplit(value).path,
    "HALLUWATCH_CONSISTENCY__LLM__BASE_URL": lambda value, local: local.llm_url,
    "HALLUWATCH_DATA_DIR": lambda value, local: str(local.data_dir),
    "HALLUWATCH_MODEL_CACHE": lambda value, local: str(local.model_cache),
    "HALLUWATCH_METRICS_HOST": lambda value, local: "127.0.0.1",
    "HALLUWATCH_METRICS_PORT": lambda value, local: str(local.metrics_port),
}
# Addresses the files leave at their defaults on the internet (slack.com, events.pagerduty.com).
ADDED: dict[str, Callable[[Local], str]] = {
    "HALLUWATCH_ALERTING__SLACK_BASE_URL": lambda local: local.alerting.slack_base_url,
    "HALLUWATCH_ALERTING__PAGERDUTY_URL": lambda local: local.alerting.pagerduty_url,
}


def _compose() -> dict[str, Any]:
    return yaml.safe_load((INFRA / "docker-compose.yml").read_text())


def _interpolate(value: str, variables: Mapping[str, str]) -> str:
    """Compose's interpolation: ``$$``, ``${VAR}``, ``${VAR:-default}``, ``${VAR:?error}``."""

    def one(match: re.Match[str]) -> str:
        if match[0] == "$$":
            return "$"
        name, operator, argument = match["name"], match["op"], match["arg"] or ""
        present = variables.get(name, "")
        if operator == ":?" and not present:
            raise AssertionError(f"compose would refuse to start: {argument}")
        return present or (argument if operator == ":-" else "")

    return re.sub(r"\$\$|\$\{(?P<name>\w+)(?:(?P<op>:[-?])(?P<arg>[^}]*))?\}", one, value)


def _dotenv(text: str) -> tuple[dict[str, str], dict[str, str]]:
    """The set lines of a .env file, and its commented-out ``# HALLUWATCH_...=value`` lines."""
    set_lines, optional = {}, {}
    for line in text.splitlines():
        if match := re.fullmatch(r"(\w+)=(.*)", line):
            set_lines[match[1]] = match[2]
        elif match := re.fullmatch(r"#\s*(HALLUWATCH_\w+)=(.*)", line):
            optional[match[1]] = match[2]
    return set_lines, optional


def _dot_env_file() -> dict[str, str]:
    """infra/.env as a user makes it from .env.example: required values chosen, every option on."""
    required, optional = _dotenv((INFRA / ".env.example").read_text())
    assert set(optional) == set(OPTIONAL), f"decide how this test sets {set(optional) ^ set(OPTIONAL)}"
    values = {name: REQUIRED[name]() if name in REQUIRED else value for name, value in required.items()}
    for name, value in optional.items():
        make = OPTIONAL[name]
        values[name] = value if make is AS_WRITTEN else make()
    return values


def _image_environment() -> dict[str, str]:
    """The ``ENV`` lines of ../Dockerfile, the environment the image starts every process with."""
    text = (REPO / "Dockerfile").read_text().replace("\\\n", " ")
    pairs = [pair for line in text.splitlines() if line.startswith("ENV ") for pair in line[4:].split()]
    return dict(pair.split("=", 1) for pair in pairs)


def _service_environment(service: str, dot_env: Mapping[str, str]) -> dict[str, str]:
    """What compose gives ``service``'s process: the image's ENV, then its env_file, then ``environment``.

    A name in ``environment`` without a value takes .env's value, or stays unset when .env has none.
    """
    compose = _compose()
    spec = compose["services"][service]
    # Secret files would have to be fed as files too; compose uses none (yet).
    assert "secrets" not in spec and "secrets" not in compose, "mount the compose secrets into the test too"
    env_files = [entry["path"] if isinstance(entry, dict) else entry for entry in spec.get("env_file", [])]
    assert env_files in ([], [".env"]), f"env_file {env_files}: only .env (from .env.example) is reproduced"
    environment = {
        name: _interpolate(str(value), dot_env) if value is not None else dot_env[name]
        for name, value in spec["environment"].items()
        if value is not None or name in dot_env
    }
    assert not any(name.endswith("_FILE") for name in environment), "a *_FILE variable: feed the file too"
    return {**_image_environment(), **(dict(dot_env) if env_files else {}), **environment}


def _local_environment(compose_env: Mapping[str, str], local: Local, home: Path) -> dict[str, str]:
    """``compose_env`` with the addresses of :data:`ADDRESSES` and :data:`ADDED`, and nothing else, changed."""
    env = {name: ADDRESSES[name](value, local) if name in ADDRESSES else value for name, value in compose_env.items()}
    env.update({name: make(local) for name, make in ADDED.items()})
    assert {name for name in compose_env if env[name] != compose_env[name]} <= ADDRESSES.keys()
    # The process's own needs: the console script on PATH (.venv/bin, as pip puts it on the
    # image's PATH), a HOME of its own; nothing of this test's environment leaks in.
    return {**env, "PATH": f"{HALLUWATCH.parent}:/usr/bin:/bin", "HOME": str(home)}


def _start(args: list[str], env: Mapping[str, str], cwd: Path, output: Path) -> subprocess.Popen[bytes]:
    """``halluwatch ARGS`` as a compose service runs it: that environment only, started in ``cwd``."""
    with open(output, "wb") as log:
        return subprocess.Popen([str(HALLUWATCH), *args], env=dict(env), cwd=cwd, stdout=log, stderr=subprocess.STDOUT)


def _empty_dir(path: Path) -> Path:
    path.mkdir(parents=True)
    return path


def _otlp_ok(request: Request) -> Reply:
    """An OTLP/HTTP collector's answer: an empty ExportLogsServiceResponse."""
    return Reply(200, {"Content-Type": "application/x-protobuf"}, b"")


def _tail(log: Path) -> str:
    return log.read_text(errors="replace")[-6000:]


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
    kind, *command = _compose()["services"]["worker"]["healthcheck"]["test"]
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


def _check_triage_service(env: Mapping[str, str], token: str, alerted: set[str], tmp_path: Path, log: Path) -> None:
    """``halluwatch ui`` as the triage service runs it (its port moved here) lists and shows the alerted traces."""
    port = free_port()
    command = _compose()["services"]["triage"]["command"]
    assert command[:2] == ["halluwatch", "ui"]
    moved = {"0.0.0.0": "127.0.0.1", "8642": str(port)}
    triage = _start([moved.get(part, part) for part in command[1:]], env, _empty_dir(tmp_path / "triage-cwd"), log)
    bearer = {"Authorization": f"Bearer {token}"}
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                listed = requests.get(f"http://127.0.0.1:{port}/?alerted=1", headers=bearer, timeout=10)
                break
            except requests.ConnectionError:
                assert triage.poll() is None and time.monotonic() < deadline, _tail(log)
                time.sleep(0.3)
        assert listed.status_code == 200, listed.text[:2000]
        assert set(re.findall(r'href="/trace/([0-9a-f]{32})#', listed.text)) == alerted
        page = requests.get(f"http://127.0.0.1:{port}/trace/{min(alerted)}", headers=bearer, timeout=10)
        # .env turns content_mode=hash on (for the worker): the page says why it shows no text, and shows the findings.
        assert page.status_code == 200 and "stored as HMAC digests under content_mode=hash" in page.text
        assert 'class="findings"' in page.text and '<div class="answer">' not in page.text
        assert requests.get(f"http://127.0.0.1:{port}/", timeout=10, allow_redirects=False).status_code == 302
    finally:
        triage.terminate()
        triage.wait(timeout=30)


def test_worker_as_compose_runs_it(tmp_path: Path, chdb_path: Path, model_cache_dir: Path):
    dot_env = _dot_env_file()
    clickhouse = _compose()["services"]["clickhouse"]["environment"]
    user, password = (
        _interpolate(str(clickhouse[name]), dot_env) for name in ("CLICKHOUSE_USER", "CLICKHOUSE_PASSWORD")
    )
    secret_values = [part for name in SECRET_VARIABLES for part in _secret_parts(dot_env[name])]
    spans, (log_event_traces, logs) = example_traces(), example_log_event_telemetry()
    traces = [*spans, *log_event_traces]
    worker_compose_env = _service_environment("worker", dot_env)
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
                      _empty_dir(tmp_path / "worker-data"), model_cache_dir, free_port())  # fmt: skip
        home = _empty_dir(tmp_path / "home")
        client = clickhouse_connect.get_client(dsn=shim.dsn_for(user, password))
        stack.callback(client.close)
        database = _setting(worker_compose_env, "clickhouse_database")
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
        worker_env = _local_environment(worker_compose_env, local, home)
        doctor = _start(["doctor"], worker_env, _empty_dir(tmp_path / "doctor-cwd"), outputs["doctor"])
        assert doctor.wait(timeout=120) == 0, _tail(outputs["doctor"])
        assert "ok    slack: bot token accepted" in outputs["doctor"].read_text(), _tail(outputs["doctor"])
        # The migrate service: once, to completion, before the worker starts.  First with a password
        # ClickHouse refuses (a handled fault: one line, exit status 1), then as compose runs it.
        wrong = {**dot_env, "CLICKHOUSE_PASSWORD": REQUIRED["CLICKHOUSE_PASSWORD"]()}
        secret_values.append(wrong["CLICKHOUSE_PASSWORD"])
        for name, env in (("refused", wrong), ("migrate", dot_env)):
            migrate_env = _local_environment(_service_environment("migrate", env), local, home)
            migration = _start(["migrate"], migrate_env, _empty_dir(tmp_path / f"{name}-cwd"), outputs[name])
            assert migration.wait(timeout=120) == (1 if name == "refused" else 0), _tail(outputs[name])
        assert shim.refused > 0 and "AUTHENTICATION_FAILED" in outputs["refused"].read_text()
        refused = shim.refused

        worker = _start(["worker"], worker_env, _empty_dir(tmp_path / "worker-cwd"), outputs["worker"])
        stack.callback(lambda: worker.poll() is None and worker.kill())

        def wait(what: str, done: Callable[[], bool], timeout: float) -> None:
            deadline = time.monotonic() + timeout
            while not done():
                assert worker.poll() is None, f"worker exited ({worker.returncode}):\n{_tail(outputs['worker'])}"
                assert time.monotonic() < deadline, f"no {what} in {timeout:g}s:\n{_tail(outputs['worker'])}"
                time.sleep(0.5)

        # Traffic as the collector writes it: one message per trace keyed by its id, the GenAI
        # log records on the logs topic, and junk on both.
        spans_topic, logs_topic = (_setting(worker_env, name) for name in ("kafka_input_topic", "kafka_logs_topic"))
        max_bytes = int(_setting(worker_env, "max_message_bytes"))
        junk = [(None, value) for value in JUNK]
        sent = produce(broker.bootstrap, spans_topic, [*keyed_messages(traces), *junk], max_bytes)
        produce(broker.bootstrap, logs_topic, [(None, logs.SerializeToString()), junk[0]], max_bytes)
        group = _setting(worker_env, "kafka_group_id")
        wait("the input committed", lambda: committed_total(broker.bootstrap, group, spans_topic) >= sent, 300)
        calls = len(EXAMPLES) + len(LOG_EVENT_EXAMPLES)  # one LLM call each
        findings_sql = f"SELECT uniqExact(trace_id, span_id) FROM {database}.findings"
        wait("findings for every LLM call", lambda: query(findings_sql)[0][0] >= calls, timeout=120)
        wait("a Slack post", lambda: bool(alerting.requests(SLACK_POST_PATH)), timeout=120)
        wait("findings sent to the collector", lambda: bool(collector.requests(LOGS_PATH)), timeout=60)
        dlq_topic = _setting(worker_env, "kafka_dlq_topic")
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
        assert worker.wait(timeout=90) == 0, _tail(outputs["worker"])
        assert health.returncode == 0, health.stderr

        stored = _stored_exactly_once(query, database, calls)
        alerted = assert_alerts_match_findings(
            query, database, read_topic(broker.bootstrap, _setting(worker_env, "kafka_alerts_topic"))
        )
        # The triage service, as compose runs it, on what the worker stored (over HTTP, with the password).
        triage_env = _local_environment(_service_environment("triage", dot_env), local, home)
        assert urlsplit(triage_env["HALLUWATCH_CLICKHOUSE_DSN"]).username == ui_user
        alerted_traces = {trace for trace, _, _ in deliveries}
        _check_triage_service(triage_env, dot_env["HALLUWATCH_UI__TOKEN"], alerted_traces, tmp_path, outputs["triage"])
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
            assert "Logging error" not in line and "Traceback" not in line, f"{name}: {line}\n{_tail(path)}"
            assert not [s for s in secret_values if s in line], f"{name} logs a secret: {line}"
    assert len(dead) == len(JUNK) + 1, [letter.key() for letter in dead]
    worker_log = outputs["worker"].read_text(errors="replace")
    for letter in dead:  # the log names each letter by its identity: topic, partition, offset
        assert f"dead-lettered {letter.key().decode()}: " in worker_log, letter.key()
