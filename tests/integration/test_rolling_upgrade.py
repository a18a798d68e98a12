"""A rolling upgrade: the previous release's worker and this one in one consumer group, through rebalances.

The previous release is the commit this code was branched from, unpacked with ``git archive``
and run as a worker process of its own.  It starts alone, on a store it creates (its own
migrations) and fills; then the current worker joins its group (a rebalance: each takes
partitions of every topic, so each reads findings and alerts the other wrote) and migrates that
store under it; then the old worker leaves (another rebalance) and the current one drains the
rest.  Both write over HTTP to :class:`~tests.integration.faults.ClickHouseShim` (two processes
cannot open one embedded chDB).  Nothing may be dead-lettered, every call must be stored once,
and every alert the stored findings call for must reach Slack and PagerDuty exactly once.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import yaml
from clickhouse_connect.driver.client import Client
from confluent_kafka import Message
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from bench.baseline import code_tree
from pipeline.alerting.alert import Alert
from pipeline.stream.formats import FORMAT_HEADER, WRITE_FORMAT
from pipeline.tools.demo_broker import TansuBroker
from pipeline.tools.example_traces import mixed_traffic
from schemas import migrations
from tests.integration.faults import (
    ClickHouseShim,
    Query,
    assert_alerts_match_findings,
    assert_stored_exactly_once,
    keyed_messages,
    read_topic,
    records_in,
)
from tests.integration.support import WorkerProcess, alerting_worker_config, produce, wait_until_committed
from tests.servers import PAGERDUTY_PATH, SLACK_POST_PATH, AlertingServer

pytestmark = pytest.mark.usefixtures("exported_model")

# The last commit of the previous release: the one this branch started from.
PREVIOUS_RELEASE = "fda2dbb"
MESSAGES_DONE = "halluwatch_messages_done_total"
WORKER_READY = "halluwatch_worker_ready"
TRACES = 160  # half before the current worker joins, half after
PARTITIONS = "2"
# No digests: every alert is its own message, so each can be counted at the fake Slack.
ROUTES = {
    "page": {"pagerduty": True, "slack_channel": "#halluwatch-alerts", "max_per_minute": 10_000},
    "slack": {"slack_channel": "#halluwatch-alerts", "max_per_minute": 10_000},
}


@pytest.mark.timeout(420)
def test_previous_and_current_release_share_a_group_through_a_rolling_upgrade(
    tansu: TansuBroker, topic_prefix: str, tmp_path: Path, chdb_path: Path, clickhouse: tuple[Client, str]
) -> None:
    client, database = clickhouse

    def query(sql: str) -> list[tuple[object, ...]]:
        return [tuple(row) for row in client.query(sql).result_rows]

    traces = list(mixed_traffic(TRACES, spans_per_trace=4, llm_spans_per_trace=1, seed=41))
    messages = keyed_messages(traces)
    half = TRACES // 2
    with code_tree(PREVIOUS_RELEASE) as previous, AlertingServer() as server, ClickHouseShim(chdb_path, 30) as shim:
        config = tmp_path / "halluwatch.yaml"
        config.write_text(yaml.safe_dump(alerting_worker_config(server, alerting={"routes": ROUTES})))
        settings = {"clickhouse_dsn": shim.dsn, "clickhouse_database": database, "config": str(config),
                    "kafka_topic_partitions": PARTITIONS, "batch_max_messages": "10",
                    "batch_max_wait_seconds": "0.05"}  # fmt: skip
        old = WorkerProcess(tansu.bootstrap, topic_prefix, tmp_path / "old", **settings)
        old.code = previous
        new = WorkerProcess(tansu.bootstrap, topic_prefix, tmp_path / "new", **settings)
        admin = AdminClient({"bootstrap.servers": tansu.bootstrap})
        admin.create_topics([NewTopic(old.input_topic, int(PARTITIONS))])[old.input_topic].result(timeout=10)

        old.start()
        produce(tansu.bootstrap, old.input_topic, messages[:half])
        wait_until_committed(tansu.bootstrap, old.group, old.input_topic, half, timeout_seconds=150)
        old_versions = {int(path.name.split("_")[0]) for path in (previous / "schemas").glob("*.sql")}
        assert _applied(query, database) == old_versions, "the previous release created the store"
        stored_by_old = query(f"SELECT count() FROM {database}.llm_calls FINAL")[0][0]

        new.start()  # joins the group: a rebalance; migrates the store the old worker is writing to
        new.wait_for(WORKER_READY, 1, timeout_seconds=150)  # joined, partitions of every topic assigned
        produce(tansu.bootstrap, old.input_topic, messages[half:])
        new.wait_for(MESSAGES_DONE, 20, timeout_seconds=150)
        old.wait_for(MESSAGES_DONE, half + 1, timeout_seconds=60)  # the old one kept working beside it
        assert old.stop() == 0, old.log()  # the old one leaves: the current worker takes every partition
        wait_until_committed(tansu.bootstrap, new.group, new.input_topic, TRACES, timeout_seconds=150)
        findings = read_topic(tansu.bootstrap, new.findings_topic)
        wait_until_committed(tansu.bootstrap, new.group, new.findings_topic, records_in(findings), 90)
        alerts = read_topic(tansu.bootstrap, new.alerts_topic)
        wait_until_committed(tansu.bootstrap, new.group, new.alerts_topic, records_in(alerts), 90)
        assert new.stop() == 0, new.log()
        slack_posts, pages = server.requests(SLACK_POST_PATH), server.requests(PAGERDUTY_PATH)

    assert _applied(query, database) == {m.version for m in migrations()}, "migrations only added to it"
    assert stored_by_old > 0
    assert read_topic(tansu.bootstrap, new.dlq_topic, idle_seconds=1) == [], "nothing dead-lettered"
    assert read_topic(tansu.bootstrap, new.alerts_dlq_topic, idle_seconds=1) == []
    formats = _formats(findings)
    assert formats[None] > 0 and formats[str(WRITE_FORMAT).encode()] > 0, f"both releases wrote findings: {formats}"
    stored = assert_stored_exactly_once(query, database, traces)
    alerted = assert_alerts_match_findings(query, database, alerts)

    published = {alert.alert_id: alert for alert in (Alert.from_json(m.value() or b"") for m in alerts)}
    paged = Counter(str(request.body["dedup_key"]) for request in pages)  # type: ignore[index]
    assert paged == Counter(a for a, alert in published.items() if alert.route == "page"), "each page sent once"
    posted = Counter(trace for request in slack_posts for trace in {a.trace_id for a in published.values()}
                     if trace in str(request.body))  # fmt: skip
    assert posted == Counter(alert.trace_id for alert in published.values()), "each Slack alert sent once"
    print(f"\n[rolling upgrade] {stored}; {alerted}; findings messages by format {dict(formats)}, "
          f"alerts {dict(_formats(alerts))}; "
          f"{sum(paged.values())} pages, {len(slack_posts)} Slack posts")  # fmt: skip


def _formats(messages: list[Message]) -> Counter[bytes | None]:
    """How many of ``messages`` carry each format header value (None: none, as the previous release wrote)."""
    return Counter(dict(m.headers() or ()).get(FORMAT_HEADER) for m in messages)


def _applied(query: Query, database: str) -> set[int]:
    return {int(row[0]) for row in query(f"SELECT version FROM {database}.schema_migrations")}
