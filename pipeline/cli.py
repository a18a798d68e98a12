"""The ``halluwatch`` command line.

Heavy modules (faust, chDB) are imported inside the commands that need them, so
``halluwatch --help`` and config errors answer instantly.
"""

from __future__ import annotations

import getpass
import json
import logging
import os
import shlex
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_args

import click

from detectors.config import Profile
from pipeline.alerting.silences import MAX_DURATION, SELECTOR_KEYS, SilenceInputError
from pipeline.config.data_dirs import UnwritableDirectory, writable_dir
from pipeline.config.logs import configure_logging
from pipeline.config.secrets import install_scrubber, secret_values
from pipeline.config.settings import ENV_PREFIX, MODEL_CACHE_ENV, ConfigError, Settings, load_settings
from pipeline.words import counted

if TYPE_CHECKING:
    from clickhouse_connect.driver.client import Client

    from pipeline.alerting.silence_store import SilenceStore
    from pipeline.offline.scored_calls import LabelledScores
    from pipeline.rate.store import Scope
    from pipeline.sinks.clickhouse import EmbeddedInUse

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
    configure_logging(settings.log_level, settings.log_format)
    install_scrubber(secret_values(settings))  # client errors may quote a token or a DSN password
    return settings


class _Commands(click.Group):
    """The command group: what an operator must fix ends a command with one line and exit status 1.

    A store out of reach, a directory that cannot be written, an unusable record file
    (the message names file and line), a package of an extra not installed (the message
    names the extra) or an unusable silence selector or duration is not a bug to trace.
    """

    def invoke(self, ctx: click.Context) -> Any:
        from detectors.extras import MissingExtra
        from pipeline.offline.evaluate import EvalInputError
        from pipeline.sinks.clickhouse import ClickHouseUnreachable
        from pipeline.ui.serve import UnmigratedDatabase

        try:
            return super().invoke(ctx)
        except (
            ClickHouseUnreachable,
            UnwritableDirectory,
            EvalInputError,
            MissingExtra,
            UnmigratedDatabase,
            SilenceInputError,
        ) as exc:
            raise click.ClickException(str(exc)) from exc

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """Each command with its whole first sentence: click's default cuts them at 45 characters with "…"."""
        commands = [(name, self.get_command(ctx, name)) for name in self.list_commands(ctx)]
        rows = [(name, command.get_short_help_str(limit=_SUMMARY_CHARS)) for name, command in commands
                if command is not None and not command.hidden]  # fmt: skip
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


_SUMMARY_CHARS = 400  # longer than any command's first sentence: --help lists each whole


@click.group(cls=_Commands)
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
    from detectors.profiles import ProfileMismatch
    from pipeline.stream.dropped_records import FaustInternalsChanged
    from pipeline.worker.runner import run_worker

    try:
        run_worker(_settings(config_path))
    except (FaustInternalsChanged, ProfileMismatch) as exc:  # what to install or configure is the whole story
        raise click.ClickException(str(exc)) from exc


@main.command()
@CONFIG_OPTION
def migrate(config_path: Path | None) -> None:
    """Create the ClickHouse database and tables (idempotent; applies pending DDL only)."""
    from pipeline.config.connections import redacted_dsn
    from pipeline.sinks.clickhouse import migrate as apply_migrations

    settings = _settings(config_path)
    applied = apply_migrations(
        _open_client(settings), settings.clickhouse_database, settings.retention, settings.clickhouse_cluster
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
    from pipeline.tools.replay import ReplayError, TraceFileError, read_file, read_logs_file
    from pipeline.tools.replay import replay as produce

    settings = _settings(config_path)
    try:
        stats = produce(
            read_logs_file(path) if logs else read_file(path),
            bootstrap=settings.kafka_bootstrap,
            config=settings.kafka_security.confluent_config(),
            topic=topic or (settings.kafka_logs_topic if logs else settings.kafka_input_topic),
            encoding=Encoding(encoding),
            keyed=not unkeyed,
        )
    except (TraceFileError, ReplayError) as exc:  # the file or the broker to fix, said in one line
        raise click.ClickException(str(exc)) from exc
    counted = f"{stats.log_records} log records" if logs else f"{stats.spans} spans"
    click.echo(f"produced {stats.messages} messages ({counted}, {stats.bytes} bytes) in {stats.seconds:.1f}s")
    kept_from = datetime.now(UTC) - timedelta(days=settings.retention.days)
    if stats.oldest_span_ns is not None and stats.oldest_span_ns < kept_from.timestamp() * 1e9:
        oldest = datetime.fromtimestamp(stats.oldest_span_ns / 1e9, UTC).strftime("%Y-%m-%d")
        click.echo(f"warning: spans from {oldest} are older than retention.days ({settings.retention.days:g} days, "
                   "counted from each call's own time): they are stored, then dropped at the tables' next merge; "
                   "raise retention.days to keep history", err=True)  # fmt: skip


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
    """Compute per-model answer-entropy baselines for the confidence detector (docs/detectors.md).

    Writes a versioned YAML file (default DATA_DIR/baselines.yaml); point
    HALLUWATCH_BASELINES_FILE at it so workers load it at start.
    """
    from detectors.baselines import BaselineError
    from detectors.confidence import DETECTOR as CONFIDENCE
    from pipeline.offline.baseline import run_baseline

    if (input_path is None) == (not from_clickhouse):
        raise click.UsageError("give exactly one of --input PATH or --from-clickhouse")
    settings = _settings(config_path)
    output_path = output_path or settings.data_dir / "baselines.yaml"
    writable_dir(output_path.parent, "baselines")
    confidence = CONFIDENCE.config_in(settings.detectors)
    try:
        summary = run_baseline(
            output_path,
            input_path=input_path,
            client=_open_client(settings) if from_clickhouse else None,
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
    (the format of shared/data). OUTPUT gets one line per record, what the worker would do:
    {id, score, hallucinated, p_hallucination, alert: {rule, route} or null,
    detectors: {name: {score, flagged, status, severity, version}}, spans: [{start, end, text, detector}]}.
    The summary counts false alarms per route as a share of the faithful records.
    """
    import itertools

    from tqdm import tqdm

    from pipeline.offline.evaluate import evaluate, read_records, report

    settings = _settings(config_path)
    records = list(itertools.islice(read_records(input_path), limit))
    outputs = []
    writable_dir(output_path.parent, "eval output")
    with open(output_path, "w", encoding="utf-8") as out:
        for output in tqdm(evaluate(records, settings, batch_size, workers), total=len(records), unit="rec"):
            out.write(output.to_json() + "\n")
            outputs.append(output)
    click.echo(report(records, outputs))


@main.command()
@CONFIG_OPTION
@click.argument(
    "input_path", metavar="[INPUT.jsonl]", required=False, type=click.Path(exists=True, dir_okay=False, path_type=Path)
)
@click.option(
    "--output",
    "output_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Directory for the thresholds file and PNGs.",
)
@click.option(
    "--from-clickhouse", is_flag=True, help="Use the labels table joined to stored findings instead of INPUT."
)
@click.option("--since", type=click.DateTime(), help="With --from-clickhouse: only labels given after this.")
@click.option("--target-precision", type=click.FloatRange(0, 1, min_open=True), default=0.67, show_default=True)
@click.option("--cost-ratio", type=click.FloatRange(min=0, min_open=True), help="Choose tau* = 1/(1+λ(1-π)/π) instead.")
@click.option("--min-positives", type=click.IntRange(min=1), default=30, show_default=True)
@click.option("--holdout", type=click.FloatRange(0, 1, max_open=True), default=0.3, show_default=True)
@click.option(
    "--shrinkage", type=click.FloatRange(min=0), default=100.0, show_default=True,
    help="Labels a policy needs before its own thresholds weigh as much as the global ones.",
)  # fmt: skip
@click.option("--workers", type=click.IntRange(min=1), default=1, show_default=True, help="Processes scoring INPUT.")
@click.option("--app", help="Propose this application's map of p_hallucination from its review-queue verdicts.")
@click.option("--apply", "apply_version", metavar="VERSION",
              help="With --app: apply a stored proposal (or 'shipped': the shipped calibration alone).")  # fmt: skip
@click.option("--diff", "diff_paths", nargs=2, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Show what changed between two thresholds files (OLD NEW) and exit.")  # fmt: skip
def calibrate(
    config_path: Path | None,
    input_path: Path | None,
    output_dir: Path | None,
    from_clickhouse: bool,
    since: datetime | None,
    target_precision: float,
    cost_ratio: float | None,
    min_positives: int,
    holdout: float,
    shrinkage: float,
    workers: int,
    app: str | None,
    apply_version: str | None,
    diff_paths: tuple[Path, Path] | None,
) -> None:
    """Choose detector thresholds from labelled traces; write a versioned thresholds file and PR curves.

    INPUT.jsonl holds labelled records in the shared/data format (the detectors are run on
    them), or --from-clickhouse reads the labels table joined to the findings workers wrote.
    Each application policy with labels is also fitted alone and shrunk toward the global
    fit (--shrinkage). Point HALLUWATCH_THRESHOLDS_FILE at DIR/thresholds.yaml; workers log
    and stamp its version.

    With --app NAME: fit the application's map of p_hallucination and its route minimums from
    its review-queue verdicts, store it as a proposal and show what it changes; --apply VERSION
    makes a proposal the map the workers score the application's calls with (within
    review.map_refresh_seconds, no restart).
    """
    from detectors.thresholds import load_thresholds
    from detectors.verdict import PlattScaling
    from pipeline.agreement.rules import AgreementRule
    from pipeline.calibration.alert_probability import RouteTargets
    from pipeline.config.policy_book import PolicyBook
    from pipeline.offline.calibrate import CalibrationError, calibrate, diff_thresholds, write_thresholds
    from pipeline.offline.calibration_plots import write_plots
    from pipeline.offline.policy_calibration import calibrate_policies, describe, policies_document

    if diff_paths:
        click.echo(diff_thresholds(*diff_paths))
        return
    if app:
        _calibrate_app(_settings(config_path), app, apply_version)
        return
    if apply_version:
        raise click.UsageError("--apply needs --app NAME")
    if (input_path is None) == (not from_clickhouse) or output_dir is None:
        raise click.UsageError("give --output DIR and exactly one of INPUT.jsonl or --from-clickhouse")
    settings = _settings(config_path)
    labelled = _labelled_scores(settings, input_path, since, workers)
    current = load_thresholds(settings.thresholds_file, settings.detectors.embeddings.profile)
    rule = AgreementRule.from_settings(settings.alerting, PolicyBook(settings, current))
    try:
        result = calibrate(
            labelled, current, rule, target_precision=target_precision,
            cost_ratio=cost_ratio, min_positives=min_positives, holdout=holdout,
            routing=RouteTargets.from_settings(settings.alerting),
        )  # fmt: skip
    except CalibrationError as exc:
        raise click.ClickException(str(exc)) from exc
    targets = {name: p.target_precision for name, p in settings.policies.items() if p.target_precision}
    maps = {name: PlattScaling(*fitted) for name, fitted in current.recalibration.items()}
    groups = calibrate_policies(labelled, result, rule, shrinkage, targets, maps)
    writable_dir(output_dir, "calibration output")
    path = output_dir / "thresholds.yaml"
    models = {"embeddings": settings.detectors.embeddings.model, "profile": settings.detectors.embeddings.profile}
    version = write_thresholds(result, path, models=models, policies=policies_document(groups))
    pictures = write_plots(result, output_dir)
    click.echo(f"thresholds {version} from {len(labelled)} labelled records written to {path}")
    for d in result.detectors.values():
        click.echo(f"  {d.name:<18} {d.threshold:.4g}  ({d.chosen_by})")
    for m in result.alert_probability:
        held = f"; held out {m.held_out.false_alarm_rate:.1%} at recall {m.held_out.recall:.2f}" if m.held_out else ""
        click.echo(f"  route {m.route:<12} p_hallucination >= {m.min_probability:.3f}: false alarms "
                   f"{m.fitting.false_alarm_rate:.1%} of faithful (target {m.target:.0%}) at recall "
                   f"{m.fitting.recall:.2f}{held}")  # fmt: skip
    if not result.alert_probability:
        click.echo("  alert_probability: the labelled calls carry no p_hallucination; route minimums kept")
    if groups:
        click.echo(f"per policy (own fit shrunk toward the global one, w = n / (n + {shrinkage:g})):")
        for line in describe(groups):
            click.echo(line)
    click.echo(f"pictures: {', '.join(p.name for p in pictures)} in {output_dir}")
    click.echo(f"set HALLUWATCH_THRESHOLDS_FILE={path} for the workers")


def _calibrate_app(settings: Settings, app: str, apply_version: str | None) -> None:
    """``calibrate --app``: propose the application's map from its verdicts, or apply a stored one."""
    from pipeline.calibration.app_map import describe
    from pipeline.calibration.proposals import AppCalibration, NoVerdicts
    from pipeline.rate.maps import MapStore, UnknownVersion

    client = _migrated_client(settings)
    now = datetime.now(UTC)
    if apply_version:
        try:
            maps = MapStore(client, settings.clickhouse_database)
            applied = maps.apply(app, apply_version, now, "halluwatch calibrate")
        except UnknownVersion as exc:
            raise click.ClickException(str(exc)) from exc
        click.echo(f"applied {applied.version} to {app}: workers score its calls with it within "
                   f"{settings.review.map_refresh_seconds:g} s")  # fmt: skip
        return
    try:
        proposed = AppCalibration.configured(client, settings).propose(app, now, "halluwatch calibrate")
    except NoVerdicts as exc:
        raise click.ClickException(str(exc)) from exc
    proposal = proposed.proposal
    for line in describe(proposal, settings.escalation.enabled):
        click.echo(line)
    if proposed.applied:
        threshold = settings.review.auto_apply_after
        click.echo(f"applied {proposal.version} to {app} (review.auto_apply_after = {threshold})")
    else:
        if proposed.kept:
            click.echo(proposed.kept)
        click.echo(f"apply it with: halluwatch calibrate --app {app} --apply {proposal.version}")


@main.command()
@CONFIG_OPTION
@click.option("--data", "data_dir", required=True, type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="Folder with one sub-folder of JSONL records per set (the layout of shared/data).")  # fmt: skip
@click.option("--output-dir", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="For unsupported_spans.json and verdict.json (detectors/data: the built-in ones).")  # fmt: skip
@click.option("--limit", type=click.IntRange(min=1), help="Read only the first N records of each set (a quick try).")
@click.option("--workers", type=click.IntRange(min=1), default=2, show_default=True, help="Processes for the verdict.")
@click.option("--profile", type=click.Choice(get_args(Profile)),
              help="The embedding profile to train for (default: detectors.embeddings.profile).")  # fmt: skip
def train(
    config_path: Path | None, data_dir: Path, output_dir: Path, limit: int | None, workers: int, profile: Profile | None
) -> None:
    """Learn the unsupported_spans detector's models and eval's verdict model; write them as reviewable JSON.

    Trains only on sets whose licence allows shipping what is learned: RAGTruth spans for the
    word model; RAGTruth, BEGIN, FaithDial and WiCE labels for the call model; those and
    SummEdits for the verdict over every detector. The word and call models hold out 30 % of the
    source documents; the verdict, its calibration and the route minimums are cross-fitted over
    five document folds. Each file records the data's SHA-256, the seeds, the metrics of both
    sides (held out or out of fold, and in sample) and the embedding profile whose features it
    learned (a worker of another profile refuses it). Point
    detectors.unsupported_spans.model_path and detectors.verdict_model at the files, or rebuild
    the built-in ones with --output-dir detectors/data (--profile fast: detectors/data/fast).
    """
    import itertools

    import yaml
    from tqdm import tqdm

    from detectors.grounding import DETECTOR as GROUNDING
    from detectors.models.embeddings import Embedder
    from detectors.thresholds import load_thresholds
    from detectors.unsupported_spans import DETECTOR as UNSUPPORTED_SPANS
    from detectors.unsupported_spans.detector import UnsupportedSpansDetector
    from pipeline.calibration.alert_probability import RouteTargets
    from pipeline.offline import train as training
    from pipeline.offline.evaluate import evaluate

    settings = _settings(config_path)
    detectors = settings.detectors
    if profile is not None:
        detectors.embeddings = detectors.embeddings.for_profile(profile)
    trained_for = {"profile": detectors.embeddings.profile}
    try:
        files = training.data_files(data_dir, training.VERDICT_SETS)
    except FileNotFoundError as exc:
        raise click.ClickException(str(exc)) from exc
    writable_dir(output_dir, "model output")
    support_files = {name: files[name] for name in training.TRAINING_SETS}
    detector = UnsupportedSpansDetector(
        UNSUPPORTED_SPANS.config_in(detectors),
        0.5,
        Embedder(detectors.embeddings),
        language=GROUNDING.config_in(detectors).language,
    )
    rows = training.extract(detector, support_files, limit, lambda r, total: tqdm(r, total=total, unit="rec"))
    try:
        report = training.train(rows, training.describe_data(support_files, rows), detectors.embeddings.profile)
    except training.TrainingDataError as exc:
        raise click.ClickException(str(exc)) from exc
    support_path = output_dir / "unsupported_spans.json"
    _write_json(support_path, {**report.to_dict(), **trained_for})
    click.echo(f"unsupported_spans model {report.model.version} written to {support_path}")
    _echo_metrics(report.metrics)

    records = training.labelled_records(files, limit)
    with_model = training.with_support_model(settings, support_path)
    # Set by set, in file order: batched as `halluwatch eval` batches one file, so that the verdict's
    # probabilities here are those eval and bench/quality.py report (the model pads per batch).
    scoring = itertools.chain.from_iterable(
        evaluate([r for n, r in records if n == name], with_model, workers=workers, learned_verdict=False)
        for name in files
    )
    outputs = list(tqdm(scoring, total=len(records), unit="rec"))  # records are grouped by set, in file order
    thresholds = load_thresholds(settings.thresholds_file, settings.detectors.embeddings.profile)
    try:
        verdict = training.train_verdict(
            records, outputs, thresholds.by_detector, RouteTargets.from_settings(settings.alerting)
        )
    except training.TrainingDataError as exc:
        raise click.ClickException(str(exc)) from exc
    data = {name: {"file": path.name, "sha256": training.file_sha256(path)} for name, path in files.items()}
    verdict_path = output_dir / "verdict.json"
    _write_json(verdict_path, {**training.verdict_file(verdict, data), **trained_for})
    click.echo(f"verdict model {verdict.verdict.version} written to {verdict_path}")
    _echo_metrics(verdict.metrics)
    click.echo("alert_probability (copy into your thresholds file; the built-in one carries the built-in model's):")
    alert_probability = training.alert_probability(verdict.minimums)
    click.echo(yaml.safe_dump({"alert_probability": alert_probability}, sort_keys=False).rstrip())


def _write_json(path: Path, document: dict[str, Any]) -> None:
    path.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")


def _echo_metrics(metrics: dict[str, Any]) -> None:
    for name, sides in metrics.items():
        shown = {side: {key: v for key, v in values.items() if key != "reliability"} for side, values in sides.items()}
        click.echo(f"  {name:<16} " + "  ".join(f"{side}: {json.dumps(values)}" for side, values in shown.items()))


def _labelled_scores(
    settings: Settings, input_path: Path | None, since: datetime | None, workers: int
) -> list[LabelledScores]:
    """Scores of labelled calls: the detectors run on INPUT, or the stored findings of labelled calls.

    Each carries its application policy: the one its findings name, or for INPUT records the
    one their call (service ``eval``, operation = the record's task) selects.
    """
    if input_path is None:
        from pipeline.offline.human_labels import labelled_scores_from_clickhouse

        client = _open_client(settings)
        return labelled_scores_from_clickhouse(client, settings.clickhouse_database, since)
    from tqdm import tqdm

    from detectors.thresholds import load_thresholds
    from pipeline.config.policy_book import PolicyBook
    from pipeline.offline.calibrate import labelled_from_eval
    from pipeline.offline.evaluate import evaluate, read_records, record_to_call

    records = list(read_records(input_path))
    outputs = list(tqdm(evaluate(records, settings, workers=workers), total=len(records), unit="rec"))
    policies = PolicyBook(settings, load_thresholds(settings.thresholds_file, settings.detectors.embeddings.profile))
    return labelled_from_eval(records, outputs, lambda record: policies.for_call(record_to_call(record)).name)


@main.group(cls=_Commands)
def label() -> None:
    """Labelling helpers: export findings for people to label, import their labels."""


@label.command(name="export")
@CONFIG_OPTION
@click.option("--output", "output_path", required=True, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--limit", type=click.IntRange(min=1), default=200, show_default=True)
@click.option("--since", type=click.DateTime(), help="Only calls that started after this.")
@click.option("--seed", type=int, default=0, show_default=True, help="Same seed, same sample.")
def label_export(config_path: Path | None, output_path: Path, limit: int, since: datetime | None, seed: int) -> None:
    """Write a sample of recent LLM calls with findings, stratified by score, as JSONL to label.

    Fill each line's "label" with true/false (or "hallucinated"/"ok") and feed the file to
    `halluwatch label import`.
    """
    from pipeline.offline.human_labels import export_for_labelling

    settings = _settings(config_path)
    client = _migrated_client(settings)
    count = export_for_labelling(client, settings.clickhouse_database, output_path, limit=limit, since=since, seed=seed)
    click.echo(f"wrote {count} calls to label to {output_path}")


@label.command(name="import")
@CONFIG_OPTION
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--labeller", default="unknown", show_default=True, help="For lines that do not name one.")
def label_import(config_path: Path | None, path: Path, labeller: str) -> None:
    """Load a labelled JSONL file into the ClickHouse labels table (idempotent)."""
    from pipeline.offline.human_labels import LabelFileError, read_label_file
    from pipeline.sinks.labels import insert_labels

    settings = _settings(config_path)
    try:
        labels = read_label_file(path, labeller)
    except LabelFileError as exc:
        raise click.ClickException(str(exc)) from exc
    client = _migrated_client(settings)
    count = insert_labels(client, settings.clickhouse_database, labels.labels, source=f"import:{path.name}")
    click.echo(f"imported {count} labels from {path}; {labels.unlabelled} lines not labelled yet were skipped")


def _open_client(settings: Settings, instead: str = "") -> Client:
    """A client for the configured ClickHouse; an embedded one another process holds: who, and what to do instead."""
    from pipeline.sinks.clickhouse import EmbeddedInUse, open_clickhouse

    try:
        return open_clickhouse(settings)
    except EmbeddedInUse as exc:
        raise click.ClickException(_held_store(exc, settings, instead)) from exc


def _held_store(in_use: EmbeddedInUse, settings: Settings, instead: str = "") -> str:
    """One line: which process holds the embedded store, and what works instead (``instead``, or stopping it)."""
    from pipeline.ui.serve import pages_address

    if not instead:
        pages = pages_address(settings.data_dir)
        instead = "stop it, run this again, then start it again" + (
            f"; or read its triage pages at {pages}" if pages else ""
        )
    return (f"{in_use.where} is {in_use.reason}: chDB admits one process per directory; {instead}; "
            "or point HALLUWATCH_CLICKHOUSE_DSN at a ClickHouse server, which admits many")  # fmt: skip


def _migrated_client(settings: Settings, instead: str = "") -> Client:
    from pipeline.sinks.clickhouse import migrate as apply_migrations

    client = _open_client(settings, instead)
    apply_migrations(client, settings.clickhouse_database, settings.retention, settings.clickhouse_cluster)
    return client


@main.command()
@CONFIG_OPTION
@click.option(
    "--trace",
    "trace_id",
    help="Erase this trace: its whole id, or its first 8 or more characters if they name one stored trace.",
)
@click.option("--key", "key_value", metavar="KEY=VALUE",
              help="Erase the traces of calls whose attribute KEY (in retention.erasable_keys) is VALUE.")  # fmt: skip
@click.option("--before", type=click.DateTime(), help="Only calls that started before this (UTC).")
@click.option("--by", "by", help="Who asks, for the audit row (default: the operating-system user).")
def erase(
    config_path: Path | None, trace_id: str | None, key_value: str | None, before: datetime | None, by: str | None
) -> None:
    """Remove a trace, or a user's or session's traces, from every table; print what went, write an audit row.

    The traces matched are printed before anything is removed; a selector that matches none, or
    a trace prefix that names several, exits 1 having removed nothing.  Kafka topics, events
    already exported and HTML reports already written keep their copies (docs/operations.md).
    """
    from pipeline.sinks.ddl import Layout
    from pipeline.sinks.erasure import TRACE_SELECTOR, ErasureRefused, Selector, matched_traces
    from pipeline.sinks.erasure import erase as erase_traces
    from pipeline.tools.erasure_reach import unreached_lines

    if (trace_id is None) == (key_value is None):
        raise click.UsageError("give exactly one of --trace ID and --key KEY=VALUE")
    key, _, value = key_value.partition("=") if key_value else (TRACE_SELECTOR, "=", trace_id or "")
    if not key or not value:
        raise click.UsageError(f"--key takes KEY=VALUE, not {key_value!r}")
    settings = _settings(config_path)
    selector = Selector(key, value, before.replace(tzinfo=UTC) if before else None)
    layout = Layout(settings.clickhouse_database, settings.clickhouse_cluster)
    client = _migrated_client(settings)
    try:
        traces = matched_traces(client, layout.database, selector, settings.retention.erasable_keys)
        click.echo(f"{selector} matched {_traces_words(traces)}")
        erasure = erase_traces(client, layout, selector, traces, by or getpass.getuser())
    except ErasureRefused as exc:
        raise click.ClickException(str(exc)) from exc
    finally:
        client.close()
    if not traces:
        raise click.ClickException(
            f"{selector} matched 0 stored traces: nothing removed (audit row {erasure.erasure_id})"
        )
    click.echo(f"erasure {erasure.erasure_id} removed:")
    for table, rows in erasure.removed.items():
        click.echo(f"  {table:<13} {counted(rows, 'row')}")
    for line in unreached_lines(settings.data_dir):
        click.echo(line)
    if erasure.left:
        left = ", ".join(f"{table} {rows}" for table, rows in erasure.left.items())
        raise click.ClickException(
            f"rows of the matched traces are still there after the deletion ({left}): run it again"
        )


def _traces_words(traces: list[str]) -> str:
    """``1 trace: <id>``, ``3 traces`` or ``0 stored traces``: one trace is shown whole, it may have been a prefix."""
    if not traces:
        return "0 stored traces"
    return f"1 trace: {traces[0]}" if len(traces) == 1 else f"{len(traces)} traces"


@main.group(cls=_Commands)
def silence() -> None:
    """Silences: alerts matching a selector are recorded but not sent, for a while (docs/operations.md, Silences)."""


@silence.command(name="add")
@CONFIG_OPTION
@click.option("--match", "matches", multiple=True, required=True, metavar="KEY=VALUE",
              help=f"Repeatable; an alert is silenced when every one matches. KEY: {', '.join(SELECTOR_KEYS)} "
                   "(detector: one of the agreeing detectors).")  # fmt: skip
@click.option("--duration", required=True, help=f"How long: 90m, 2h, 1d12h (at most {MAX_DURATION.days}d).")
@click.option("--reason", required=True, help="Why: listed with the silence and written on every alert it keeps.")
@click.option("--by", "by", help="Who sets it (default: the operating-system user).")
def silence_add(config_path: Path | None, matches: tuple[str, ...], duration: str, reason: str, by: str | None) -> None:
    """Silence alerts matching every --match for --duration; workers apply it within seconds."""
    from pipeline.alerting.silences import Silence, parse_duration, parse_matchers

    now = datetime.now(UTC)
    new = Silence.start(parse_matchers(matches), parse_duration(duration), reason, by or getpass.getuser(), now)
    stored = _silence_store(_settings(config_path)).add(new)
    click.echo(f"silence {stored.silence_id} set: {stored.selector} for {stored.ends_in(now)}, "
               f"until {stored.ends_at:%Y-%m-%d %H:%M} UTC")  # fmt: skip


@silence.command(name="list")
@CONFIG_OPTION
@click.option("--all", "include_ended", is_flag=True, help="Ended and expired silences too.")
def silence_list(config_path: Path | None, include_ended: bool) -> None:
    """List the silences in force (id, selector, ends in, reason, by)."""
    now = datetime.now(UTC)
    silences = _silence_store(_settings(config_path)).listed(now, include_ended)
    if not silences:
        click.echo("no silences" if include_ended else "no silences in force")
        return
    rows = [("ID", "SELECTOR", "ENDS IN", "REASON", "BY")]
    rows += [(s.silence_id, s.selector, s.ends_in(now), s.reason, s.created_by) for s in silences]
    widths = [max(len(row[column]) for row in rows) for column in range(4)]
    for row in rows:
        click.echo("  ".join([*(cell.ljust(width) for cell, width in zip(row, widths, strict=False)), row[4]]))


@silence.command(name="expire")
@CONFIG_OPTION
@click.argument("silence_id", metavar="ID")
def silence_expire(config_path: Path | None, silence_id: str) -> None:
    """End silence ID now: alerts it would have kept are sent again (those it kept stay unsent)."""
    from pipeline.sinks.labels import to_utc_ms

    now = to_utc_ms(datetime.now(UTC))  # at the stored precision: an expiry now reads back equal to it
    ended = _silence_store(_settings(config_path)).expire(silence_id, now)
    if ended is None:
        raise click.ClickException(f"no silence {silence_id!r}: `halluwatch silence list --all` shows them")
    if ended.ends_at < now:
        click.echo(f"silence {silence_id} had already ended at {ended.ends_at:%Y-%m-%d %H:%M} UTC")
    else:
        click.echo(f"silence {silence_id} expired: {ended.selector}")


def _silence_store(settings: Settings) -> SilenceStore:
    from pipeline.alerting.silence_store import SilenceStore

    instead = "set silences while it is stopped (a worker applies them when it starts)"
    return SilenceStore(_migrated_client(settings, instead), settings.clickhouse_database)


@main.command()
@CONFIG_OPTION
@click.option(
    "--output", "output_path", type=click.Path(dir_okay=False, path_type=Path), help="Default: DATA_DIR/report.html."
)
@click.option("--hours", type=click.FloatRange(min=0, min_open=True), default=24.0, show_default=True)
@click.option("--service", "services", multiple=True, help="Only this service (repeatable; default: all).")
@click.option("--app", "apps", multiple=True, help="Only this application policy (repeatable; default: all).")
def report(
    config_path: Path | None, output_path: Path | None, hours: float, services: tuple[str, ...], apps: tuple[str, ...]
) -> None:
    """Write a static HTML report of the last HOURS from ClickHouse: the dashboard panels, offline.

    The same queries as the Grafana dashboard (dashboards/clickhouse/*.sql), charts as
    inline SVG, no scripts or external files: open it in any browser or attach it.
    """
    from pipeline.tools.erasure_reach import default_report
    from pipeline.tools.report import report_window, write_report

    settings = _settings(config_path)
    path = output_path or default_report(settings.data_dir)
    writable_dir(path.parent, "report")
    window = report_window(hours, services, apps=apps)
    write_report(_migrated_client(settings), settings.clickhouse_database, window, path)
    click.echo(f"report written to {path.resolve()}")


@main.command()
@CONFIG_OPTION
def monitors(config_path: Path | None) -> None:
    """Show each rate monitor: its groups' flag rate now against their baseline, and open incidents."""
    from datetime import UTC

    from pipeline.monitors.store import IncidentStore
    from pipeline.monitors.view import monitor_lines

    settings = _settings(config_path)
    if not settings.monitors:
        click.echo("no rate monitors configured (the settings file's monitors: section)")
        return
    store = IncidentStore(_migrated_client(settings), settings.clickhouse_database)
    now = datetime.now(UTC)
    for name, config in settings.monitors.items():
        for line in monitor_lines(name, config, store.rates(config, now), store.latest(name)):
            click.echo(line)


@main.command()
@CONFIG_OPTION
@click.option("--timeout", "timeout_seconds", default=10.0, show_default=True, help="Seconds per network step.")
def doctor(config_path: Path | None, timeout_seconds: float) -> None:
    """Check the configuration, the broker, ClickHouse, the model and the alert credentials.

    Reaches each with the worker's settings and permissions: creates, writes, reads and
    deletes a scratch topic, and creates, fills, reads and drops a scratch table. Prints
    one line per check with what to fix; exits 1 when any check failed.
    """
    from pipeline.tools.doctor import run_checks

    checks = run_checks(_settings(config_path), timeout_seconds)
    for check in checks:
        click.echo(check.line())
    failed = [check.name for check in checks if not check.ok]
    if failed:
        raise click.ClickException(f"{len(failed)} check(s) failed: {', '.join(failed)}")
    click.echo("all checks passed")


@main.command()
@CONFIG_OPTION
@click.option("--since", default="24h", show_default=True, help="Count the calls that started this long ago (24h, 7d).")
def conventions(config_path: Path | None, since: str) -> None:
    """Count recent model calls per instrumentation scope that arrived with no content, no tools or no model.

    A library that records no messages, no tool definitions beside its tool calls, or no model
    leaves the detectors blind without an error; docs/instrumentations.md says what each needs.
    """
    from pipeline.tools.instrumentation_gaps import scope_gaps, summary, table_lines

    settings = _settings(config_path)
    gaps = scope_gaps(_migrated_client(settings), settings.clickhouse_database, _ago(since, "--since"))
    for line in table_lines(gaps):
        click.echo(line)
    click.echo(summary(gaps)[1])


@main.group(cls=_Commands)
def policy() -> None:
    """Per-application policies: which one a call gets, and what it sets."""


@policy.command(name="explain")
@CONFIG_OPTION
@click.option("--service", required=True, help="The call's service.name.")
@click.option("--operation", default="", help="The call's operation (gen_ai.operation.name).")
@click.option("--model", default="", help="The call's model.")
@click.option(
    "--attr", "attributes", multiple=True, metavar="KEY=VALUE", help="A span or resource attribute (repeatable)."
)
def policy_explain(
    config_path: Path | None, service: str, operation: str, model: str, attributes: tuple[str, ...]
) -> None:
    """Show the effective policy of a call and where each value came from."""
    from pipeline.tools.policy_explain import explain

    for line in explain(_settings(config_path), service, operation, model, _attribute_values(attributes, "--attr")):
        click.echo(line)


def _attribute_values(attributes: tuple[str, ...], option: str) -> dict[str, str]:
    pairs = [attribute.partition("=") for attribute in attributes]
    if any(not equals or not key for key, equals, _ in pairs):
        raise click.BadParameter("expected KEY=VALUE", param_hint=option)
    return {key: value for key, _, value in pairs}


def _ago(text: str, option: str) -> datetime:
    """The moment ``text`` (a duration: 7d, 12h; 0 for now) before now."""
    from pipeline.config.durations import parse_duration

    duration = timedelta(0) if text.strip() == "0" else parse_duration(text)
    if duration is None:
        raise click.BadParameter(f"{text!r}: a duration such as 7d, 36h or 90m (0: now)", param_hint=option)
    return datetime.now(UTC) - duration


@main.command()
@CONFIG_OPTION
@click.option("--app", default="", help="An application policy's name.")
@click.option("--service", default="", help="Only calls of this service.name.")
@click.option("--operation", default="", help="Only calls of this operation.")
@click.option("--model", default="", help="Only calls of this model.")
@click.option("--attr", "attributes", multiple=True, metavar="KEY=VALUE", help="Only calls with this attribute value.")
@click.option("--since", default="7d", show_default=True, help="The window starts this long ago (7d, 36h).")
@click.option("--until", default="0", show_default=True, help="The window ends this long ago (0: now).")
@click.option("--baseline-since", default="", help="Compare with the same calls in this window instead (its start).")
@click.option("--baseline-until", default="", help="The baseline window's end (default: where --since starts).")
@click.option(
    "--baseline-attr", "baseline_attributes", multiple=True, metavar="KEY=VALUE",
    help="Compare with the calls that have this attribute value instead (same window).",
)  # fmt: skip
def rate(
    config_path: Path | None, app: str, service: str, operation: str, model: str, attributes: tuple[str, ...],
    since: str, until: str, baseline_since: str, baseline_until: str, baseline_attributes: tuple[str, ...],
) -> None:  # fmt: skip
    """How often the calls hallucinate: model-based and verdict-corrected rates, the alert rule's precision and recall.

    The verdict-corrected rate comes from the verdicts given in the review queue (`halluwatch ui`,
    Review; sign in with the address `ui` prints); with too few it says how many more it needs.
    The same verdicts measure each alert route's false alarms (faithful calls alerted, 95 %
    interval, against the route's target). With a --baseline-* option it also compares the two
    scopes: the difference of their rates with its interval.

    While `halluwatch ui` holds the embedded ClickHouse (one process per data directory), rate
    reads through it: the address and token it left in DATA_DIR.

    The demo's data: HALLUWATCH_DATA_DIR=.halluwatch/demo halluwatch rate --app default.
    """
    from dataclasses import replace

    from pipeline.calibration.app_map import operating_point_lines
    from pipeline.config.alert_routes import AlertRoutes
    from pipeline.rate.compare import comparison_sentence
    from pipeline.rate.maps import MapStore
    from pipeline.rate.false_alarms import false_alarm_lines, rate_with_false_alarms
    from pipeline.rate.report import rate_report, report_lines
    from pipeline.rate.sampler import Strata
    from pipeline.rate.store import RateStore, Scope
    from pipeline.sinks.clickhouse import EmbeddedInUse, open_clickhouse

    settings = _settings(config_path)
    review = settings.review
    values = _attribute_values(attributes, "--attr")
    scope = Scope(_ago(since, "--since"), _ago(until, "--until"), app, service, operation, model,
                  tuple(sorted(values.items())))  # fmt: skip
    if scope.since >= scope.until:
        raise click.BadParameter("the window must start before it ends", param_hint="--since")
    comparing = bool(baseline_since or baseline_until or baseline_attributes)
    try:
        client = open_clickhouse(settings)
    except EmbeddedInUse as exc:
        for line in _rate_through_pages(settings, exc, scope, comparing):
            click.echo(line)
        return
    store = RateStore(client, settings.clickhouse_database, Strata.configured(review))
    alert_routes = AlertRoutes.configured(settings.alerting, settings.policies)
    report, routes = rate_with_false_alarms(store, scope, alert_routes, review.target_half_width)
    for line in report_lines(report, review.target_half_width) + false_alarm_lines(routes):
        click.echo(line)
    if app:
        for line in operating_point_lines(app, MapStore(client, settings.clickhouse_database).proposal(app)):
            click.echo(line)
    if not comparing:
        return
    baseline_values = {**values, **_attribute_values(baseline_attributes, "--baseline-attr")}
    baseline = replace(
        scope,
        since=_ago(baseline_since, "--baseline-since") if baseline_since else scope.since,
        until=_ago(baseline_until, "--baseline-until") if baseline_until else scope.since,
        attributes=tuple(sorted(baseline_values.items())),
    )
    if baseline_attributes and not (baseline_since or baseline_until):
        baseline = replace(baseline, until=scope.until)  # the same window, another attribute value
    if baseline.since >= baseline.until:
        raise click.BadParameter("the baseline window must start before it ends", param_hint="--baseline-since")
    before = rate_report(store, baseline, review.target_half_width)
    click.echo("baseline:")
    for line in report_lines(before, review.target_half_width):
        click.echo(line)
    # Each side named by what differs: its window, or its attribute values.
    if baseline_since or baseline_until:
        after, earlier = f"in {scope.window()}", f"in {baseline.window()}"
    else:
        after, earlier = f"for {scope.describe()}", f"for {baseline.describe()}"
    click.echo(comparison_sentence(app or service or "every app", (after, report.rate), (earlier, before.rate)))


def _rate_through_pages(settings: Settings, in_use: EmbeddedInUse, scope: Scope, comparing: bool) -> list[str]:
    """The report read through the triage pages of the process holding the embedded store, or what to do."""
    from pipeline.rate.through_pages import PagesRefused, PagesUnreachable, report_lines_through
    from pipeline.ui.serve import running_pages

    if comparing:
        raise click.ClickException(_held_store(in_use, settings, "a comparison (--baseline-*) is not read through "
                                               "its pages: stop it, run this again, then start it again"))  # fmt: skip
    pages = running_pages(settings.data_dir, settings.ui)
    if pages is None:
        instead = ("its pages left no address or token here (DATA_DIR/ui_address, ui_token): set HALLUWATCH_UI__TOKEN "
                   "to the token they accept, or stop it and run this again")  # fmt: skip
        raise click.ClickException(_held_store(in_use, settings, instead))
    try:
        return report_lines_through(*pages, scope)
    except PagesRefused as exc:
        sign_in = (f"they believe {settings.ui.identity_header} only from ui.trusted_proxies, which must include "
                   "this machine's address" if settings.ui.identity_header and not settings.ui.token
                   else "the token sent is not theirs")  # fmt: skip
        instead = f"{exc}: {sign_in}; set HALLUWATCH_UI__TOKEN to a token both use, or stop it and run this again"
        raise click.ClickException(_held_store(in_use, settings, instead)) from exc
    except PagesUnreachable as exc:
        raise click.ClickException(_held_store(in_use, settings, f"{exc}; stop it and run this again")) from exc


@main.command(name="review-digest")
@CONFIG_OPTION
@click.option("--app", required=True, help="The application policy whose calls to draw.")
@click.option("--channel", required=True, help="The Slack channel to post to (#name or its id).")
@click.option("--calls", "count", type=click.IntRange(1, 20), default=5, show_default=True, help="Calls to post.")
def review_digest(config_path: Path | None, app: str, channel: str, count: int) -> None:
    """Post the review queue's next calls of an application to Slack, with verdict buttons (run it daily).

    The calls are the ones the review page would serve next; a click on their buttons reaches
    the pages' Slack endpoint (ui.slack_signing_secret) and joins the audit sample.
    """
    from slack_sdk import WebClient
    from slack_sdk.errors import SlackApiError

    from pipeline.rate.digest import digest_message
    from pipeline.rate.queue import draw
    from pipeline.rate.sampler import Strata
    from pipeline.rate.store import RateStore, Scope

    settings = _settings(config_path)
    token = settings.alerting.slack_bot_token
    if token is None:
        raise click.ClickException("alerting.slack_bot_token is not set (HALLUWATCH_ALERTING__SLACK_BOT_TOKEN)")
    review = settings.review
    store = RateStore(_open_client(settings), settings.clickhouse_database, Strata.configured(review))
    now = datetime.now(UTC)
    calls = draw(store, Scope(now - timedelta(days=review.window_days), now, app=app), "", review.seed, count)
    if not calls:
        click.echo(f"nothing to review for {app}: every call of the last {review.window_days} days is judged")
        return
    text, blocks = digest_message(app, calls, settings.alerting.ui_base_url)
    client = WebClient(token=token.get_secret_value(), base_url=settings.alerting.slack_base_url)
    try:
        client.chat_postMessage(channel=channel, text=text, blocks=blocks)
    except SlackApiError as error:
        raise click.ClickException(f"Slack refused the digest for {channel}: {error.response.get('error')}") from error
    click.echo(f"posted {text} to {channel}")


@main.command()
@CONFIG_OPTION
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=click.IntRange(0, 65535), default=8642, show_default=True, help="Port to listen on.")
def ui(config_path: Path | None, host: str, port: int) -> None:
    """Serve the triage pages: flagged calls, a page per trace, verdicts for calibration.

    Reads the configured ClickHouse (read-only credentials suffice to browse; verdicts
    write to the labels table).  A running worker with embedded chDB serves the same
    pages on its metrics port: chDB admits one process per data directory.

    To sign in: with no ui.token configured, the address it prints carries a token made up
    for this run (?token=...), which signs the browser in; the token is also written to
    DATA_DIR/ui_token.  With HALLUWATCH_UI__TOKEN set, open the address and enter that token.

    The demo's data: HALLUWATCH_DATA_DIR=.halluwatch/demo halluwatch ui (after halluwatch demo).
    """
    from waitress import serve

    from pipeline.sinks.clickhouse import EmbeddedInUse
    from pipeline.ui.serve import keep_address, keep_token, pages_address, sign_in_url, triage_app

    settings = _settings(config_path)
    try:
        app, access = triage_app(settings)
    except EmbeddedInUse as exc:
        pages = pages_address(settings.data_dir)
        instead = f"open the pages it serves at {pages}" if pages else (
            "a worker serves the pages on its metrics port (HALLUWATCH_METRICS_PORT); or stop it first")  # fmt: skip
        raise click.ClickException(_held_store(exc, settings, instead)) from exc
    base_url = f"http://{host}:{port}"
    # Commands that cannot open the embedded store while this process holds it (rate) read through the pages.
    keep_token(access, settings.data_dir)
    address = keep_address(base_url, settings.data_dir)
    click.echo(f"triage pages on {sign_in_url(base_url, access)}  (Ctrl-C stops)")
    try:
        serve(app, host=host, port=port, threads=4, ident="halluwatch")
    finally:
        address.unlink(missing_ok=True)


@main.command()
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path(".halluwatch/demo"),
    show_default=True,
    help="Where the embedded ClickHouse and logs go (wiped at start).",
)
@click.option("--timeout", "timeout_seconds", default=120.0, show_default=True, help="Seconds to wait.")
@click.option(
    "--local-judge/--no-local-judge",
    default=None,
    help="Escalate one uncertain call to a local model (default: when the llm-test extra is installed).",
)
def demo(data_dir: Path, timeout_seconds: float, local_judge: bool | None) -> None:
    """Run everything on this machine: embedded broker and ClickHouse, worker, example traces."""
    from pipeline.tools.demo import run_demo

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    # The demo runs on embedded defaults: a shell configured for a real deployment (a broker, a
    # ClickHouse DSN, a data directory) must not receive the example traces or its tables.
    ignored = sorted(name for name in os.environ if name.startswith(ENV_PREFIX) and name != MODEL_CACHE_ENV)
    for name in ignored:
        del os.environ[name]
    if ignored:
        click.echo(f"halluwatch demo runs on embedded defaults: ignoring {', '.join(ignored)}", err=True)
    outcome = run_demo(data_dir, timeout_seconds, local_judge)
    click.echo(outcome.summary)
    if not outcome.complete:
        raise click.ClickException(
            f"only {outcome.messages_done} of {outcome.messages_sent} messages were processed in time"
        )
    click.echo(f"\nAll {outcome.messages_sent} messages processed. Data kept in {data_dir}/clickhouse.")
    click.echo(f"Report: {outcome.report_path.resolve()}")
    command = f"HALLUWATCH_DATA_DIR={shlex.quote(str(data_dir))} {shlex.quote(sys.argv[0])} ui"
    click.echo(f"Triage pages: {command}\n  then open the address it prints ('alerted only' lists the alerted traces).")
    rate = f"HALLUWATCH_DATA_DIR={shlex.quote(str(data_dir))} {shlex.quote(sys.argv[0])} rate --app default"
    click.echo(f"Review: 'Review' on those pages serves calls to judge (keys h, f, s); then {rate}\n"
               "  estimates how often the app hallucinates from your verdicts.")  # fmt: skip


if __name__ == "__main__":
    main()
