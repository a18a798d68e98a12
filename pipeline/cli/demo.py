"""`halluwatch demo`: everything on this machine, with example traces."""

from __future__ import annotations

import logging
import os
import shlex
import sys
from pathlib import Path

import click

from pipeline.cli.group import main
from pipeline.config.settings import ENV_PREFIX, MODEL_CACHE_ENV


@main.command()
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path(".halluwatch/demo"),
    show_default=True,
    help="Where the embedded ClickHouse and logs go (wiped at start).",
)
@click.option("--timeout", "timeout_seconds", default=120.0, show_default=True, help="Seconds to wait.")
@click.option(
    "--local-judge/--no-local-judge",
    default=None,
    help="Escalate one uncertain call to a local model (default: when the llm-test extra is installed).",
)
def demo(data_dir: Path, timeout_seconds: float, local_judge: bool | None) -> None:
    """Run everything on this machine: embedded broker and ClickHouse, worker, example traces."""
    from pipeline.tools.demo import run_demo

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    # The demo runs on embedded defaults: a shell configured for a real deployment (a broker, a
    # ClickHouse DSN, a data directory) must not receive the example traces or its tables.
    ignored = sorted(name for name in os.environ if name.startswith(ENV_PREFIX) and name != MODEL_CACHE_ENV)
    for name in ignored:
        del os.environ[name]
    outcome = run_demo(data_dir, timeout_seconds, local_judge)
    click.echo(outcome.summary)
    if outcome.complete:
        click.echo(f"\nAll {outcome.messages_sent} messages processed. Data kept in {data_dir}/clickhouse.")
        click.echo(f"Report: {outcome.report_path.resolve()}")
        # --data-dir names the demo's store: an exported deployment DSN cannot divert these to a real one.
        store = f"{shlex.quote(sys.argv[0])} --data-dir {shlex.quote(str(data_dir))}"
        click.echo(f"Triage pages: {store} ui\n  then open the address it prints ('alerted only' lists the alerted "
                   "traces).")  # fmt: skip
        click.echo(f"Review: 'Review' on those pages serves calls to judge (keys h, f, s); then {store} rate --app "
                   "default\n  estimates how often the app hallucinates from your verdicts.")  # fmt: skip
    if ignored:  # last, where it is read: after the alert log
        click.echo(f"\nhalluwatch demo ran on embedded defaults, ignoring {', '.join(ignored)}; the commands above "
                   "read the demo's store whatever they say.")  # fmt: skip
    if not outcome.complete:
        raise click.ClickException(
            f"only {outcome.messages_done} of {outcome.messages_sent} messages were processed in time"
        )
