"""`halluwatch calibrate`: thresholds from labelled records, or an application's map from its verdicts."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import click

from pipeline.cli.group import CONFIG_OPTION, configured, main
from pipeline.cli.store import migrated_client, open_client
from pipeline.config.data_dirs import writable_dir
from pipeline.config.settings import Settings

if TYPE_CHECKING:
    from pipeline.offline.scored_calls import LabelledScores


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
    from pipeline.offline.calibrate import calibrate, diff_thresholds, write_thresholds
    from pipeline.offline.calibration_plots import write_plots
    from pipeline.offline.policy_calibration import calibrate_policies, describe, policies_document

    if diff_paths:
        click.echo(diff_thresholds(*diff_paths))
        return
    if app:
        _calibrate_app(configured(config_path), app, apply_version)
        return
    if apply_version:
        raise click.UsageError("--apply needs --app NAME")
    if (input_path is None) == (not from_clickhouse) or output_dir is None:
        raise click.UsageError("give --output DIR and exactly one of INPUT.jsonl or --from-clickhouse")
    settings = configured(config_path)
    labelled = _labelled_scores(settings, input_path, since, workers)
    current = load_thresholds(settings.thresholds_file, settings.detectors.embeddings.profile)
    rule = AgreementRule.from_settings(settings.alerting, PolicyBook(settings, current))
    result = calibrate(
        labelled, current, rule, target_precision=target_precision,
        cost_ratio=cost_ratio, min_positives=min_positives, holdout=holdout,
        routing=RouteTargets.from_settings(settings.alerting),
    )  # fmt: skip
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
    from pipeline.calibration.proposals import AppCalibration
    from pipeline.rate.maps import MapStore

    client = migrated_client(settings)
    now = datetime.now(UTC)
    if apply_version:
        maps = MapStore(client, settings.clickhouse_database)
        applied = maps.apply(app, apply_version, now, "halluwatch calibrate")
        click.echo(f"applied {applied.version} to {app}: workers score its calls with it within "
                   f"{settings.review.map_refresh_seconds:g} s")  # fmt: skip
        return
    proposed = AppCalibration.configured(client, settings).propose(app, now, "halluwatch calibrate")
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


def _labelled_scores(
    settings: Settings, input_path: Path | None, since: datetime | None, workers: int
) -> list[LabelledScores]:
    """Scores of labelled calls: the detectors run on INPUT, or the stored findings of labelled calls.

    Each carries its application policy: the one its findings name, or for INPUT records the
    one their call (service ``eval``, operation = the record's task) selects.
    """
    if input_path is None:
        from pipeline.offline.human_labels import labelled_scores_from_clickhouse

        client = open_client(settings)
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
