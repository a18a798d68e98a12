"""The commands that run or feed the stream: worker, migrate, replay."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import click

from pipeline.cli.group import CONFIG_OPTION, configured, main
from pipeline.cli.store import open_client


@main.command()
@CONFIG_OPTION
def worker(config_path: Path | None) -> None:
    """Consume OTLP spans from Kafka, run the detectors, write findings (runs until SIGTERM).

    Reads HALLUWATCH_KAFKA_INPUT_TOPIC (default otlp_spans), writes ClickHouse tables
    llm_calls and findings, and the topics halluwatch.findings (key = trace id) and
    halluwatch.dlq (undecodable input, with the reason in headers).
    """
    from pipeline.worker.runner import run_worker

    run_worker(configured(config_path))


@main.command()
@CONFIG_OPTION
def migrate(config_path: Path | None) -> None:
    """Create the ClickHouse database and tables (idempotent; applies pending DDL only)."""
    from pipeline.config.connections import redacted_dsn
    from pipeline.sinks.clickhouse import migrate as apply_migrations

    settings = configured(config_path)
    applied = apply_migrations(
        open_client(settings, create=True),
        settings.clickhouse_database,
        settings.retention,
        settings.clickhouse_cluster,
    )
    where = f"{redacted_dsn(settings.resolved_clickhouse_dsn)} database {settings.clickhouse_database}"
    click.echo(f"applied {', '.join(applied)} to {where}" if applied else f"{where} is up to date")


@main.command()
@CONFIG_OPTION
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--topic", help="Target topic (default: the worker's input topic, or logs topic with --logs).")
@click.option(
    "--encoding",
    type=click.Choice(["otlp_proto", "otlp_json"]),
    default="otlp_proto",
    show_default=True,
    help="Message value encoding, as the collector's kafka exporter 'encoding'.",
)
@click.option(
    "--unkeyed",
    is_flag=True,
    help="One unkeyed message per batch (collector without partition_traces_by_id).",
)
@click.option("--logs", is_flag=True, help="PATH is a logs pipeline's file (LogsData): one unkeyed message per batch.")
def replay(config_path: Path | None, path: Path, topic: str | None, encoding: str, unkeyed: bool, logs: bool) -> None:
    """Produce an OpenTelemetry Collector file-exporter file to Kafka.

    PATH holds JSON lines of OTLP/JSON or length-prefixed protobuf (format detected).
    By default each trace becomes one message keyed by its hex trace id, like the
    collector's kafka exporter with partition_traces_by_id: true.  With --logs, PATH
    holds log records (GenAI events carrying LLM content) for the logs topic.
    """
    from pipeline.ingest.otlp_traces import Encoding
    from pipeline.tools.replay import read_file, read_logs_file
    from pipeline.tools.replay import replay as produce

    settings = configured(config_path)
    stats = produce(
        read_logs_file(path) if logs else read_file(path),
        bootstrap=settings.kafka_bootstrap,
        config=settings.kafka_security.confluent_config(),
        topic=topic or (settings.kafka_logs_topic if logs else settings.kafka_input_topic),
        encoding=Encoding(encoding),
        keyed=not unkeyed,
    )
    counted = f"{stats.log_records} log records" if logs else f"{stats.spans} spans"
    click.echo(f"produced {stats.messages} messages ({counted}, {stats.bytes} bytes) in {stats.seconds:.1f}s")
    kept_from = datetime.now(UTC) - timedelta(days=settings.retention.days)
    if stats.oldest_span_ns is not None and stats.oldest_span_ns < kept_from.timestamp() * 1e9:
        oldest = datetime.fromtimestamp(stats.oldest_span_ns / 1e9, UTC).strftime("%Y-%m-%d")
        click.echo(f"warning: spans from {oldest} are older than retention.days ({settings.retention.days:g} days, "
                   "counted from each call's own time): they are stored, then dropped at the tables' next merge; "
                   "raise retention.days to keep history", err=True)  # fmt: skip
