"""Rotel (``rotel`` on PyPI, a Rust OpenTelemetry collector), OTLP/HTTP in, its kafka exporter out.

Its two Kafka value formats: ``protobuf`` (``TracesData`` / ``LogsData``, as collector-contrib's
``otlp_proto``) and ``json``, which this release writes as a bare array of ``ResourceSpans`` /
``ResourceLogs``; the worker reads both (pipeline/ingest/otlp_traces.py).
"""

from __future__ import annotations

import socket
import subprocess
import time
from enum import StrEnum
from importlib import resources
from importlib.metadata import version as installed_version
from pathlib import Path
from types import TracebackType

from pipeline.tools.demo_broker import free_port
from tests.orphans import die_with_parent


class RotelFormat(StrEnum):
    PROTOBUF = "protobuf"
    JSON = "json"


def version() -> str:
    return installed_version("rotel")


class RotelProcess:
    """``rotel-agent start`` in the foreground, exporting traces and logs to the given topics."""

    def __init__(self, bootstrap: str, traces_topic: str, logs_topic: str, form: RotelFormat, tmp: Path) -> None:
        self.http_port, self.form, self.log_path = free_port(), form, tmp / f"rotel-{form}.log"
        agent = Path(str(resources.files("rotel") / "rotel-agent"))
        self.command = [
            str(agent), "start",
            "--otlp-http-endpoint", f"127.0.0.1:{self.http_port}",
            "--otlp-grpc-endpoint", f"127.0.0.1:{free_port()}",
            "--pid-file", str(tmp / f"rotel-{form}.pid"),
            "--exporter", "kafka",
            "--kafka-exporter-brokers", bootstrap,
            "--kafka-exporter-traces-topic", traces_topic,
            "--kafka-exporter-logs-topic", logs_topic,
            "--kafka-exporter-format", str(form),
        ]  # fmt: skip
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def http_host_port(self) -> str:
        return f"127.0.0.1:{self.http_port}"

    def __enter__(self) -> RotelProcess:
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                self.command, stdout=log, stderr=subprocess.STDOUT, preexec_fn=die_with_parent
            )
        deadline = time.monotonic() + 30
        while True:
            assert self.process.poll() is None, self.log_path.read_text(errors="replace")
            try:
                socket.create_connection(("127.0.0.1", self.http_port), timeout=1).close()
                return self
            except OSError:
                assert time.monotonic() < deadline, self.log_path.read_text(errors="replace")
                time.sleep(0.2)

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
