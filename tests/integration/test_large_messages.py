"""Messages near the size limit, from the real SDK through Tansu and `halluwatch worker` (infra/README.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.config.settings import Settings
from pipeline.tools.demo_broker import TansuBroker
from tests.integration.support import WorkerProcess, consume_distinct, produce, trace_with_document

pytestmark = pytest.mark.usefixtures("exported_model")

MIB = 1024 * 1024


def test_messages_up_to_the_limit_are_stored_and_re_keyed(tansu: TansuBroker, topic_prefix: str, tmp_path: Path):
    limit = Settings().max_message_bytes
    near_limit = trace_with_document(limit - 64 * 1024)
    two_mib = [trace_with_document(2 * MIB) for _ in range(2)]  # each above aiokafka's 1 MiB default
    unkeyed = two_mib[0][1] + two_mib[1][1]  # one collector batch of both: re-keyed by the worker
    oversized = b"\n" * (limit + 1)
    worker = WorkerProcess(tansu.bootstrap, topic_prefix, tmp_path / "worker").start()
    try:
        messages = [(near_limit[0].encode(), near_limit[1]), (None, unkeyed), (b"big", oversized)]
        sent = produce(tansu.bootstrap, worker.input_topic, messages, max_message_bytes=limit + 128 * 1024)
        worker.wait_for("halluwatch_messages_done_total", sent + 2, timeout_seconds=180)
        # One per trace: a redelivered batch is re-keyed again, under the same keys.
        rekeyed = consume_distinct(tansu.bootstrap, worker.rekeyed_topic, expected=2, timeout_seconds=60)
        (dead,) = consume_distinct(tansu.bootstrap, worker.dlq_topic, expected=1, timeout_seconds=60)
    finally:
        assert worker.stop() == 0, worker.log()
    assert len(near_limit[1]) > limit - 128 * 1024
    assert sorted(m.key().decode() for m in rekeyed) == sorted(trace for trace, _ in two_mib)
    assert dict(dead.headers())["halluwatch.original_key"] == b"big"
    assert len(dead.value()) == limit + 1  # dead-lettered whole, not dropped
    assert b"exceeds max_message_bytes" in dict(dead.headers())["halluwatch.reason"]
    stored = worker.query("SELECT trace_id FROM halluwatch.llm_calls FINAL ORDER BY trace_id")
    assert sorted(row[0] for row in stored) == sorted([near_limit[0], *(trace for trace, _ in two_mib)])
