"""bench/brokers.py, the broker choice of bench/alerts.py and bench/ingest.py, without starting a broker."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.append(str(BENCH))  # after the repository: bench/detectors.py must not hide the detectors package

import alerts  # noqa: E402
import brokers  # noqa: E402

from tests.integration.support import WorkerProcess  # noqa: E402


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    brokers.add_broker_argument(parser)
    return parser.parse_args(argv)


def test_tansu_is_the_default_and_both_runs_tansu_then_kafka() -> None:
    assert parse().broker == "tansu"
    assert brokers.kinds(parse().broker) == ["tansu"]
    assert brokers.kinds(parse("--broker", "kafka").broker) == ["kafka"]
    assert brokers.kinds(parse("--broker", "both").broker) == ["tansu", "kafka"]
    with pytest.raises(SystemExit):
        parse("--broker", "redpanda")
    with pytest.raises(ValueError, match="redpanda"):
        brokers.kinds("redpanda")


@pytest.mark.parametrize(
    ("output", "major"),
    [
        ('openjdk version "17.0.15" 2025-04-15\nOpenJDK Runtime Environment', 17),
        ('openjdk version "21" 2023-09-19', 21),
        ('java version "1.8.0_292"', 8),
        ("no java here", None),
    ],
)
def test_java_major_version(output: str, major: int | None) -> None:
    assert brokers.java_major(output) == major


def test_kafka_without_java_is_one_line_and_starts_nothing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    problem = brokers.kafka_problem()
    assert problem is not None and "\n" not in problem and "Java 17" in problem
    with pytest.raises(SystemExit, match="Java 17"), brokers.started("kafka", tmp_path / "kafka"):
        pass
    assert not (tmp_path / "kafka").exists()


def test_the_input_topic_is_made_with_the_workers_partitions(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    made: list[tuple[str, str, int]] = []
    monkeypatch.setattr(brokers, "create_topic", lambda *args: made.append(args))
    worker = WorkerProcess("127.0.0.1:9", "bench", tmp_path)
    brokers.create_input_topic(worker)
    assert made == [("127.0.0.1:9", "bench-spans", int(worker.env["HALLUWATCH_KAFKA_TOPIC_PARTITIONS"]))]


def test_ratios_are_kafka_over_tansu_only_where_both_ran() -> None:
    assert brokers.kafka_over_tansu({"tansu": 2.0, "kafka": 1.0}) == 0.5
    assert brokers.kafka_over_tansu({"tansu": 2.0}) is None

    def run(end_to_end: list[float]) -> dict[str, object]:
        return {"stages": {"end to end": end_to_end}, "produce_seconds": [0.01], "spans_batch_seconds_mean": 0.03}

    tansu = alerts.summarize([run([2.0, 2.2]), run([1.8, 2.0, 2.4])])
    kafka = alerts.summarize([run([1.0]), run([1.0, 1.1])])
    assert tansu["stages"]["end to end"]["n"] == 5 and tansu["stages"]["end to end"]["p50"] == 2.0
    assert tansu["end_to_end_p50_per_run"] == [2.1, 2.0]
    assert alerts.ratios({"tansu": tansu, "kafka": kafka}) == {"end to end p50": 0.5}
    assert alerts.ratios({"kafka": kafka}) == {}


@pytest.mark.parametrize("script", ["alerts.py", "ingest.py"])
def test_both_benches_take_the_broker_choice(script: str) -> None:
    result = subprocess.run(
        [sys.executable, str(BENCH / script), "--help"], capture_output=True, text=True, timeout=120, check=True
    )
    assert "--broker {tansu,kafka,both}" in result.stdout


def test_broker_cpu_is_read_from_its_process_and_unknown_without_one() -> None:
    class Running:
        bootstrap = "127.0.0.1:9"
        process = subprocess.Popen([sys.executable, "-c", "sum(range(3_000_000))"])

    Running.process.wait(timeout=60)
    assert brokers.cpu_seconds(Running()) is None  # exited and reaped: nothing to read

    class Itself:
        bootstrap = "127.0.0.1:9"
        _process = type("P", (), {"pid": os.getpid()})()

    before = {"tansu": brokers.cpu_seconds(Itself())}
    sum(range(3_000_000))
    used = brokers.cpu_used({"tansu": Itself(), "kafka": Running()}, {**before, "kafka": 1.0})
    assert set(used) == {"tansu"} and used["tansu"] >= 0
