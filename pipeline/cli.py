"""The ``halluwatch`` command line.

Heavy modules (faust, chDB) are imported inside the commands that need them, so
``halluwatch --help`` and config errors answer instantly.
"""

from __future__ import annotations

import logging
from datetime import datetime
from pathlib import Path

import click

from pipeline.settings import ConfigError, Settings, load_settings

CONFIG_OPTION = click.option(
    "--config",
    "config_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="YAML settings file (default: $HALLUWATCH_CONFIG). HALLUWATCH_* variables override it.",
)


def _settings(config_path: Path | None) -> Settings:
    try:
        settings = load_settings(config_path)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from exc
    logging.basicConfig(
        level=settings.log_level.upper().replace("WARN", "WARNING"),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    return settings


@click.group()
@click.version_option(package_name="halluwatch")
def main() -> None:
    """Trace-layer hallucination detection: OTLP spans from Kafka -> detectors -> ClickHouse."""


@main.command()
@CONFIG_OPTION
def worker(config_path: Path | None) -> None:
    """Consume OTLP spans from Kafka, run the detectors, write findings (runs until SIGTERM).

    Reads HALLUWATCH_KAFKA_INPUT_TOPIC (default otlp_spans), writes ClickHouse tables
    llm_calls and findings, and the topics halluwatch.findings (key = trace id) and
    halluwatch.dlq (undecodable input, with the reason in headers).
    """
    from pipeline.runner import run_worker

    run_worker(_settings(config_path))


@main.command()
@CONFIG_OPTION
def migrate(config_path: Path | None) -> None:
    """Create the ClickHouse database and tables (idempotent; applies pending DDL only)."""
    from pipeline.storage import connect
    from pipeline.storage import migrate as apply_migrations

    settings = _settings(config_path)
    applied = apply_migrations(connect(settings.resolved_clickhouse_dsn), settings.clickhouse_database)
    where = f"{settings.resolved_clickhouse_dsn} database {settings.clickhouse_database}"
    click.echo(f"applied {', '.join(applied)} to {where}" if applied else f"{where} is up to date")


@main.command()
@CONFIG_OPTION
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--topic", help="Target topic (default: the worker's input topic).")
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
def replay(config_path: Path | None, path: Path, topic: str | None, encoding: str, unkeyed: bool) -> None:
    """Produce an OpenTelemetry Collector file-exporter file to Kafka.

    PATH holds JSON lines of OTLP/JSON or length-prefixed protobuf (format detected).
    By default each trace becomes one message keyed by its hex trace id, like the
    collector's kafka exporter with partition_traces_by_id: true.
    """
    from pipeline.otlp import Encoding
    from pipeline.replay import read_file
    from pipeline.replay import replay as produce

    settings = _settings(config_path)
    stats = produce(
        read_file(path),
        bootstrap=settings.kafka_bootstrap,
        topic=topic or settings.kafka_input_topic,
        encoding=Encoding(encoding),
        keyed=not unkeyed,
    )
    click.echo(f"produced {stats.messages} messages ({stats.spans} spans, {stats.bytes} bytes) in {stats.seconds:.1f}s")


@main.command()
@CONFIG_OPTION
@click.option(
    "--input",
    "input_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Trace file (collector file-exporter format) of labelled-good traffic.",
)
@click.option("--from-clickhouse", is_flag=True, help="Read llm_calls (with logprobs) from ClickHouse instead.")
@click.option("--since", type=click.DateTime(), help="With --from-clickhouse: only calls that started after this.")
@click.option("--output", "output_path", type=click.Path(dir_okay=False, path_type=Path), help="Baselines file.")
@click.option("--min-responses", type=click.IntRange(min=2), default=30, show_default=True)
def baseline(
    config_path: Path | None,
    input_path: Path | None,
    from_clickhouse: bool,
    since: datetime | None,
    output_path: Path | None,
    min_responses: int,
) -> None:
    """Compute per-model answer-entropy baselines for the confidence detector (SPEC §4.3).

    Writes a versioned YAML file (default DATA_DIR/baselines.yaml); point
    HALLUWATCH_BASELINES_FILE at it so workers load it at start.
    """
    from pipeline.baseline import BaselineError, run_baseline
    from pipeline.storage import connect

    if (input_path is None) == (not from_clickhouse):
        raise click.UsageError("give exactly one of --input PATH or --from-clickhouse")
    settings = _settings(config_path)
    output_path = output_path or settings.data_dir / "baselines.yaml"
    confidence = settings.detectors.confidence
    try:
        summary = run_baseline(
            output_path,
            input_path=input_path,
            client=connect(settings.resolved_clickhouse_dsn) if from_clickhouse else None,
            database=settings.clickhouse_database,
            since=since,
            top_k=confidence.top_k,
            min_tokens=confidence.min_tokens,
            min_responses=min_responses,
        )
    except BaselineError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(summary)
    click.echo(f"set HALLUWATCH_BASELINES_FILE={output_path} for the workers")


@main.command(name="eval")
@CONFIG_OPTION
@click.argument("input_path", metavar="INPUT.jsonl", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--output", "output_path", required=True, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--limit", type=click.IntRange(min=1), help="Score only the first N records.")
@click.option("--workers", type=click.IntRange(min=1), default=1, show_default=True, help="Processes.")
@click.option("--batch-size", type=click.IntRange(min=1), default=32, show_default=True)
def evaluate(
    config_path: Path | None, input_path: Path, output_path: Path, limit: int | None, workers: int, batch_size: int
) -> None:
    """Score labelled records offline with the worker's detectors; print P/R/F1/AUROC.

    INPUT.jsonl holds records {id, task, question, context, answer, hallucinated?, spans?}
    (the format of shared/data). OUTPUT gets one line per record: {id, score, hallucinated,
    detectors: {name: {score, flagged, status}}, spans: [{start, end, text, detector}]}.
    """
    import itertools

    from tqdm import tqdm

    from pipeline.agreement import AgreementRule
    from pipeline.evaluate import EvalInputError, evaluate, read_records, report

    settings = _settings(config_path)
    try:
        records = list(itertools.islice(read_records(input_path), limit))
    except EvalInputError as exc:
        raise click.ClickException(str(exc)) from exc
    outputs = []
    with open(output_path, "w", encoding="utf-8") as out:
        for output in tqdm(evaluate(records, settings, batch_size, workers), total=len(records), unit="rec"):
            out.write(output.to_json() + "\n")
            outputs.append(output)
    alerting = settings.alerting
    click.echo(report(records, outputs, AgreementRule(alerting.rules, alerting.window_seconds)))


@main.command()
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path(".halluwatch/demo"),
    show_default=True,
    help="Where the embedded ClickHouse and logs go (wiped at start).",
)
@click.option("--timeout", "timeout_seconds", default=120.0, show_default=True, help="Seconds to wait.")
def demo(data_dir: Path, timeout_seconds: float) -> None:
    """Run everything on this machine: embedded broker and ClickHouse, worker, example traces."""
    from pipeline.demo import run_demo

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    outcome = run_demo(data_dir, timeout_seconds)
    click.echo(outcome.summary)
    if not outcome.complete:
        raise click.ClickException(
            f"only {outcome.messages_done} of {outcome.messages_sent} messages were processed in time"
        )
    click.echo(f"\nAll {outcome.messages_sent} messages processed. Data kept in {data_dir}/clickhouse.")


if __name__ == "__main__":
    main()
