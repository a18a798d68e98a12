"""Offline scoring and learning: baseline, eval, train."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any, get_args

import click

from detectors.config import Profile
from pipeline.cli.group import CONFIG_OPTION, configured, main
from pipeline.cli.store import open_client
from pipeline.config.data_dirs import writable_dir


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
    from detectors.confidence import DETECTOR as CONFIDENCE
    from pipeline.offline.baseline import run_baseline

    if (input_path is None) == (not from_clickhouse):
        raise click.UsageError("give exactly one of --input PATH or --from-clickhouse")
    settings = configured(config_path)
    output_path = output_path or settings.data_dir / "baselines.yaml"
    writable_dir(output_path.parent, "baselines")
    confidence = CONFIDENCE.config_in(settings.detectors)
    summary = run_baseline(
        output_path,
        input_path=input_path,
        client=open_client(settings) if from_clickhouse else None,
        database=settings.clickhouse_database,
        since=since,
        top_k=confidence.top_k,
        min_tokens=confidence.min_tokens,
        min_responses=min_responses,
    )
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

    settings = configured(config_path)
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

    settings = configured(config_path)
    detectors = settings.detectors
    if profile is not None:
        detectors.embeddings = detectors.embeddings.for_profile(profile)
    trained_for = {"profile": detectors.embeddings.profile}
    files = training.data_files(data_dir, training.VERDICT_SETS)
    writable_dir(output_dir, "model output")
    support_files = {name: files[name] for name in training.TRAINING_SETS}
    detector = UnsupportedSpansDetector(
        UNSUPPORTED_SPANS.config_in(detectors),
        0.5,
        Embedder(detectors.embeddings),
        language=GROUNDING.config_in(detectors).language,
    )
    rows = training.extract(detector, support_files, limit, lambda r, total: tqdm(r, total=total, unit="rec"))
    report = training.train(rows, training.describe_data(support_files, rows), detectors.embeddings.profile)
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
    verdict = training.train_verdict(
        records, outputs, thresholds.by_detector, RouteTargets.from_settings(settings.alerting)
    )
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
