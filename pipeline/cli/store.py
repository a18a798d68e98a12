"""The ClickHouse client a command reads or writes through."""

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
from pipeline.config.data_dirs import writable_dir
from pipeline.config.settings import ENV_PREFIX, MODEL_CACHE_ENV, Settings
from pipeline.words import counted

if TYPE_CHECKING:
    from clickhouse_connect.driver.client import Client

    from pipeline.alerting.silence_store import SilenceStore
    from pipeline.offline.scored_calls import LabelledScores
    from pipeline.rate.store import Scope
    from pipeline.sinks.clickhouse import EmbeddedInUse


def open_client(settings: Settings, instead: str = "", create: bool = False) -> Client:
    """A client for the configured ClickHouse; an embedded one another process holds: who, and what to do instead.

    Only a command that writes passes ``create``: a read never leaves a store (or a directory) behind.
    """
    from pipeline.sinks.clickhouse import EmbeddedInUse, open_clickhouse

    try:
        return open_clickhouse(settings, create)
    except EmbeddedInUse as exc:
        raise click.ClickException(held_store(exc, settings, instead)) from exc


def held_store(in_use: EmbeddedInUse, settings: Settings, instead: str = "") -> str:
    """One line: which process holds the embedded store, and what works instead (``instead``, or stopping it)."""
    return (f"{in_use.where} is {in_use.reason}: chDB admits one process per directory; "
            f"{instead or 'stop it, run this again, then start it again'}; "
            "or point HALLUWATCH_CLICKHOUSE_DSN at a ClickHouse server, which admits many")  # fmt: skip


def migrated_client(settings: Settings, instead: str = "", create: bool = False) -> Client:
    """:func:`open_client` with pending migrations applied (to a store that exists, unless ``create``)."""
    from pipeline.sinks.clickhouse import migrate as apply_migrations

    client = open_client(settings, instead, create)
    apply_migrations(client, settings.clickhouse_database, settings.retention, settings.clickhouse_cluster)
    return client
