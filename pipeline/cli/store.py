"""The ClickHouse client a command reads or writes through."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from pipeline.config.settings import Settings

if TYPE_CHECKING:
    from clickhouse_connect.driver.client import Client

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
