"""The topology of infra/docker-compose.yml started here: collector, Kafka, migrate, workers, triage.

Real: collector-contrib built from infra/collector/builder.yaml on infra/otel-collector.yaml,
Apache Kafka with the kafka service's settings, `halluwatch migrate` / `worker` / `ui` with the
compose file's environment (tests/integration/compose_env.py). Stand-ins: the HTTP shim over
chDB for the ClickHouse server, tests/servers.py's fakes for Slack and PagerDuty, and
tests/openai_server.py for the sampled detectors' LLM endpoint.
"""

from __future__ import annotations

import signal
import subprocess
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import clickhouse_connect
from confluent_kafka import Consumer, TopicPartition
from opentelemetry.proto.trace.v1.trace_pb2 import TracesData

from pipeline.alerting.alert import DeliveryStatus
from pipeline.tools.demo_broker import free_port
from tests.integration.compose_env import (
    Local,
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
from tests.integration.faults import PasswordClickHouseShim, llm_span_ids
from tests.openai_server import OpenAIServer
from tests.servers import AlertingServer
from tests.stack.collector import Addresses, CollectorProcess
from tests.stack.kafka import KafkaBroker
from tests.stack.rotel import RotelFormat, RotelProcess

Query = Callable[[str], list[tuple[Any, ...]]]
# Final outcomes of a delivery that reached its destination: alone, inside a digest (over the route's
# rate limit), or into an open incident.
SENT = {str(s) for s in (DeliveryStatus.DELIVERED, DeliveryStatus.DIGESTED, DeliveryStatus.GROUPED)}
REREAD_WARNING = "fetched records were never delivered"  # the dropped-records watchdog seeking back


@dataclass
class Worker:
    """One `halluwatch worker` process as the compose worker service runs it."""

    name: str
    env: dict[str, str]
    cwd: Path
    log: Path
    metrics_port: int
    process: subprocess.Popen[bytes] | None = None
    stopped: bool = True

    def start(self) -> None:
        self.process = start_halluwatch(["worker"], self.env, self.cwd, self.log)
        self.stopped = False

    def healthy(self) -> bool:
        url = f"http://127.0.0.1:{self.metrics_port}/healthz"
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                return bool(response.status == 200)
        except OSError:
            return False

    def rereads(self) -> list[str]:
        """The log lines of this worker's dropped-records watchdog re-reading a partition, so far."""
        lines = self.log.read_text(errors="replace").splitlines() if self.log.exists() else []
        return [line for line in lines if REREAD_WARNING in line]

    def stop(self, sig: int = signal.SIGTERM) -> int:
        assert self.process is not None
        self.stopped = True
        if self.process.poll() is None:
            self.process.send_signal(sig)
        return self.process.wait(timeout=90)


@dataclass
class Stack:
    """The running topology and what tests read of it."""

    kafka: KafkaBroker
    addresses: Addresses
    alerting: AlertingServer
    dot_env: dict[str, str]
    database: str
    query: Query
    workers: list[Worker]
    local: Local
    home: Path
    rotel: dict[RotelFormat, RotelProcess]
    faults: list[str] = field(default_factory=list)
    progress: str = ""  # what the last check of a wait saw, for its failure message

    def topic(self, name: str) -> str:
        return setting(self.workers[0].env, name)

    def wait(self, what: str, done: Callable[[], bool], timeout: float) -> None:
        """Wait for ``done``, failing early when a running worker exited."""
        deadline = time.monotonic() + timeout
        while not done():
            for worker in self.workers:
                exited = worker.process is not None and worker.process.poll() is not None
                assert worker.stopped or not exited, f"{worker.name} exited:\n{tail(worker.log)}"
            assert time.monotonic() < deadline, f"no {what} in {timeout:g}s ({self.progress}):\n" + "\n".join(
                f"--- {w.name}\n{tail(w.log)}" for w in self.workers
            )
            time.sleep(0.5)

    def settled(self, sent: Mapping[str, Sequence[TracesData]]) -> bool:
        """Every record consumed, every call sent judged, every alert delivered and none added for 3 s."""
        judged = set(self.query(f"SELECT DISTINCT trace_id, span_id FROM {self.database}.findings"))
        # Per path (collector and protocol, Rotel and format): judged of sent, for the failure message.
        counts = {path: (len(calls & judged), len(calls)) for path, calls in calls_by_path(sent).items()}
        self.progress = ", ".join(f"{path} {done}/{total}" for path, (done, total) in counts.items())
        if any(done < total for done, total in counts.values()) or not self.caught_up():
            return False
        before = self.deliveries()
        time.sleep(3)
        after = self.deliveries()
        return bool(after) and after == before and all(status in SENT for _, _, status in after)

    def deliveries(self) -> list[tuple[str, str, str]]:
        """(trace id, destination, status) of every alert the routers recorded."""
        sql = f"SELECT trace_id, destination, status FROM {self.database}.alerts FINAL ORDER BY ALL"
        return [(str(trace), str(destination), str(status)) for trace, destination, status in self.query(sql)]

    def through_faults(self, send: Callable[[], list[TracesData]], sent: dict[str, list[TracesData]]) -> None:
        """Run ``send`` while worker-2 is SIGKILLed and the broker restarts; settle; bring worker-2 back.

        What ``send`` sent goes into ``sent`` under "faults" before anything settles.
        """
        during: list[TracesData] = []
        sent["otelcol http, faults"] = during
        sender = threading.Thread(target=lambda: during.extend(send()))
        sender.start()
        self.workers[1].stop(signal.SIGKILL)
        self.faults.append("worker SIGKILL mid-stream")
        self.kafka.stop()
        time.sleep(5)  # down for a while: the collector's sends fail and are retried
        self.kafka.start()
        self.faults.append("broker restart mid-stream")
        sender.join(timeout=120)
        assert not sender.is_alive(), "the application's exports did not finish in 120 s"
        self.wait("the faults' traffic judged by the surviving worker", lambda: self.settled(sent), timeout=300)
        self.workers[1].start()
        self.wait("worker-2 back in the group", self.workers[1].healthy, timeout=240)
        self.wait("all settled", lambda: self.settled(sent), timeout=120)

    def caught_up(self, topic_settings: tuple[str, ...] = ("kafka_input_topic", "kafka_logs_topic")) -> bool:
        """The workers' group committed every record of the collector's topics (real Kafka's watermarks)."""
        group = setting(self.workers[0].env, "kafka_group_id")
        consumer = Consumer({"bootstrap.servers": self.kafka.bootstrap, "group.id": group, "enable.auto.commit": False})
        try:
            for name in topic_settings:
                topic = self.topic(name)
                metadata = consumer.list_topics(topic, timeout=10).topics[topic]
                partitions = [TopicPartition(topic, p) for p in metadata.partitions]
                committed = {tp.partition: tp.offset for tp in consumer.committed(partitions, timeout=10)}
                lag = sum(
                    max(consumer.get_watermark_offsets(tp, timeout=10)[1] - max(committed[tp.partition], 0), 0)
                    for tp in partitions
                )
                if lag:
                    self.progress = f"{topic}: {lag} records not committed by {group}"
                    return False
            return True
        finally:
            consumer.close()


def calls_by_path(sent: Mapping[str, Sequence[TracesData]]) -> dict[str, set[tuple[str, str]]]:
    """The LLM calls (trace id, span id) each path carried."""
    return {path: set(llm_span_ids(traces)) for path, traces in sent.items()}


@contextmanager
def running_stack(
    kafka: KafkaBroker,
    otelcol: Path,
    chdb_path: Path,
    model_cache: Path,
    tmp: Path,
    worker_settings: Mapping[str, str] | None = None,
) -> Iterator[Stack]:
    """Start the collector, Rotel in both formats, migrate, two workers; stop them on exit (not the broker).

    ``worker_settings``: variables set on top of the worker service's environment (none by default).
    """
    dot_env = dot_env_file()
    clickhouse = compose_file()["services"]["clickhouse"]["environment"]
    user, password = (interpolate(str(clickhouse[k]), dot_env) for k in ("CLICKHOUSE_USER", "CLICKHOUSE_PASSWORD"))
    # The triage pages' and the workers' users (infra/README.md), beside the administrator.
    others = {"halluwatch_ui": dot_env["CLICKHOUSE_UI_PASSWORD"],
              "halluwatch_worker": dot_env["CLICKHOUSE_WORKER_PASSWORD"]}  # fmt: skip
    with ExitStack() as stack:
        addresses = Addresses(kafka.bootstrap, free_port(), free_port(), free_port())
        stack.enter_context(CollectorProcess(otelcol, addresses, tmp / "collector.log"))
        shim = stack.enter_context(PasswordClickHouseShim(chdb_path, user, password, others))
        alerting = stack.enter_context(AlertingServer())
        llm = stack.enter_context(OpenAIServer(default_answer="The warranty lasts two years."))
        home = empty_dir(tmp / "home")

        def local(name: str, metrics_port: int) -> Local:
            return Local(kafka.bootstrap, shim.port, f"http://127.0.0.1:{addresses.otlp_http_port}", llm.base_url,
                         alerting, empty_dir(tmp / f"{name}-data"), model_cache, metrics_port)  # fmt: skip

        client = clickhouse_connect.get_client(dsn=shim.dsn_for(user, password))
        stack.callback(client.close)
        database = setting(service_environment("worker", dot_env), "clickhouse_database")
        client.command(f"DROP DATABASE IF EXISTS {database}")  # the session's chDB is shared
        stack.callback(client.command, f"DROP DATABASE IF EXISTS {database}")

        def query(sql: str) -> list[tuple[Any, ...]]:
            return [tuple(row) for row in client.query(sql).result_rows]

        migrate_env = local_environment(service_environment("migrate", dot_env), local("migrate", free_port()), home)
        migration = start_halluwatch(["migrate"], migrate_env, empty_dir(tmp / "migrate-cwd"), tmp / "migrate.log")
        assert migration.wait(timeout=120) == 0, tail(tmp / "migrate.log")
        workers = []
        for name in ("worker-1", "worker-2"):
            port = free_port()
            env = {
                **local_environment(service_environment("worker", dot_env), local(name, port), home),
                **(worker_settings or {}),
            }
            workers.append(Worker(name, env, empty_dir(tmp / f"{name}-cwd"), tmp / f"{name}.log", port))
        topics = [setting(workers[0].env, name) for name in ("kafka_input_topic", "kafka_logs_topic")]
        rotel = {form: stack.enter_context(RotelProcess(kafka.bootstrap, *topics, form, tmp)) for form in RotelFormat}
        result = Stack(kafka, addresses, alerting, dot_env, database, query, workers, local("triage", 0), home, rotel)
        for worker in workers:
            worker.start()
            stack.callback(lambda w=worker: w.process is not None and w.process.poll() is None and w.process.kill())
        result.wait("both workers in the group", lambda: all(w.healthy() for w in workers), timeout=240)
        yield result
