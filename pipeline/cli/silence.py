"""`halluwatch silence`: alerts recorded but not sent, for a while."""

from __future__ import annotations

import getpass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import click

from pipeline.alerting.silences import MAX_DURATION, SELECTOR_KEYS
from pipeline.cli.group import CONFIG_OPTION, Commands, configured, main
from pipeline.cli.store import migrated_client
from pipeline.config.settings import Settings

if TYPE_CHECKING:
    from pipeline.alerting.silence_store import SilenceStore


@main.group(cls=Commands)
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
    stored = _silence_store(configured(config_path), create=True).add(new)
    click.echo(f"silence {stored.silence_id} set: {stored.selector} for {stored.ends_in(now)}, "
               f"until {stored.ends_at:%Y-%m-%d %H:%M} UTC")  # fmt: skip


@silence.command(name="list")
@CONFIG_OPTION
@click.option("--all", "include_ended", is_flag=True, help="Ended and expired silences too.")
def silence_list(config_path: Path | None, include_ended: bool) -> None:
    """List the silences in force (id, selector, ends in, reason, by)."""
    now = datetime.now(UTC)
    silences = _silence_store(configured(config_path)).listed(now, include_ended)
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
    ended = _silence_store(configured(config_path)).expire(silence_id, now)
    if ended is None:
        raise click.ClickException(f"no silence {silence_id!r}: `halluwatch silence list --all` shows them")
    if ended.ends_at < now:
        click.echo(f"silence {silence_id} had already ended at {ended.ends_at:%Y-%m-%d %H:%M} UTC")
    else:
        click.echo(f"silence {silence_id} expired: {ended.selector}")


def _silence_store(settings: Settings, create: bool = False) -> SilenceStore:
    from pipeline.alerting.silence_store import SilenceStore

    instead = "set silences while it is stopped (a worker applies them when it starts)"
    return SilenceStore(migrated_client(settings, instead, create), settings.clickhouse_database)
