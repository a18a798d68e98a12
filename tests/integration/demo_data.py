"""The demo's data in a test's ClickHouse database, without a broker or a worker process.

The example traces `halluwatch demo` replays (plus its garbage message) go through the
worker's real batch processor and detectors with the demo's settings and application
policies (or a test's own: findings and alerts carry their policy); the rows are
written with the worker's row builders and the alerts decided by the real agreement
rule, delivered to the console destination as the demo does.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from clickhouse_connect.driver.client import Client

from detectors.thresholds import load_thresholds
from detectors.verdict import load_verdict_model
from pipeline.agreement.rules import AgreementRule
from pipeline.alerting.alert import DeliveryStatus
from pipeline.alerting.alert_row import alert_row
from pipeline.config.policy import AppPolicy
from pipeline.config.policy_book import PolicyBook
from pipeline.config.settings import Settings
from pipeline.sinks.clickhouse import ClickHouseSink, migrate
from pipeline.sinks.finding import Finding, findings_in_message, findings_messages
from pipeline.sinks.rows import finding_row, llm_call_row, tool_run_rows
from pipeline.spans.processor import BatchResult, InboundMessage, SpanBatchProcessor
from pipeline.spans.suite import suite_from_settings
from pipeline.tools.demo import GARBAGE_MESSAGE, demo_settings
from pipeline.tools.example_traces import example_traces


def fill_with_demo_data(
    client: Client, database: str, data_dir: Path, policies: Mapping[str, Mapping[str, Any]] | None = None
) -> None:
    """Process the demo's traces into ``database``, under ``policies`` (application policies) instead of the demo's."""
    settings = demo_settings(data_dir, "127.0.0.1:9")
    if policies is not None:
        own = {name: AppPolicy.model_validate(policy) for name, policy in policies.items()}
        settings = settings.model_copy(update={"policies": own})
    messages = [
        InboundMessage(key, value, "otlp_spans", 0, offset) for offset, (key, value) in enumerate(demo_messages())
    ]
    process_and_store(client, database, settings, lambda processor: processor.process(messages))


def process_and_store(
    client: Client, database: str, settings: Settings, run: Callable[[SpanBatchProcessor], BatchResult]
) -> None:
    """What ``run`` makes of the worker's processor under ``settings``, stored as the worker and router store it."""
    migrate(client, database)
    thresholds = load_thresholds(settings.thresholds_file, settings.detectors.embeddings.profile)
    book = PolicyBook(settings, thresholds)
    suite = suite_from_settings(settings, thresholds)
    suite.start()
    try:
        processor = SpanBatchProcessor(
            suite, thresholds.version, None, settings.max_message_bytes, settings.content_limits(), book,
            load_verdict_model(settings.detectors.verdict_model, settings.detectors.embeddings.profile),
        )  # fmt: skip
        result = run(processor)
    finally:
        suite.close()
    now = datetime.now(UTC)
    policies = settings.content_policies()
    sink = ClickHouseSink(client, database)
    sink.add("llm_calls", [llm_call_row(call, policies.llm_calls, now, result.judgement_of(call))
                           for call in result.llm_calls])  # fmt: skip
    sink.add("findings", [finding_row(record, now) for record in result.findings])
    sink.add("tool_runs", tool_run_rows(result.facts, policies.llm_calls, now))
    rule = AgreementRule.from_settings(settings.alerting, book)
    by_trace: dict[str, list[Finding]] = defaultdict(list)
    for _, value in findings_messages(result.findings):
        # As the agreement stage reads them: the messages the worker publishes on halluwatch.findings.
        for finding in findings_in_message(value):
            by_trace[finding.trace_id].append(finding)
    for findings in by_trace.values():
        alert = rule.apply(None, findings, time.time()).alert
        if alert is not None:
            sink.add("alerts", [alert_row(alert, "console", DeliveryStatus.DELIVERED, 1, "", now)])
    sink.flush()


def demo_messages() -> list[tuple[bytes | None, bytes]]:
    """What the demo produces: each example trace keyed by its hex trace id, then the garbage message."""
    keyed: list[tuple[bytes | None, bytes]] = [
        (trace.resource_spans[0].scope_spans[0].spans[0].trace_id.hex().encode(), trace.SerializeToString())
        for trace in example_traces()
    ]
    return [*keyed, (None, GARBAGE_MESSAGE)]
