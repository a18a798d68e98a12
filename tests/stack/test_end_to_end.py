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

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipeline.tools.example_traces.examples import EXAMPLES, LOG_EVENT_EXAMPLES
from tests.integration.compose_env import check_triage_service, local_environment, service_environment
from tests.integration.faults import (
    assert_alerts_match_findings,
    assert_stored_exactly_once,
    read_topic,
)
from tests.servers import PAGERDUTY_PATH, SLACK_POST_PATH
from tests.stack.kafka import KafkaBroker
from tests.stack.summary import traces_named
from tests.stack.topology import Stack, running_stack
from tests.stack.traffic import Protocol, run_instrumented_app, send_examples, span_count

pytestmark = pytest.mark.usefixtures("exported_model")


@pytest.fixture
def stack(kafka: KafkaBroker, otelcol: Path, chdb_path: Path, model_cache_dir: Path, tmp_path: Path) -> Iterator[Stack]:
    with running_stack(kafka, otelcol, chdb_path, model_cache_dir, tmp_path) as running:
        yield running


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
    stack.wait("phase one settled", lambda: stack.settled(sent), timeout=300)

    # Phase two: the examples again, while worker-2 is SIGKILLed and the broker restarts.
    stack.through_faults(lambda: send_examples(EXAMPLES, Protocol.HTTP, http), sent)
    for worker in stack.workers:
        assert worker.stop() == 0, worker.log.read_text()[-4000:]

    # Every LLM call stored once (non-LLM spans dropped), one finding per detector.
    everything = [trace for traces in sent.values() for trace in traces]
    stored = assert_stored_exactly_once(stack.query, stack.database, everything)
    assert span_count(everything) > stored.llm_spans_sent  # the HTTP roots, tools, retrievals: dropped
    # Exactly the alerts the stored findings call for, each delivered once to Slack and PagerDuty.
    alerts = read_topic(stack.kafka.bootstrap, stack.topic("kafka_alerts_topic"))
    alerted = assert_alerts_match_findings(stack.query, stack.database, alerts)
    deliveries = stack.deliveries()
    delivered = {trace for trace, _, _ in deliveries}
    assert alerted.expected_traces == alerted.traces == len(delivered) > 0
    posts, pages = stack.alerting.requests(SLACK_POST_PATH), stack.alerting.requests(PAGERDUTY_PATH)
    per_trace = Counter(trace for post in posts for trace in traces_named(post, delivered))
    assert per_trace == Counter({trace: 1 for trace in delivered}), per_trace
    assert len(posts) == sum(d.startswith("slack:") for _, d, _ in deliveries)
    assert len(pages) == sum(d.startswith("pagerduty") for _, d, _ in deliveries)
    # The triage service, as compose runs it, lists the alerted traces and serves their pages.
    triage_env = local_environment(service_environment("triage", stack.dot_env), stack.local, stack.home)
    token = stack.dot_env["HALLUWATCH_UI__TOKEN"]
    check_triage_service(triage_env, token, delivered, tmp_path, tmp_path / "triage.log")
    print(stored, alerted, f"faults: {stack.faults}", sep="\n")
