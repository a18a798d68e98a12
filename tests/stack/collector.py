"""collector-contrib built with the OpenTelemetry Collector Builder, and run on infra/otel-collector.yaml.

The manifest (infra/collector/builder.yaml) names the version and exactly the components the
config uses; the binary is cached under a key of those, so it is rebuilt only when they change.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml

from tests.orphans import die_with_parent
from tests.stack.cache import built_once, cached, require, run_step, say

REPO = Path(__file__).resolve().parents[2]
MANIFEST = REPO / "infra" / "collector" / "builder.yaml"
CONFIG = REPO / "infra" / "otel-collector.yaml"
BUILDER_MODULE = "go.opentelemetry.io/collector/cmd/builder"
COMPOSE = REPO / "infra" / "docker-compose.yml"
COMPONENT_KINDS = ("receivers", "processors", "exporters", "extensions")


def manifest() -> dict[str, Any]:
    return dict(yaml.safe_load(MANIFEST.read_text()))


def version() -> str:
    """collector-contrib's version the manifest builds (the builder of the same release builds it)."""
    return str(manifest()["dist"]["version"])


def build_inputs() -> dict[str, Any]:
    """What the build depends on: the version and the components of the manifest."""
    spec = manifest()
    return {"version": spec["dist"]["version"], **{k: spec.get(k) for k in (*COMPONENT_KINDS, "providers")}}


def collector_binary() -> Path:
    """The built collector, building it first (minutes, once) when the cache has none for the manifest."""
    return built_once("otelcol", build_inputs(), _build) / manifest()["dist"]["name"]


def collector_cached() -> bool:
    return cached("otelcol", build_inputs()).is_dir()


def _build(out: Path) -> None:
    go = require("go", "the tests build collector-contrib with the OpenTelemetry Collector Builder (Go >= 1.23)")
    env = {**os.environ, "GOBIN": str(out / "tools"), "GOFLAGS": "-trimpath"}
    run_step([go, "install", f"{BUILDER_MODULE}@v{version()}"], env=env)
    spec = manifest()
    spec["dist"]["output_path"] = str(out / "src")
    build_manifest = out / "builder.yaml"
    build_manifest.write_text(yaml.safe_dump(spec))
    say("generating and compiling the collector (several minutes on two cores; go build -v lists packages)")
    run_step([str(out / "tools" / "builder"), f"--config={build_manifest}", "--ldflags=-s -w", "--verbose"], env=env)
    (out / "src" / spec["dist"]["name"]).rename(out / spec["dist"]["name"])


def validate(binary: Path, env: Mapping[str, str], config: Path = CONFIG) -> subprocess.CompletedProcess[str]:
    """The collector's own ``validate`` of ``config``, with ``env`` as its whole environment."""
    return subprocess.run(
        [str(binary), "validate", f"--config={config}"], env=dict(env), capture_output=True, text=True, timeout=60
    )


def components(binary: Path) -> dict[str, set[str]]:
    """The component types built into ``binary``, per kind (its ``components`` command)."""
    listed = yaml.safe_load(subprocess.run([str(binary), "components"], capture_output=True, check=True).stdout)
    return {kind: {entry["name"] for entry in listed.get(kind) or ()} for kind in COMPONENT_KINDS}


def used_components(config: Path = CONFIG) -> dict[str, set[str]]:
    """The component types ``config`` configures, per kind (``kafka/spans`` counts as ``kafka``)."""
    loaded = yaml.safe_load(config.read_text())
    return {kind: {name.split("/")[0] for name in loaded.get(kind) or {}} for kind in COMPONENT_KINDS}


@dataclass(frozen=True)
class Addresses:
    """Where the collector listens and sends here, in place of compose's network."""

    kafka_brokers: str
    otlp_grpc_port: int
    otlp_http_port: int
    health_port: int

    def environment(self) -> dict[str, str]:
        """The otel-collector service's environment of the compose file, its addresses moved here.

        Fails when the compose file and the config disagree on which variables there are.
        """
        moved = {
            "KAFKA_BROKERS": self.kafka_brokers,
            "OTLP_GRPC_ENDPOINT": f"127.0.0.1:{self.otlp_grpc_port}",
            "OTLP_HTTP_ENDPOINT": f"127.0.0.1:{self.otlp_http_port}",
            "HEALTH_CHECK_ENDPOINT": f"127.0.0.1:{self.health_port}",
        }
        compose = yaml.safe_load(COMPOSE.read_text())["services"]["otel-collector"]["environment"]
        read = set(re.findall(r"\$\{env:(\w+)", CONFIG.read_text()))
        assert set(compose) == read == set(moved), (sorted(compose), sorted(read), sorted(moved))
        return moved

    @property
    def health_url(self) -> str:
        return f"http://127.0.0.1:{self.health_port}/"


class CollectorProcess:
    """The built collector on infra/otel-collector.yaml, as a context manager; healthy once entered."""

    def __init__(self, binary: Path, addresses: Addresses, log_path: Path) -> None:
        self.binary, self.addresses, self.log_path = binary, addresses, log_path
        self.process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> CollectorProcess:
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [str(self.binary), f"--config={CONFIG}"],
                env=self.addresses.environment(),
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=die_with_parent,
            )
        deadline = time.monotonic() + 60
        while not self._healthy():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.__exit__(None, None, None)
                raise AssertionError(f"collector did not become healthy:\n{self.log()}")
            time.sleep(0.3)
        return self

    def _healthy(self) -> bool:
        try:
            with urllib.request.urlopen(self.addresses.health_url, timeout=2) as response:  # noqa: S310 - loopback URL
                return bool(response.status == 200)
        except OSError:
            return False

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-6000:]

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
