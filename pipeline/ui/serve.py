"""Where the triage pages run: inside the worker (its metrics port) or alone (``halluwatch ui``).

Embedded chDB admits one process per data directory, so on one machine without a
ClickHouse server the running worker serves the pages itself, from its own ClickHouse
session; ``halluwatch ui`` serves them against a ClickHouse server, or against a stopped
worker's embedded data.
"""

from __future__ import annotations

import errno
import logging
import os
import socket
from pathlib import Path

from flask import Flask

from pipeline.config.data_dirs import writable_dir
from pipeline.config.settings import Settings
from pipeline.config.ui import UISettings
from pipeline.sinks.clickhouse import open_clickhouse
from pipeline.ui.access import Access, os_user
from pipeline.ui.call_terms import Contracts
from pipeline.ui.queries import TriageStore
from pipeline.ui.review import ReviewQueue
from pipeline.ui.web import create_app

logger = logging.getLogger(__name__)


class UnmigratedDatabase(RuntimeError):
    """The database lacks tables or columns the pages read; the message says which and what to run."""


class CannotListen(OSError):
    """The pages' address cannot be listened on (taken, not this machine's); the message says which and what to do."""


def listening_socket(host: str, port: int) -> socket.socket:
    """A socket listening on ``host:port``, taken before anything is printed or opened; CannotListen if not."""
    try:
        return socket.create_server((host, port))
    except OSError as exc:
        # The system's words for the error, without create_server's "(while attempting to bind ...)".
        reason = os.strerror(exc.errno).lower() if exc.errno and exc.errno > 0 else "name not resolved"
        todo = _LISTEN_ADVICE.get(exc.errno or 0, "give --host an address of this machine (127.0.0.1, or 0.0.0.0: all)")
        raise CannotListen(f"cannot listen on {host}:{port} (from --host and --port): {reason}; {todo}") from exc


_LISTEN_ADVICE = {
    errno.EADDRINUSE: "stop what listens there, or give another --port",
    errno.EACCES: "ports below 1024 need privileges: give another --port",
}


TOKEN_FILE = "ui_token"  # noqa: S105 - a file name, not a token
ADDRESS_FILE = "ui_address"  # where the running pages listen, for commands that read through them


def triage_app(settings: Settings, create: bool = True) -> tuple[Flask, Access]:
    """The triage application on the configured ClickHouse, and who it admits (``create``: as open_clickhouse)."""
    store = TriageStore(open_clickhouse(settings, create), settings.clickhouse_database)
    gaps = store.schema_gaps()
    if gaps:
        raise UnmigratedDatabase(
            f"ClickHouse database {settings.clickhouse_database} lacks {', '.join(gaps)}: "
            "run `halluwatch migrate` (or start a worker, which migrates) with write credentials"
        )
    access = Access(settings.ui)
    review = ReviewQueue.configured(store.client, settings)
    return create_app(store, settings.ui, access, review, Contracts.configured(settings.detectors)), access


def sign_in_url(base_url: str, access: Access) -> str:
    """The address to open: with the made-up token when there is one (it signs the browser in)."""
    return f"{base_url.rstrip('/')}/?token={access.token}" if access.generated else f"{base_url.rstrip('/')}/"


def keep_token(access: Access, data_dir: Path) -> Path | None:
    """Write a made-up token to ``data_dir/ui_token`` (owner-only) for whoever runs the process; None if none.

    With none made up, an earlier run's file goes: commands must not sign in with a token no longer accepted.
    """
    path = writable_dir(data_dir, "worker state") / TOKEN_FILE
    path.unlink(missing_ok=True)
    if not access.generated:
        return None
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as out:
        out.write(access.token + "\n")
    return path


def keep_address(base_url: str, data_dir: Path) -> Path:
    """Write the pages' address to ``data_dir/ui_address``: commands that cannot open the store read through them."""
    path = writable_dir(data_dir, "worker state") / ADDRESS_FILE
    path.write_text(base_url.rstrip("/") + "\n", encoding="utf-8")
    return path


def pages_address(data_dir: Path) -> str | None:
    """The address the pages of the process holding ``data_dir``'s store left (:func:`keep_address`), or None."""
    path = data_dir / ADDRESS_FILE
    return path.read_text(encoding="utf-8").strip() if path.is_file() else None


def running_pages(data_dir: Path, ui: UISettings) -> tuple[str, dict[str, str]] | None:
    """The address of the running pages and the headers that sign a command in there; None: no pages, or no way in.

    A configured token first; behind an authenticating proxy, the identity header as the proxy would
    send it, naming the operating-system user (the pages believe it only from ``ui.trusted_proxies``);
    else the token the pages made up and left in ``data_dir``.
    """
    address = pages_address(data_dir)
    if address is None:
        return None
    token_file = data_dir / TOKEN_FILE
    if ui.token:
        return address, _bearer(ui.token.get_secret_value())
    if ui.identity_header:
        return address, {ui.identity_header: ui.token_user or os_user()}
    if token_file.is_file():
        return address, _bearer(token_file.read_text(encoding="utf-8").strip())
    return None


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}
