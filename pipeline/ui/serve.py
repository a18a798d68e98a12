"""Where the triage pages run: inside the worker (its metrics port) or alone (``halluwatch ui``).

Embedded chDB admits one process per data directory, so on one machine without a
ClickHouse server the running worker serves the pages itself, from its own ClickHouse
session; ``halluwatch ui`` serves them against a ClickHouse server, or against a stopped
worker's embedded data.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from flask import Flask

from pipeline.config.data_dirs import writable_dir
from pipeline.config.settings import Settings
from pipeline.sinks.clickhouse import open_clickhouse
from pipeline.ui.access import Access
from pipeline.ui.call_terms import Contracts
from pipeline.ui.queries import TriageStore
from pipeline.ui.review import ReviewQueue
from pipeline.ui.web import create_app

logger = logging.getLogger(__name__)


class UnmigratedDatabase(RuntimeError):
    """The database lacks tables or columns the pages read; the message says which and what to run."""


TOKEN_FILE = "ui_token"  # noqa: S105 - a file name, not a token
ADDRESS_FILE = "ui_address"  # where the running pages listen, for commands that read through them


def triage_app(settings: Settings) -> tuple[Flask, Access]:
    """The triage application on the configured ClickHouse, and who it admits."""
    store = TriageStore(open_clickhouse(settings), settings.clickhouse_database)
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
    """Write a made-up token to ``data_dir/ui_token`` (owner-only) for whoever runs the process; None if none."""
    if not access.generated:
        return None
    path = writable_dir(data_dir, "worker state") / TOKEN_FILE
    path.unlink(missing_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as out:
        out.write(access.token + "\n")
    return path


def keep_address(base_url: str, data_dir: Path) -> Path:
    """Write the pages' address to ``data_dir/ui_address``: commands that cannot open the store read through them."""
    path = writable_dir(data_dir, "worker state") / ADDRESS_FILE
    path.write_text(base_url.rstrip("/") + "\n", encoding="utf-8")
    return path


def running_pages(data_dir: Path, configured_token: str) -> tuple[str, str] | None:
    """The address of the pages a process holding ``data_dir``'s store left, and a token they accept; or None."""
    address, token_file = data_dir / ADDRESS_FILE, data_dir / TOKEN_FILE
    if not address.is_file():
        return None
    token = configured_token or (token_file.read_text(encoding="utf-8").strip() if token_file.is_file() else "")
    return (address.read_text(encoding="utf-8").strip(), token) if token else None
