"""Read-only views of the store: report, monitors, conventions."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import click

from pipeline.cli.group import CONFIG_OPTION, ago, configured, main
from pipeline.cli.store import migrated_client
from pipeline.config.data_dirs import writable_dir


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

    settings = configured(config_path)
    client = migrated_client(settings)  # first: no store, no report directory either
    path = output_path or default_report(settings.data_dir)
    writable_dir(path.parent, "report")
    write_report(client, settings.clickhouse_database, report_window(hours, services, apps=apps), path)
    click.echo(f"report written to {path.resolve()}")


@main.command()
@CONFIG_OPTION
def monitors(config_path: Path | None) -> None:
    """Show each rate monitor: its groups' flag rate now against their baseline, and open incidents."""
    from pipeline.monitors.store import IncidentStore
    from pipeline.monitors.view import monitor_lines

    settings = configured(config_path)
    if not settings.monitors:
        click.echo("no rate monitors configured (the settings file's monitors: section)")
        return
    store = IncidentStore(migrated_client(settings), settings.clickhouse_database)
    now = datetime.now(UTC)
    for name, config in settings.monitors.items():
        for line in monitor_lines(name, config, store.rates(config, now), store.latest(name)):
            click.echo(line)


@main.command()
@CONFIG_OPTION
@click.option("--since", default="24h", show_default=True, help="Count the calls that started this long ago (24h, 7d).")
def conventions(config_path: Path | None, since: str) -> None:
    """Count recent model calls per instrumentation scope that arrived with no content, no tools or no model.

    A library that records no messages, no tool definitions beside its tool calls, or no model
    leaves the detectors blind without an error; docs/instrumentations.md says what each needs.
    """
    from pipeline.tools.instrumentation_gaps import scope_gaps, summary, table_lines

    settings = configured(config_path)
    gaps = scope_gaps(migrated_client(settings), settings.clickhouse_database, ago(since, "--since"))
    for line in table_lines(gaps):
        click.echo(line)
    click.echo(summary(gaps)[1])
