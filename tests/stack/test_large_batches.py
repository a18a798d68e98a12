"""Batches longer than the consumer's session timeout, and messages over the workers' fetch size, on Apache Kafka.

Two traces of ten RAG calls, each prompt 190,000 characters of sources of its own, go through
the collector: every message is about 3.7 MB, over the 1 MiB a worker fetches per partition
(``kafka_max_fetch_bytes``), and encoding one trace's sources takes tens of seconds, several
times the session timeout. The workers run with the demo's 6 s session timeout (1 s
heartbeats) on top of the compose environment, so that a batch is certainly longer than it
without minutes of encoding. Beside them, produced straight to the collector's topic: a trace
64 KiB under ``max_message_bytes`` (the workers' own limit) and a message one byte over it.

Asserted: a batch took longer than the session timeout, and the broker's group coordinator
did not rebalance the group meanwhile (its log says so for every rebalance); every call is
stored once and each long trace alerted once; the message under the limit is stored; the one
over it is dead-lettered as too large, once.
"""

from __future__ import annotations

import re
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.proto.trace.v1.trace_pb2 import TracesData

from pipeline.config.settings import Settings
from tests.integration.compose_env import setting
from tests.integration.faults import assert_stored_exactly_once, llm_span_ids, read_topic
from tests.integration.support import produce, trace_with_document
from tests.servers import SLACK_POST_PATH
from tests.stack.kafka import KafkaBroker
from tests.stack.summary import traces_named
from tests.stack.topology import Stack, Worker, running_stack
from tests.stack.traffic import send_long_calls

pytestmark = pytest.mark.usefixtures("exported_model")

SESSION_TIMEOUT_SECONDS = 6
SHORT_SESSIONS = {
    "HALLUWATCH_KAFKA_SESSION_TIMEOUT_SECONDS": str(SESSION_TIMEOUT_SECONDS),
    "HALLUWATCH_KAFKA_HEARTBEAT_INTERVAL_SECONDS": "1",
}
# The next bucket of the batch-time histogram above the session timeout (prometheus_client's defaults).
OVER_TIMEOUT_BUCKET = "7.5"


@pytest.fixture
def stack(kafka: KafkaBroker, otelcol: Path, chdb_path: Path, model_cache_dir: Path, tmp_path: Path) -> Iterator[Stack]:
    with running_stack(kafka, otelcol, chdb_path, model_cache_dir, tmp_path, SHORT_SESSIONS) as running:
        yield running


def _batches_over_timeout(worker: Worker) -> int:
    """Batches of ``worker`` that took longer than the histogram bucket above the session timeout."""
    with urllib.request.urlopen(f"http://127.0.0.1:{worker.metrics_port}/metrics", timeout=5) as response:
        text = response.read().decode()
    bucket = dict(re.findall(r'^halluwatch_batch_seconds_bucket\{le="([^"]+)"\} ([0-9.e+]+)$', text, re.MULTILINE))
    return int(float(bucket["+Inf"]) - float(bucket[OVER_TIMEOUT_BUCKET]))


def _rebalances(kafka: KafkaBroker, group: str) -> int:
    """How often the group coordinator has begun a rebalance of ``group`` (its INFO line for each)."""
    return kafka.log_path.read_text(errors="replace").count(f"Preparing to rebalance group {group} ")


@pytest.mark.timeout(900)
def test_long_batches_and_large_messages_neither_rebalance_nor_repeat(stack: Stack):
    group = setting(stack.workers[0].env, "kafka_group_id")
    stack.wait("the group settled", lambda: stack.caught_up(), timeout=120)
    rebalances = _rebalances(stack.kafka, group)
    limit = Settings().max_message_bytes
    assert int(setting(stack.workers[0].env, "max_message_bytes")) == limit  # the compose file's, the default

    http = f"127.0.0.1:{stack.addresses.otlp_http_port}"
    sent = {"otelcol http, long calls": send_long_calls(http, traces=2, calls=10, chars=190_000, seed=7)}
    near_limit = trace_with_document(limit - 64 * 1024)
    oversized = b"\n" * (limit + 1)
    input_topic = stack.topic("kafka_input_topic")
    direct = [(near_limit[0].encode(), near_limit[1]), (b"oversized", oversized)]
    produce(stack.kafka.bootstrap, input_topic, direct, max_message_bytes=limit + 128 * 1024)
    sent["produced, near the limit"] = [TracesData.FromString(near_limit[1])]
    stack.wait("the long batches settled", lambda: stack.settled(sent), timeout=600)

    assert sum(_batches_over_timeout(worker) for worker in stack.workers) >= 1, "no batch outlasted the session"
    assert _rebalances(stack.kafka, group) == rebalances, stack.kafka.log()
    assert all(worker.healthy() for worker in stack.workers)
    for worker in stack.workers:
        assert worker.stop() == 0, worker.log.read_text()[-4000:]

    assert_stored_exactly_once(stack.query, stack.database, [t for traces in sent.values() for t in traces])
    long_traces = {trace for trace, _ in llm_span_ids(sent["otelcol http, long calls"])}
    posts = stack.alerting.requests(SLACK_POST_PATH)
    assert Counter(t for post in posts for t in traces_named(post, long_traces)) == Counter(
        dict.fromkeys(long_traces, 1)
    )
    letters = read_topic(stack.kafka.bootstrap, stack.topic("kafka_dlq_topic"))
    headers = [dict(letter.headers() or ()) for letter in letters]
    kinds = [(h.get("halluwatch.original_key"), h.get("halluwatch.reason_kind")) for h in headers]
    assert kinds == [(b"oversized", b"too_large")]
    assert len(letters[0].value() or b"") == limit + 1  # dead-lettered whole
