"""librdkafka's own log, from real confluent-kafka clients against a closed port, goes through Python logging."""

from __future__ import annotations

import logging
import re
import time

import pytest
from confluent_kafka import KafkaException, Producer

from pipeline.ingest.otlp_traces import Encoding
from pipeline.tools.demo_broker import free_port
from pipeline.tools.example_traces import example_traces
from pipeline.tools.kafka_clients import LOGGER_NAME, LibrdkafkaLog
from pipeline.tools.replay import ReplayError, replay

REFUSED = "Connection refused"
AFTER = r"\(after \d+ms in state CONNECT\)"  # librdkafka's detail, its time varying


def _poll_for(producer: Producer, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        producer.poll(0.1)


def test_replay_to_a_closed_port_says_librdkafkas_reason_once_in_its_error_and_nothing_raw(capfd, caplog):
    caplog.set_level(logging.INFO)
    port = free_port()
    with pytest.raises(ReplayError, match="unreachable") as error:
        replay(example_traces()[:1], bootstrap=f"127.0.0.1:{port}", topic="spans", encoding=Encoding.OTLP_PROTO,
               keyed=True, progress=False, delivery_timeout_seconds=2)  # fmt: skip
    assert "|FAIL|" not in capfd.readouterr().err  # librdkafka printed nothing itself (%3|...|FAIL|rdkafka#...)
    # About 40 refused connections in 2 s: the reason is in the command's error, said once, and not logged beside it.
    assert [r for r in caplog.records if r.name == LOGGER_NAME and r.levelno >= logging.WARNING] == []
    assert re.search(
        rf"127.0.0.1:{port}/bootstrap: Connect to ipv4#127.0.0.1:{port} failed: {REFUSED}", str(error.value)
    )


def test_repeats_are_held_back_for_the_window_then_counted(caplog):
    caplog.set_level(logging.INFO)
    logger = logging.getLogger("test.librdkafka")
    producer = Producer({"bootstrap.servers": f"127.0.0.1:{free_port()}",
                         "logger": LibrdkafkaLog(logger, window_seconds=1.0)})  # fmt: skip
    for _ in range(2):  # each time, librdkafka logs dozens of refused connections, handed over at the poll
        with pytest.raises(KafkaException):
            producer.list_topics(timeout=1.5)
        producer.poll(0)
    first, second = [r.getMessage() for r in caplog.records if r.name == logger.name]
    assert REFUSED in first and "more like it" not in first
    counted = re.search(rf"{REFUSED} {AFTER} \[FAIL\] \((\d+) more like it in the last \ds\)$", second)
    assert counted and int(counted[1]) >= 5, second


def test_a_quiet_level_drops_them_all(caplog):
    caplog.set_level(logging.ERROR)
    producer = Producer({"bootstrap.servers": f"127.0.0.1:{free_port()}",
                         "logger": LibrdkafkaLog(logging.getLogger("test.quiet"))})  # fmt: skip
    with pytest.raises(KafkaException):
        producer.list_topics(timeout=1)
    _poll_for(producer, 0.2)
    assert not [r for r in caplog.records if r.name == "test.quiet"]
