"""The Kafka-protocol brokers the worker benches run on: embedded Tansu, or Apache Kafka from its jars.

``--broker tansu`` (the default) is the embedded Tansu broker of ``halluwatch demo`` and the
integration tests; ``--broker kafka`` is one Apache Kafka KRaft node set up as compose's kafka
service (``tests/stack/kafka.py``: the jars cached under ``~/.cache/halluwatch``, fetched with
Maven once, run on Java 17+); ``--broker both`` starts one of each and the bench alternates
them run for run, so that both sets of numbers come from the same run of the bench.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from tests.integration.support import WorkerProcess

TANSU, KAFKA = "tansu", "kafka"
KINDS = (TANSU, KAFKA)
BOTH = "both"
MIN_JAVA = 17


class Broker(Protocol):
    @property
    def bootstrap(self) -> str: ...


def add_broker_argument(parser: argparse.ArgumentParser) -> None:
    """``--broker tansu|kafka|both``, default tansu."""
    parser.add_argument(
        "--broker",
        choices=(*KINDS, BOTH),
        default=TANSU,
        help="the broker to run on; 'both' alternates Tansu and Apache Kafka run for run (default: tansu)",
    )


def kinds(choice: str) -> list[str]:
    """The brokers a ``--broker`` choice runs on, in the order each run takes them."""
    if choice == BOTH:
        return list(KINDS)
    if choice not in KINDS:
        raise ValueError(f"unknown broker {choice!r}; one of {', '.join((*KINDS, BOTH))}")
    return [choice]


def java_major(version_output: str) -> int | None:
    """The major version in ``java -version``'s output ('1.8.0_x' is 8), None when it names none."""
    match = re.search(r'version "(\d+)(?:\.(\d+))?', version_output)
    if match is None:
        return None
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major


def kafka_problem() -> str | None:
    """Why Apache Kafka cannot start here (one line), or None: Java 17+ on PATH."""
    java = shutil.which("java")
    if java is None:
        return f"--broker kafka needs Java {MIN_JAVA} or newer on PATH (`java` not found)"
    result = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30, check=False)
    major = java_major(result.stderr + result.stdout)
    if major is None or major < MIN_JAVA:
        return f"--broker kafka needs Java {MIN_JAVA} or newer; `{java} -version` says {major or 'no version'}"
    return None


def kafka_jars() -> Path:
    """The cached Apache Kafka jars (fetched with Maven, once, when there are none); SystemExit in one line."""
    from tests.stack.cache import CACHE_ROOT, MissingTool
    from tests.stack.kafka import kafka_jars as cached_jars

    try:
        return cached_jars()
    except (MissingTool, RuntimeError) as exc:
        raise SystemExit(f"--broker kafka: no Apache Kafka jars in {CACHE_ROOT} and none fetched: {exc}") from None


@contextlib.contextmanager
def started(kind: str, data_dir: Path) -> Iterator[Broker]:
    """A running broker of ``kind`` (its files, for Kafka, under ``data_dir``), stopped on exit."""
    if kind == TANSU:
        from pipeline.tools.demo_broker import TansuBroker

        with TansuBroker() as tansu:
            yield tansu
    elif kind == KAFKA:
        if (problem := kafka_problem()) is not None:
            raise SystemExit(problem)
        from tests.stack.kafka import KafkaBroker

        with KafkaBroker(kafka_jars(), data_dir) as kafka:
            yield kafka
    else:
        raise ValueError(f"unknown broker {kind!r}")


def start_all(stack: contextlib.ExitStack, choice: str, data_dir: Path) -> dict[str, Broker]:
    """Every broker of ``choice``, started on ``stack`` (Kafka's files under ``data_dir/kafka``)."""
    return {kind: stack.enter_context(started(kind, data_dir / kind)) for kind in kinds(choice)}


def create_topic(bootstrap: str, topic: str, partitions: int, timeout_seconds: float = 30) -> None:
    """Create ``topic`` with ``partitions`` partitions unless it exists.

    The benches produce to a worker's input topic before that worker has made it; a broker
    that creates topics on first write (Kafka, with compose's ``num.partitions`` 8) would
    otherwise give it a partition count other than the worker's.
    """
    admin = AdminClient({"bootstrap.servers": bootstrap})
    future = admin.create_topics([NewTopic(topic, num_partitions=partitions)])[topic]
    try:
        future.result(timeout=timeout_seconds)
    except KafkaException as exc:
        error = exc.args[0]
        if not (isinstance(error, KafkaError) and error.code() == KafkaError.TOPIC_ALREADY_EXISTS):
            raise


def create_input_topic(worker: WorkerProcess) -> None:
    """A worker's input topic, with the worker's partition count, before anything is produced to it."""
    create_topic(worker.env["HALLUWATCH_KAFKA_BOOTSTRAP"], worker.input_topic,
                 int(worker.env["HALLUWATCH_KAFKA_TOPIC_PARTITIONS"]))  # fmt: skip


def cpu_seconds(broker: Broker) -> float | None:
    """User + system CPU seconds the broker's process has used so far (Linux), None where unknown.

    ``KafkaBroker.process`` is the JVM itself and ``TansuBroker._process`` the Tansu binary: no
    shell between, so the process's own times are the broker's.
    """
    process = getattr(broker, "process", None) or getattr(broker, "_process", None)
    pid = getattr(process, "pid", None)
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    # After "pid (comm)": state is field 3, utime and stime fields 14 and 15, in clock ticks.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_used(started: dict[str, Broker], before: dict[str, float | None]) -> dict[str, float]:
    """CPU seconds each broker of ``started`` used since ``before`` (its :func:`cpu_seconds`), where known."""
    used = {}
    for kind, broker in started.items():
        now, then = cpu_seconds(broker), before.get(kind)
        if now is not None and then is not None:
            used[kind] = now - then
    return used


def kafka_over_tansu(medians: dict[str, float]) -> float | None:
    """Kafka's median over Tansu's, where both ran."""
    if TANSU in medians and KAFKA in medians and medians[TANSU]:
        return medians[KAFKA] / medians[TANSU]
    return None
