"""A worker stopped mid-stream, killed (SIGKILL) or asked to stop (SIGTERM), then restarted,
loses nothing and duplicates nothing."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from pipeline.broker import TansuBroker
from pipeline.examples import mixed_traffic
from tests.integration.support import WorkerProcess, committed_total, produce, wait_until_committed

# Worker and demo processes load the embedding model from the session's export cache.
pytestmark = pytest.mark.usefixtures("exported_model")

TRACES = 1500


@pytest.mark.parametrize(("stop_signal", "exit_code"), [(signal.SIGKILL, -signal.SIGKILL), (signal.SIGTERM, 0)])
def test_stop_mid_stream_and_restart(
    tansu: TansuBroker, topic_prefix: str, tmp_path: Path, stop_signal: int, exit_code: int
):
    traces = list(mixed_traffic(TRACES, spans_per_trace=5, llm_spans_per_trace=1, seed=7))
    messages = [
        (t.resource_spans[0].scope_spans[0].spans[0].trace_id.hex().encode(), t.SerializeToString()) for t in traces
    ]
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

    expected_calls = {(t.hex(), s.hex()) for t, s in _llm_span_ids(traces)}
    stored = set(second.query("SELECT trace_id, span_id FROM halluwatch.llm_calls FINAL"))
    assert stored == expected_calls  # nothing lost
    detectors = second.query("SELECT uniqExact(detector) FROM halluwatch.findings")[0][0]
    assert detectors >= 5  # one finding per detector per call, flagged or not
    for table, rows_per_call in (("llm_calls", 1), ("findings", detectors)):
        second.query(f"OPTIMIZE TABLE halluwatch.{table} FINAL")
        assert second.query(f"SELECT count() FROM halluwatch.{table}") == [(TRACES * rows_per_call,)]  # no duplicates


def _llm_span_ids(traces):
    for trace in traces:
        for resource_spans in trace.resource_spans:
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    if any(kv.key.startswith(("gen_ai.", "llm.", "openinference.")) for kv in span.attributes):
                        yield span.trace_id, span.span_id
