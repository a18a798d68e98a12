"""``halluwatch demo``: the whole path on one machine, with nothing to install or configure.

Starts an embedded Tansu broker, migrates an embedded ClickHouse (chDB) under
``.halluwatch/demo``, runs the worker in this process, replays the built-in example
traces (plus one garbage message, to show the dead-letter path, and one call whose
content travels only in GenAI log records, to show the log join), waits until every
message is durably processed, every log-joined call judged and every alert routed, prints what the detectors found
and which traces alerted (no Slack or pager configured: alerts print to the log), writes
the HTML report (``halluwatch report``) next to the data, and stops cleanly.

Where the ``llm-test`` extra is installed, a local model (Gemma 3 270M on llama-cpp-python's
server, :mod:`pipeline.tools.local_model`) stands in for the application's own: the worker
escalates the most valuable uncertain call of the first minute to it, holds that call's decision
until the answer, and the summary shows what it said.  Otherwise the summary says how to turn
escalation on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
import yaml
from confluent_kafka import Producer

from detectors.verdict import NOT_HALLUCINATION_EVIDENCE
from pipeline.alerting.console import delivery_words
from pipeline.config.alerting import default_routes
from pipeline.config.data_dirs import writable_dir
from pipeline.config.settings import DATA_DIR_SETTINGS, Settings, load_settings
from pipeline.ingest.otlp_traces import Encoding
from pipeline.sinks.clickhouse import connect
from pipeline.tools.demo_broker import BROKER_LOG, TansuBroker
from pipeline.tools.erasure_reach import default_report
from pipeline.tools.example_traces import (
    EXAMPLE_OUTPUT_SCHEMAS,
    example_log_event_telemetry,
    example_registries,
    example_traces,
)
from pipeline.tools.kafka_clients import client_config
from pipeline.tools.local_model import MODEL_ALIAS, LlamaServer, assemble_model, missing_modules
from pipeline.tools.replay import Payload, ReplayStats, replay
from pipeline.tools.report import report_window, write_report
from pipeline.worker.app import PipelineWorker
from pipeline.worker.runner import faust_worker

logger = logging.getLogger(__name__)

GARBAGE_MESSAGE = b"\x00\xffthis is not an OTLP payload"
LOCAL_MODEL_LOG = "local-model.log"
JUDGE_DEADLINE_SECONDS = 300.0

# Two applications routed their own way (docs/operations.md, "Policies by application"): HR pages its own
# on-call, order extraction only ever posts to Slack; every other app keeps the default routes.
DEMO_ROUTES = {"hr-oncall": {"pagerduty": True, "slack_channel": "#hr-oncall"}}
DEMO_POLICIES = {
    "hr": {"match": {"service": "hr-assistant"}, "routes": {"page": "hr-oncall", "slack": "hr-oncall"}},
    "order-extraction": {"match": {"service": "order-intake"}, "routes": {"page": "slack"}},
}


@dataclass(frozen=True, slots=True)
class DemoOutcome:
    """What the demo saw, for the exit code and for tests."""

    messages_sent: int
    messages_done: int
    summary: str
    report_path: Path

    @property
    def complete(self) -> bool:
        """True when every replayed message was processed."""
        return self.messages_done >= self.messages_sent


def demo_settings(data_dir: Path, bootstrap: str, judge_url: str = "") -> Settings:
    """Embedded defaults, tuned for a single local worker (fast group joins).

    What outlives the run (the policies, routes and detectors' schemas and registries) goes to the
    data directory's ``settings.yaml``, which every command run with ``HALLUWATCH_DATA_DIR`` there
    reads (``policy explain``, ``doctor``, ``ui``); the broker's address, the timings and the
    local judge (``judge_url``: escalation to it on) do not.
    """
    kept = {
        "detectors": {
            "schema_violation": {"output_schemas": EXAMPLE_OUTPUT_SCHEMAS},
            "tool_facts": example_registries(),
        },
        "alerting": {
            "routes": {
                **{name: route.model_dump(exclude_defaults=True) for name, route in default_routes().items()},
                **DEMO_ROUTES,
            }
        },
        "policies": DEMO_POLICIES,
    }
    settings_file = data_dir / DATA_DIR_SETTINGS
    settings_file.write_text(
        f"# Written by `halluwatch demo`: its applications' settings.\n{yaml.safe_dump(kept, sort_keys=False)}",
        encoding="utf-8",
    )
    return load_settings(
        settings_file,
        data_dir=data_dir,
        kafka_bootstrap=bootstrap,
        kafka_topic_partitions=2,
        kafka_session_timeout_seconds=6.0,
        kafka_rebalance_timeout_seconds=3.0,
        kafka_heartbeat_interval_seconds=1.0,
        kafka_commit_interval_seconds=0.5,
        log_level="warn",
        **(_local_judge(judge_url) if judge_url else {}),
    )


def _local_judge(url: str) -> dict[str, Any]:
    """Escalation to the local model: one call a minute (the first minute's most valuable), answered in full.

    A CPU-served 270M model writes about ten tokens a second: short answers, a deadline of minutes.
    """
    return {
        "consistency": {
            "llm": {
                "base_url": url,
                "model": MODEL_ALIAS,
                "api_key": "local",
                "timeout_seconds": 300,
                "max_retries": 0,
            },
            "claims": {"max_tokens": 256},
        },
        "escalation": {
            "enabled": True,
            "deadline_seconds": JUDGE_DEADLINE_SECONDS,
            "release_check_seconds": 1.0,
            "weigh_share": 0.0,
            "budget": {"calls_per_minute": 1, "tokens_per_day": None},
        },
    }


def run_demo(data_dir: Path, timeout_seconds: float = 120.0, local_judge: bool | None = None) -> DemoOutcome:
    """Run the demo end to end; returns what happened (never leaves the broker or the local model running).

    ``local_judge``: escalate to the local model (None: when the llm-test extra is installed).
    """
    missing = missing_modules()
    if local_judge and missing:
        raise click.ClickException(
            f"--local-judge needs the llm-test extra ({', '.join(missing)} not installed): make .venv/.installed-llm"
        )
    shutil.rmtree(data_dir, ignore_errors=True)
    data_dir.mkdir(parents=True)
    with contextlib.ExitStack() as running:
        broker = running.enter_context(TansuBroker(log_path=data_dir / BROKER_LOG))
        judge_url = ""
        if local_judge or (local_judge is None and not missing):
            click.echo("the local model (llm-test extra) judges one uncertain call: this adds a minute or two")
            model = assemble_model(writable_dir(data_dir / "model", "the local model"))
            judge = running.enter_context(LlamaServer(model, data_dir / LOCAL_MODEL_LOG, chat_format="gemma"))
            judge_url, timeout_seconds = judge.base_url, timeout_seconds + JUDGE_DEADLINE_SECONDS
        settings = demo_settings(data_dir, broker.bootstrap, judge_url)
        pipeline_worker = PipelineWorker(settings)
        worker = faust_worker(pipeline_worker)
        outcome: list[DemoOutcome] = []
        stopping: list[asyncio.Future[None]] = []

        async def drive() -> None:
            try:
                outcome.append(await _replay_and_summarize(pipeline_worker, settings, timeout_seconds))
            finally:
                # Not awaited here: stopping the worker cancels this very task.
                stopping.append(asyncio.ensure_future(worker.stop()))

        pipeline_worker.app.task(drive)

        with contextlib.suppress(SystemExit):  # the faust worker always exits via SystemExit
            worker.execute_from_commandline()
    if not outcome:
        raise click.ClickException("the demo worker stopped before it finished; see the log above")
    return outcome[0]


async def _replay_and_summarize(
    pipeline_worker: PipelineWorker, settings: Settings, timeout_seconds: float
) -> DemoOutcome:
    loop = asyncio.get_running_loop()
    event_traces, event_logs = example_log_event_telemetry()
    traces = example_traces() + event_traces

    def send(payloads: Sequence[Payload], topic: str, keyed: bool) -> ReplayStats:
        return replay(
            payloads,
            bootstrap=settings.kafka_bootstrap,
            topic=topic,
            encoding=Encoding.OTLP_PROTO,
            keyed=keyed,
            progress=False,
        )

    stats = await loop.run_in_executor(None, send, traces, settings.kafka_input_topic, True)
    log_stats = await loop.run_in_executor(None, send, [event_logs], settings.kafka_logs_topic, False)
    await loop.run_in_executor(None, _send_garbage, settings)
    sent = stats.messages + 1
    click.echo(
        f"replayed {len(traces)} example traces ({stats.spans} spans), {log_stats.log_records} GenAI log "
        "records and 1 garbage message"
    )
    deadline = loop.time() + timeout_seconds
    while not _settled(pipeline_worker, sent, log_stats.messages) and loop.time() < deadline:
        await asyncio.sleep(0.2)
    summary = await loop.run_in_executor(None, summarize, settings)
    report_path = await loop.run_in_executor(None, _write_report, settings)
    return DemoOutcome(sent, pipeline_worker.messages_done, summary, report_path)


def _write_report(settings: Settings) -> Path:
    """The HTML report of the demo's ClickHouse (the example traces all started in the last minutes)."""
    client = connect(settings.resolved_clickhouse_dsn)
    path = default_report(settings.data_dir)
    return write_report(client, settings.clickhouse_database, report_window(hours=24), path)


def _settled(worker: PipelineWorker, sent: int, logs_sent: int) -> bool:
    """Every message processed, every call held (by the join, for the judge) let go, every finding seen and routed."""
    return (
        worker.messages_done >= sent
        and worker.log_join.logs_messages_done >= logs_sent
        and worker.log_join.calls_released >= worker.log_join.calls_held
        and worker.consistency.calls_judged >= worker.escalations_sent
        and worker.agreement.decisions_held == 0
        and worker.agreement.findings_seen >= worker.findings_published
        and worker.router.alerts_seen >= worker.agreement.alerts_published
    )


def _send_garbage(settings: Settings) -> None:
    producer = Producer(client_config(settings.kafka_bootstrap))
    producer.produce(settings.kafka_input_topic, GARBAGE_MESSAGE)
    producer.flush(10)


def summarize(settings: Settings) -> str:
    """A human summary of what is in ClickHouse: calls per convention, findings, flags."""
    client = connect(settings.resolved_clickhouse_dsn)
    db = settings.clickhouse_database
    lines = ["", "LLM calls by convention (and where their content and grounding text came from):"]
    for convention, source, sources_from, calls in client.query(
        f"SELECT convention, content_source, sources_from, count() FROM {db}.llm_calls FINAL "  # noqa: S608 - identifiers validated, values bound
        "GROUP BY convention, content_source, sources_from ORDER BY convention, content_source, sources_from"
    ).result_rows:
        lines.append(f"  {convention:<14} {calls:>3}  content: {source:<6}  grounding: {sources_from}")
    lines.append("Findings by detector (flagged / ok / skipped / error):")
    for detector, flagged, ok, skipped, errors in client.query(
        f"SELECT detector, countIf(flagged), countIf(status = 'ok' AND NOT flagged), countIf(status = 'skipped'), "  # noqa: S608 - identifiers validated, values bound
        f"countIf(status = 'error') FROM {db}.findings FINAL GROUP BY detector ORDER BY detector"
    ).result_rows:
        lines.append(f"  {detector:<18} {flagged} / {ok} / {skipped} / {errors}")
    lines.append("Flagged calls (p_hallucination at the list threshold, or a detector reporting a fact), and why:")
    for service, operation, trace_id, p, detector, summary in client.query(
        f"SELECT c.service, c.operation, c.trace_id, c.p_hallucination, f.detector, f.summary "  # noqa: S608 - identifiers validated, values bound
        f"FROM {db}.llm_calls AS c FINAL LEFT JOIN (SELECT trace_id, span_id, detector, summary FROM {db}.findings "
        f"FINAL WHERE flagged AND detector NOT IN {_not_evidence_sql()}) AS f USING (trace_id, span_id) "
        "WHERE c.flagged ORDER BY c.service, c.trace_id, f.detector"
    ).result_rows:
        probability = "p  -  " if p is None else f"p {p:.2f}"
        lines.append(f"  [{_where(service, operation)}] trace {trace_id[:12]}…  {probability}  {detector}: {summary}")
    lines.append("Application policies (`halluwatch policy explain --service NAME` shows one in full):")
    for name, policy in settings.policies.items():
        routes = ", ".join(f"{rule_route} -> {route}" for rule_route, route in policy.routes.items())
        lines.append(f"  {name}: {policy.match.describe()}; routes {routes}")
    lines.append("Alerts (two or more detectors agreed on the trace; the route is the app's policy's):")
    for service, operation, trace_id, rule, route, policy, detectors, status, destination in client.query(
        f"SELECT service, operation, trace_id, rule, route, policy, detectors, status, destination "  # noqa: S608 - identifiers validated, values bound
        f"FROM {db}.alerts FINAL ORDER BY service, trace_id, rule"
    ).result_rows:
        lines.append(
            f"  [{_where(service, operation)}] trace {trace_id[:12]}…  {rule} -> {route} "
            f"({delivery_words(status, destination)}) policy {policy}: " + " + ".join(detectors)
        )
    lines += _escalations(client, db, settings)
    lines.append("Flagged by one detector only (recorded, not alerted):")
    for service, operation, trace_id, detector, summary in client.query(
        f"SELECT service, operation, trace_id, any(detector), any(summary) FROM {db}.findings FINAL "  # noqa: S608 - identifiers validated, values bound
        f"WHERE flagged AND status = 'ok' AND detector NOT IN {_not_evidence_sql()} "
        "GROUP BY service, operation, trace_id HAVING uniqExact(detector) = 1 ORDER BY service, trace_id"
    ).result_rows:
        lines.append(f"  [{_where(service, operation)}] trace {trace_id[:12]}…  {detector}: {summary}")
    return "\n".join(lines)


def _escalations(client: Any, db: str, settings: Settings) -> list[str]:
    """The calls sent to the team's model and what it said, or how to turn that on."""
    if not settings.escalation.enabled:
        return [
            "Escalation to your own model: off here. A worker sends the calls the detectors are unsure of to your",
            "  LLM endpoint and holds their alert for its answer with HALLUWATCH_ESCALATION__ENABLED=true and",
            "  HALLUWATCH_CONSISTENCY__LLM__BASE_URL set (docs/verdict.md); the demo asks a local model",
            "  once the llm-test extra is installed (make .venv/.installed-llm).",
        ]
    lines = ["Escalated to your own model (why; what it said):"]
    for service, operation, trace_id, status, summary, judged in client.query(
        f"SELECT e.service, e.operation, e.trace_id, e.status, e.summary, j.summary FROM {db}.findings AS e FINAL "  # noqa: S608 - identifiers validated, values bound
        f"LEFT JOIN (SELECT trace_id, span_id, summary FROM {db}.findings FINAL WHERE detector = 'judge') AS j "
        "USING (trace_id, span_id) WHERE e.detector = 'escalation' ORDER BY e.service, e.trace_id"
    ).result_rows:
        said = judged or ("no answer by the deadline" if status == "ok" else "not asked")
        lines.append(f"  [{_where(service, operation)}] trace {trace_id[:12]}…  {summary}; judge: {said}")
    return lines


def _where(service: str, operation: str) -> str:
    return f"{service} {operation}" if operation else service


def _not_evidence_sql() -> str:
    return "(" + ", ".join(f"'{name}'" for name in sorted(NOT_HALLUCINATION_EVIDENCE)) + ")"
