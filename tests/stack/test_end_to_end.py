"""The whole path on the real stack: SDK -> collector-contrib -> Apache Kafka -> two workers -> alerts, triage.

Phase one is steady traffic over both OTLP protocols (the example traces, their GenAI log
records, and an application under the official openai instrumentation), and the example
traces again through Rotel in each of its two Kafka formats, to the same topics. Phase two sends the
examples again while one worker is SIGKILLed (the group coordinator hands its partitions to
the other) and the broker is restarted (the collector's retry and the workers reconnect);
the killed worker then comes back. Every LLM call must be stored exactly once, every alert
the stored findings call for delivered exactly once, and nothing else stored.
"""

from __future__ import annotations

import json
import re
import signal
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.proto.trace.v1.trace_pb2 import TracesData

from pipeline.tools.example_traces.examples import EXAMPLES, LOG_EVENT_EXAMPLES
from tests.integration.compose_env import check_triage_service, local_environment, service_environment
from tests.integration.faults import (
    assert_alerts_match_findings,
    assert_stored_exactly_once,
    llm_span_ids,
    read_topic,
)
from tests.servers import PAGERDUTY_PATH, SLACK_POST_PATH, Request
from tests.stack.kafka import KafkaBroker
from tests.stack.topology import Stack, running_stack
from tests.stack.traffic import Protocol, run_instrumented_app, send_examples, span_count

pytestmark = pytest.mark.usefixtures("exported_model")

ALERTS_SQL = "SELECT trace_id, destination, status FROM {db}.alerts FINAL ORDER BY ALL"


@pytest.fixture
def stack(kafka: KafkaBroker, otelcol: Path, chdb_path: Path, model_cache_dir: Path, tmp_path: Path) -> Iterator[Stack]:
    with running_stack(kafka, otelcol, chdb_path, model_cache_dir, tmp_path) as running:
        yield running


def _calls(sent: dict[str, list[TracesData]]) -> dict[str, set[tuple[str, str]]]:
    return {path: set(llm_span_ids(traces)) for path, traces in sent.items()}


def _traces_named(request: Request, traces: set[str]) -> set[str]:
    return set(re.findall(r"[0-9a-f]{32}", json.dumps(request.body))) & traces


def _settled(stack: Stack, sent: dict[str, list[TracesData]]) -> bool:
    """Every record consumed, every call judged, every alert delivered and none added for 3 s."""
    judged = set(stack.query(f"SELECT DISTINCT trace_id, span_id FROM {stack.database}.findings"))
    # Per path (collector and protocol, Rotel and format): judged of sent, for the failure message.
    counts = {path: (len(calls & judged), len(calls)) for path, calls in _calls(sent).items()}
    stack.progress = ", ".join(f"{path} {done}/{total}" for path, (done, total) in counts.items())
    if any(done < total for done, total in counts.values()) or not stack.caught_up():
        return False
    before = stack.query(ALERTS_SQL.format(db=stack.database))
    time.sleep(3)
    after = stack.query(ALERTS_SQL.format(db=stack.database))
    return bool(after) and after == before and all(status == "delivered" for _, _, status in after)


@pytest.mark.timeout(1200)
def test_llm_calls_through_collector_and_kafka_stored_and_alerted_once(stack: Stack, tmp_path: Path):
    grpc, http = (f"127.0.0.1:{port}" for port in (stack.addresses.otlp_grpc_port, stack.addresses.otlp_http_port))
    # Phase one: steady traffic over both protocols, what each path carried kept apart.
    sent = {
        "otelcol grpc": send_examples(EXAMPLES, Protocol.GRPC, grpc),
        "otelcol http": send_examples(LOG_EVENT_EXAMPLES, Protocol.HTTP, http),
        "openai-v2 app, otelcol grpc": [run_instrumented_app(grpc, stack.local.llm_url, 3, tmp_path)],
    }
    # Rotel beside it, to the same topics: protobuf values, and JSON ones (a bare array of resources).
    for form, rotel in stack.rotel.items():
        sent[f"rotel {form}"] = send_examples(EXAMPLES, Protocol.HTTP, rotel.http_host_port)
    stack.wait("phase one settled", lambda: _settled(stack, sent), timeout=300)

    # Phase two: the examples again, while worker-2 is SIGKILLed and the broker restarts.
    second: list[TracesData] = []
    sender = threading.Thread(target=lambda: second.extend(send_examples(EXAMPLES, Protocol.HTTP, http)))
    sent["otelcol http, faults"] = second
    sender.start()
    stack.workers[1].stop(signal.SIGKILL)
    stack.faults.append("worker SIGKILL mid-stream")
    stack.kafka.stop()
    time.sleep(5)  # down for a while: the collector's sends fail and are retried
    stack.kafka.start()
    stack.faults.append("broker restart mid-stream")
    sender.join(timeout=120)
    assert not sender.is_alive()
    stack.wait("phase two judged by the surviving worker", lambda: _settled(stack, sent), timeout=300)
    stack.workers[1].start()
    stack.wait("worker-2 back in the group", stack.workers[1].healthy, timeout=240)
    stack.wait("all settled", lambda: _settled(stack, sent), timeout=120)
    for worker in stack.workers:
        assert worker.stop() == 0, worker.log.read_text()[-4000:]

    # Every LLM call stored once (non-LLM spans dropped), one finding per detector.
    everything = [trace for traces in sent.values() for trace in traces]
    stored = assert_stored_exactly_once(stack.query, stack.database, everything)
    assert span_count(everything) > stored.llm_spans_sent  # the HTTP roots, tools, retrievals: dropped
    # Exactly the alerts the stored findings call for, each delivered once to Slack and PagerDuty.
    alerts = read_topic(stack.kafka.bootstrap, stack.topic("kafka_alerts_topic"))
    alerted = assert_alerts_match_findings(stack.query, stack.database, alerts)
    deliveries = stack.query(ALERTS_SQL.format(db=stack.database))
    delivered = {trace for trace, _, _ in deliveries}
    assert alerted.expected_traces == alerted.traces == len(delivered) > 0
    posts, pages = stack.alerting.requests(SLACK_POST_PATH), stack.alerting.requests(PAGERDUTY_PATH)
    per_trace = Counter(trace for post in posts for trace in _traces_named(post, delivered))
    assert per_trace == Counter({trace: 1 for trace in delivered}), per_trace
    assert len(posts) == sum(d.startswith("slack:") for _, d, _ in deliveries)
    assert len(pages) == sum(d.startswith("pagerduty") for _, d, _ in deliveries)
    # The triage service, as compose runs it, lists the alerted traces and serves their pages.
    triage_env = local_environment(service_environment("triage", stack.dot_env), stack.local, stack.home)
    token = stack.dot_env["HALLUWATCH_UI__TOKEN"]
    check_triage_service(triage_env, token, delivered, tmp_path, tmp_path / "triage.log")
    print(stored, alerted, f"faults: {stack.faults}", sep="\n")
