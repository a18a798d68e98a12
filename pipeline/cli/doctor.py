"""`halluwatch doctor`: every connection and credential checked the worker's way."""

from __future__ import annotations

from pathlib import Path

import click

from pipeline.cli.group import CONFIG_OPTION, configured, main


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

    checks = run_checks(configured(config_path), timeout_seconds)
    for check in checks:
        click.echo(check.line())
    failed = [check.name for check in checks if not check.ok]
    if failed:
        raise click.ClickException(f"{len(failed)} check(s) failed: {', '.join(failed)}")
    click.echo("all checks passed")
