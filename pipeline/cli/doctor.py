"""`halluwatch doctor`: every connection and credential checked the worker's way."""

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
from pipeline.alerting.silences import MAX_DURATION, SELECTOR_KEYS
from pipeline.cli.group import CONFIG_OPTION, Commands, ago, attribute_values, configured, main
from pipeline.cli.store import held_store, migrated_client, open_client
from pipeline.config.data_dirs import writable_dir
from pipeline.config.settings import ENV_PREFIX, MODEL_CACHE_ENV, Settings
from pipeline.words import counted

if TYPE_CHECKING:
    from clickhouse_connect.driver.client import Client

    from pipeline.alerting.silence_store import SilenceStore
    from pipeline.offline.scored_calls import LabelledScores
    from pipeline.rate.store import Scope
    from pipeline.sinks.clickhouse import EmbeddedInUse


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
