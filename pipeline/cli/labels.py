"""`halluwatch label`: export calls for people to label, import their labels."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import click

from pipeline.cli.group import CONFIG_OPTION, Commands, configured, main
from pipeline.cli.store import migrated_client


@main.group(cls=Commands)
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

    settings = configured(config_path)
    client = migrated_client(settings)
    count = export_for_labelling(client, settings.clickhouse_database, output_path, limit=limit, since=since, seed=seed)
    click.echo(f"wrote {count} calls to label to {output_path}")


@label.command(name="import")
@CONFIG_OPTION
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--labeller", default="unknown", show_default=True, help="For lines that do not name one.")
def label_import(config_path: Path | None, path: Path, labeller: str) -> None:
    """Load a labelled JSONL file into the ClickHouse labels table (idempotent)."""
    from pipeline.offline.human_labels import read_label_file
    from pipeline.sinks.labels import insert_labels

    settings = configured(config_path)
    labels = read_label_file(path, labeller)
    client = migrated_client(settings, create=True)
    count = insert_labels(client, settings.clickhouse_database, labels.labels, source=f"import:{path.name}")
    click.echo(f"imported {count} labels from {path}; {labels.unlabelled} lines not labelled yet were skipped")
