"""`halluwatch ui`: the triage pages."""

from __future__ import annotations

from pathlib import Path

import click

from pipeline.cli.group import CONFIG_OPTION, configured, main
from pipeline.cli.store import held_store


@main.command()
@CONFIG_OPTION
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=click.IntRange(0, 65535), default=8642, show_default=True, help="Port to listen on.")
def ui(config_path: Path | None, host: str, port: int) -> None:
    """Serve the triage pages: flagged calls, a page per trace, verdicts for calibration.

    Reads the configured ClickHouse (read-only credentials suffice to browse; verdicts
    write to the labels table).  A running worker with embedded chDB serves the same
    pages on its metrics port: chDB admits one process per data directory.

    To sign in: with no ui.token configured, the address it prints carries a token made up
    for this run (?token=...), which signs the browser in; the token is also written to
    DATA_DIR/ui_token.  With HALLUWATCH_UI__TOKEN set, open the address and enter that token.

    The demo's data: halluwatch --data-dir .halluwatch/demo ui (after halluwatch demo).
    """
    from waitress import serve

    from pipeline.sinks.clickhouse import EmbeddedInUse
    from pipeline.ui.serve import keep_address, keep_token, listening_socket, pages_address, sign_in_url, triage_app

    settings = configured(config_path)
    listening = listening_socket(host, port)  # a taken port is said before the store opens or a URL is printed
    try:
        app, access = triage_app(settings, create=False)  # pages over no store would only say to migrate
    except EmbeddedInUse as exc:
        pages = pages_address(settings.data_dir)
        instead = f"open the pages it serves at {pages}" if pages else (
            "a worker serves the pages on its metrics port (HALLUWATCH_METRICS_PORT); or stop it first")  # fmt: skip
        raise click.ClickException(held_store(exc, settings, instead)) from exc
    base_url = f"http://{host}:{listening.getsockname()[1]}"
    # Commands that cannot open the embedded store while this process holds it (rate) read through the pages.
    keep_token(access, settings.data_dir)
    address = keep_address(base_url, settings.data_dir)
    click.echo(f"triage pages on {sign_in_url(base_url, access)}  (Ctrl-C stops)")
    try:
        serve(app, sockets=[listening], threads=4, ident="halluwatch")
    finally:
        address.unlink(missing_ok=True)
