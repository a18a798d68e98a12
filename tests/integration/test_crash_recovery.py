"""A worker stopped mid-stream, killed (SIGKILL) or asked to stop (SIGTERM), then restarted,
loses nothing and duplicates nothing."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from pipeline.tools.demo_broker import TansuBroker
from pipeline.tools.example_traces import mixed_traffic
from tests.integration.faults import assert_stored_exactly_once, keyed_messages
from tests.integration.support import WorkerProcess, committed_total, produce, wait_until_committed

# Worker and demo processes load the embedding model from the session's export cache.
pytestmark = pytest.mark.usefixtures("exported_model")

TRACES = 1500


@pytest.mark.parametrize(("stop_signal", "exit_code"), [(signal.SIGKILL, -signal.SIGKILL), (signal.SIGTERM, 0)])
def test_stop_mid_stream_and_restart(
    tansu: TansuBroker, topic_prefix: str, tmp_path: Path, stop_signal: int, exit_code: int
):
    traces = list(mixed_traffic(TRACES, spans_per_trace=5, llm_spans_per_trace=1, seed=7))
    messages = keyed_messages(traces)
    settings = {"batch_max_messages": "10", "batch_max_wait_seconds": "0.05"}
    first = WorkerProcess(tansu.bootstrap, topic_prefix, tmp_path / "worker", **settings).start()
    produce(tansu.bootstrap, first.input_topic, messages)
    first.wait_for("halluwatch_messages_done_total", TRACES // 5)
    assert first.stop(stop_signal) == exit_code
    lag_after_kill = TRACES - committed_total(tansu.bootstrap, first.group, first.input_topic)
    assert 0 < lag_after_kill < TRACES, "the kill must land mid-stream"

    second = WorkerProcess(tansu.bootstrap, topic_prefix, tmp_path / "worker", **settings).start()
    second.wait_for("halluwatch_messages_done_total", lag_after_kill)
    wait_until_committed(tansu.bootstrap, second.group, second.input_topic, TRACES)
    assert second.stop() == 0, second.log()

    assert_stored_exactly_once(second.query, "halluwatch", traces)
