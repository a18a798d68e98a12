"""`replay` against the real Tansu broker of tests/conftest.py."""

from __future__ import annotations

import pytest
from opentelemetry.proto.trace.v1.trace_pb2 import TracesData

from pipeline.ingest.otlp_traces import Encoding, decode_traces, iter_spans
from pipeline.tools.example_traces import example_traces
from pipeline.tools.replay import replay
from tests.integration.support import consume_all


@pytest.fixture(scope="module")
def traces() -> list[TracesData]:
    return example_traces()


def batches(traces: list[TracesData], size: int) -> list[TracesData]:
    """Merge traces into mixed batches, as a collector without partition_traces_by_id sends them."""
    out = []
    for start in range(0, len(traces), size):
        batch = TracesData()
        for payload in traces[start : start + size]:
            batch.resource_spans.extend(payload.resource_spans)
        out.append(batch)
    return out


def spans_by_id(payloads: list[TracesData]) -> dict[bytes, bytes]:
    return {sc.span.span_id: sc.span.SerializeToString() for p in payloads for sc in iter_spans(p)}


@pytest.mark.parametrize("encoding", list(Encoding))
def test_replay_keyed_sends_one_message_per_trace_keyed_by_hex_id(tansu, topic_prefix, traces, encoding):
    topic = f"{topic_prefix}-spans"
    mixed = batches(traces, 4)
    stats = replay(mixed, bootstrap=tansu.bootstrap, topic=topic, encoding=encoding, keyed=True, progress=False)
    assert stats.messages == len(traces)
    assert stats.spans == sum(len(list(iter_spans(t))) for t in traces)
    messages = consume_all(tansu.bootstrap, topic, stats.messages)
    assert len(messages) == len(traces)
    assert sum(len(m.value()) for m in messages) == stats.bytes
    decoded = []
    for message in messages:
        payload = decode_traces(message.value(), encoding)
        assert {sc.trace_id for sc in iter_spans(payload)} == {message.key().decode()}
        decoded.append(payload)
    assert spans_by_id(decoded) == spans_by_id(traces)


def test_replay_unkeyed_sends_each_batch_as_one_message(tansu, topic_prefix, traces):
    topic = f"{topic_prefix}-spans"
    mixed = batches(traces, 4)
    stats = replay(
        mixed, bootstrap=tansu.bootstrap, topic=topic, encoding=Encoding.OTLP_JSON, keyed=False, progress=False
    )
    assert stats.messages == len(mixed)
    messages = consume_all(tansu.bootstrap, topic, stats.messages)
    assert all(m.key() is None for m in messages)
    received = sorted(decode_traces(m.value(), Encoding.OTLP_JSON).SerializeToString() for m in messages)
    assert received == sorted(b.SerializeToString() for b in mixed)
