"""`halluwatch erase`: remove traces from every table."""

from __future__ import annotations

import getpass
from datetime import UTC, datetime
from pathlib import Path

import click

from pipeline.cli.group import CONFIG_OPTION, configured, main
from pipeline.cli.store import migrated_client
from pipeline.words import counted


@main.command()
@CONFIG_OPTION
@click.option(
    "--trace",
    "trace_id",
    help="Erase this trace: its whole id, or its first 8 or more characters if they name one stored trace.",
)
@click.option("--key", "key_value", metavar="KEY=VALUE",
              help="Erase the traces of calls whose attribute KEY (in retention.erasable_keys) is VALUE.")  # fmt: skip
@click.option("--before", type=click.DateTime(), help="Only calls that started before this (UTC).")
@click.option("--by", "by", help="Who asks, for the audit row (default: the operating-system user).")
def erase(
    config_path: Path | None, trace_id: str | None, key_value: str | None, before: datetime | None, by: str | None
) -> None:
    """Remove a trace, or a user's or session's traces, from every table; print what went, write an audit row.

    The traces matched are printed before anything is removed; a selector that matches none, or
    a trace prefix that names several, exits 1 having removed nothing.  Kafka topics, events
    already exported and HTML reports already written keep their copies (docs/operations.md).
    """
    from pipeline.sinks.ddl import Layout
    from pipeline.sinks.erasure import TRACE_SELECTOR, Selector, matched_traces
    from pipeline.sinks.erasure import erase as erase_traces
    from pipeline.tools.erasure_reach import unreached_lines

    if (trace_id is None) == (key_value is None):
        raise click.UsageError("give exactly one of --trace ID and --key KEY=VALUE")
    key, _, value = key_value.partition("=") if key_value else (TRACE_SELECTOR, "=", trace_id or "")
    if not key or not value:
        raise click.UsageError(f"--key takes KEY=VALUE, not {key_value!r}")
    settings = configured(config_path)
    selector = Selector(key, value, before.replace(tzinfo=UTC) if before else None)
    layout = Layout(settings.clickhouse_database, settings.clickhouse_cluster)
    client = migrated_client(settings)
    try:
        traces = matched_traces(client, layout.database, selector, settings.retention.erasable_keys)
        if traces:  # none: said once, below
            click.echo(f"{selector} matched {_traces_words(traces)}")
        erasure = erase_traces(client, layout, selector, traces, by or getpass.getuser())
    finally:
        client.close()
    if not traces:
        raise click.ClickException(
            f"{selector} matched 0 stored traces: nothing removed (audit row {erasure.erasure_id})"
        )
    click.echo(f"erasure {erasure.erasure_id} removed:")
    for table, rows in erasure.removed.items():
        click.echo(f"  {table:<13} {counted(rows, 'row')}")
    for line in unreached_lines(settings.data_dir):
        click.echo(line)
    if erasure.left:
        left = ", ".join(f"{table} {rows}" for table, rows in erasure.left.items())
        raise click.ClickException(
            f"rows of the matched traces are still there after the deletion ({left}): run it again"
        )


def _traces_words(traces: list[str]) -> str:
    """``1 trace: <id>`` or ``3 traces``: one trace is shown whole, it may have been a prefix."""
    return f"1 trace: {traces[0]}" if len(traces) == 1 else f"{len(traces)} traces"
