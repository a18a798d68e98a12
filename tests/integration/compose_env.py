"""halluwatch's services as infra/docker-compose.yml runs them, derived from the compose file itself.

A service's environment is the image's ``ENV`` (../Dockerfile), then the ``env_file`` (``.env``,
made from ``.env.example`` with its optional lines switched on), then the service's
``environment``, with ``${VAR}`` interpolated from ``.env`` as compose does. Only what names a
place inside the compose network or the container is replaced, by :data:`ADDRESSES`.
"""

from __future__ import annotations

import json
import re
import secrets
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import requests
import yaml

from pipeline.config.settings import Settings
from pipeline.tools.demo_broker import free_port
from tests.orphans import die_with_parent
from tests.servers import AlertingServer

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


def setting(env: Mapping[str, str], name: str) -> str:
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


def host_port(value: str, host: str, port: int) -> str:
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
    "HALLUWATCH_CLICKHOUSE_DSN": lambda value, local: host_port(value, "127.0.0.1", local.clickhouse_port),
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


def compose_file() -> dict[str, Any]:
    return yaml.safe_load((INFRA / "docker-compose.yml").read_text())


def interpolate(value: str, variables: Mapping[str, str]) -> str:
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


def dotenv(text: str) -> tuple[dict[str, str], dict[str, str]]:
    """The set lines of a .env file, and its commented-out ``# HALLUWATCH_...=value`` lines."""
    set_lines, optional = {}, {}
    for line in text.splitlines():
        if match := re.fullmatch(r"(\w+)=(.*)", line):
            set_lines[match[1]] = match[2]
        elif match := re.fullmatch(r"#\s*(HALLUWATCH_\w+)=(.*)", line):
            optional[match[1]] = match[2]
    return set_lines, optional


def dot_env_file() -> dict[str, str]:
    """infra/.env as a user makes it from .env.example: required values chosen, every option on."""
    required, optional = dotenv((INFRA / ".env.example").read_text())
    assert set(optional) == set(OPTIONAL), f"decide how this test sets {set(optional) ^ set(OPTIONAL)}"
    values = {name: REQUIRED[name]() if name in REQUIRED else value for name, value in required.items()}
    for name, value in optional.items():
        make = OPTIONAL[name]
        values[name] = value if make is AS_WRITTEN else make()
    return values


def image_environment() -> dict[str, str]:
    """The ``ENV`` lines of ../Dockerfile, the environment the image starts every process with."""
    text = (REPO / "Dockerfile").read_text().replace("\\\n", " ")
    pairs = [pair for line in text.splitlines() if line.startswith("ENV ") for pair in line[4:].split()]
    return dict(pair.split("=", 1) for pair in pairs)


def service_environment(service: str, dot_env: Mapping[str, str]) -> dict[str, str]:
    """What compose gives ``service``'s process: the image's ENV, then its env_file, then ``environment``.

    A name in ``environment`` without a value takes .env's value, or stays unset when .env has none.
    """
    compose = compose_file()
    spec = compose["services"][service]
    # Secret files would have to be fed as files too; compose uses none (yet).
    assert "secrets" not in spec and "secrets" not in compose, "mount the compose secrets into the test too"
    env_files = [entry["path"] if isinstance(entry, dict) else entry for entry in spec.get("env_file", [])]
    assert env_files in ([], [".env"]), f"env_file {env_files}: only .env (from .env.example) is reproduced"
    environment = {
        name: interpolate(str(value), dot_env) if value is not None else dot_env[name]
        for name, value in spec["environment"].items()
        if value is not None or name in dot_env
    }
    assert not any(name.endswith("_FILE") for name in environment), "a *_FILE variable: feed the file too"
    return {**image_environment(), **(dict(dot_env) if env_files else {}), **environment}


def local_environment(compose_env: Mapping[str, str], local: Local, home: Path) -> dict[str, str]:
    """``compose_env`` with the addresses of :data:`ADDRESSES` and :data:`ADDED`, and nothing else, changed."""
    env = {name: ADDRESSES[name](value, local) if name in ADDRESSES else value for name, value in compose_env.items()}
    env.update({name: make(local) for name, make in ADDED.items()})
    assert {name for name in compose_env if env[name] != compose_env[name]} <= ADDRESSES.keys()
    # The process's own needs: the console script on PATH (.venv/bin, as pip puts it on the
    # image's PATH), a HOME of its own; nothing of this test's environment leaks in.
    return {**env, "PATH": f"{HALLUWATCH.parent}:/usr/bin:/bin", "HOME": str(home)}


def start_halluwatch(args: list[str], env: Mapping[str, str], cwd: Path, output: Path) -> subprocess.Popen[bytes]:
    """``halluwatch ARGS`` as a compose service runs it: that environment only, started in ``cwd``."""
    with open(output, "wb") as log:
        command = [str(HALLUWATCH), *args]
        return subprocess.Popen(
            command, env=dict(env), cwd=cwd, stdout=log, stderr=subprocess.STDOUT, preexec_fn=die_with_parent
        )


def empty_dir(path: Path) -> Path:
    path.mkdir(parents=True)
    return path


def tail(log: Path) -> str:
    return log.read_text(errors="replace")[-6000:]


def check_triage_service(env: Mapping[str, str], token: str, alerted: set[str], tmp_path: Path, log: Path) -> None:
    """``halluwatch ui`` as the triage service runs it (its port moved here) lists and shows the alerted traces."""
    port = free_port()
    command = compose_file()["services"]["triage"]["command"]
    assert command[:2] == ["halluwatch", "ui"]
    moved = {"0.0.0.0": "127.0.0.1", "8642": str(port)}
    triage = start_halluwatch(
        [moved.get(part, part) for part in command[1:]], env, empty_dir(tmp_path / "triage-cwd"), log
    )
    bearer = {"Authorization": f"Bearer {token}"}
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                listed = requests.get(f"http://127.0.0.1:{port}/?alerted=1", headers=bearer, timeout=10)
                break
            except requests.ConnectionError:
                assert triage.poll() is None and time.monotonic() < deadline, tail(log)
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
