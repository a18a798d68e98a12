"""`halluwatch policy`: which application policy a call gets."""

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


@main.group(cls=Commands)
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

    for line in explain(configured(config_path), service, operation, model, attribute_values(attributes, "--attr")):
        click.echo(line)
