"""ClickHouse access: one client factory, migrations, and the batching sink (docs/operations.md).

The same clickhouse-connect client speaks to embedded chDB (``chdb:///dir``) and to a
server (``http(s)://``).  chDB is in-process and locks its directory: only one process
may open a given data directory at a time, so an embedded worker owns its database
until it stops.

Writes are idempotent rather than exactly-once: tables are ReplacingMergeTree keyed by
the row's natural identity, so a batch re-inserted after a crash (at-least-once input)
collapses on merge and ``FINAL`` reads never see it twice.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import clickhouse_connect
from clickhouse_connect.driver.client import Client
from clickhouse_connect.driver.exceptions import ClickHouseError

from pipeline import metrics
from pipeline.config.connections import redacted_dsn
from pipeline.config.data_dirs import writable_dir
from pipeline.sinks.ddl import Layout
from pipeline.sinks.embedded_lock import holder, holder_words
from pipeline.sinks.retention import apply_retention
from pipeline.sinks.rows import TABLE_COLUMNS
from schemas import migrations

if TYPE_CHECKING:
    from pipeline.config.retention import RetentionSettings
    from pipeline.config.settings import Settings

logger = logging.getLogger(__name__)

MIGRATIONS_TABLE = "schema_migrations"
_embedded_lock = threading.Lock()
EMBEDDED_SCHEME = "chdb://"
_DRIVER_LOGGERS = ("urllib3.connectionpool", "clickhouse_connect.driver")


class ClickHouseUnreachable(RuntimeError):
    """ClickHouse could not be reached (by the worker: and migrated within the start-up wait)."""

    def __init__(self, where: str, reason: str, waited_seconds: float = 0.0) -> None:
        super().__init__(f"{where}: {reason}")
        self.where = where  # "ClickHouse at <DSN without password>"
        self.reason = reason
        self.waited_seconds = waited_seconds  # how long it was retried (the worker's start-up wait), 0: tried once


class EmbeddedInUse(ClickHouseUnreachable):
    """An embedded ClickHouse directory another process has open (chDB admits one): a worker or ``halluwatch ui``.

    ``holder`` names it for people (:func:`~pipeline.sinks.embedded_lock.holder_words`).
    """

    def __init__(self, where: str, pid: int, holder: str = "") -> None:
        super().__init__(where, f"in use by {holder or (f'process {pid}' if pid else 'another process')}")
        self.pid = pid


class NoStore(RuntimeError):
    """A command that only reads found no store where it looked; the message names where and what makes one."""


class SinkUnavailable(RuntimeError):
    """The sink refused a flush; the rows are kept and the flush may be retried later."""

    def __init__(self, message: str, retry_after_seconds: float) -> None:
        super().__init__(message)
        self.retry_after_seconds = retry_after_seconds


def connect(dsn: str, **options: Any) -> Client:
    """A clickhouse-connect client for ``dsn`` (``chdb://PATH`` or ``http(s)://...``), with client ``options``."""
    # chDB's embedded server is process-global; serialize its first open across threads.
    with _embedded_lock:
        return clickhouse_connect.get_client(dsn=dsn, **options)


def open_clickhouse(settings: Settings, create: bool = True) -> Client:
    """A client for the configured ClickHouse, with its TLS options; ClickHouseUnreachable says why not.

    ``create`` False (a command that only reads): NoStore when the embedded directory or the
    database is not there, and nothing is created where it looked.
    """
    dsn = settings.resolved_clickhouse_dsn
    if dsn.startswith(EMBEDDED_SCHEME):
        path = Path(dsn.removeprefix(EMBEDDED_SCHEME))
        if not create and not path.is_dir():
            raise NoStore(_no_store(settings, database_only=False))
        directory = writable_dir(path, "embedded ClickHouse")
        pid = holder(directory)
        if pid is not None:  # asked before chDB, which would print its own failure on stderr
            raise EmbeddedInUse(f"ClickHouse at {redacted_dsn(dsn)}", pid, holder_words(directory, pid))
    try:
        with _driver_warnings_muted():
            client = connect(dsn, **settings.clickhouse_tls.client_options(dsn))
    except ClickHouseError as exc:
        raise ClickHouseUnreachable(f"ClickHouse at {redacted_dsn(dsn)}", str(exc)) from exc
    database = settings.clickhouse_database
    if not create and not client.command(f"EXISTS DATABASE {database}"):
        client.close()
        raise NoStore(_no_store(settings, database_only=True))
    return client


def _no_store(settings: Settings, database_only: bool) -> str:
    """What is missing (the ClickHouse, or only its database), where it was looked for, and what makes a store."""
    dsn, database = settings.resolved_clickhouse_dsn, settings.clickhouse_database
    if not dsn.startswith(EMBEDDED_SCHEME):
        source = settings.source_of("clickhouse_dsn") or "clickhouse_dsn"
        return (f"no halluwatch store yet: ClickHouse at {redacted_dsn(dsn)} (from {source}) has no database "
                f"{database}; `halluwatch migrate` creates it, as a worker does when it starts")  # fmt: skip
    source = settings.source_of("data_dir")
    looked = f"data directory {settings.data_dir} ({f'from {source}' if source else 'the default, in this directory'})"
    demo = settings.data_dir / "demo"
    beside = (f"; the demo's store is in {demo}: `halluwatch --data-dir {demo} ...` reads it"
              if (demo / "clickhouse").is_dir() else "")  # fmt: skip
    holds = f"no database {database} in its embedded ClickHouse" if database_only else "no embedded ClickHouse"
    return (f"no halluwatch store yet: {looked} holds {holds}{beside}; `halluwatch demo` makes one "
            "with example traces (then `halluwatch --data-dir .halluwatch/demo ...` reads it), `halluwatch migrate` "
            "an empty one, and a worker one as it starts")  # fmt: skip


@contextlib.contextmanager
def _driver_warnings_muted() -> Iterator[None]:
    """Drop the HTTP drivers' warnings while connecting: the error raised says the same, once.

    (urllib3 warns of its retry and clickhouse-connect of the failure, two lines before ours.)
    """
    loggers = [logging.getLogger(name) for name in _DRIVER_LOGGERS]
    levels = [each.level for each in loggers]
    for each in loggers:
        each.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for each, level in zip(loggers, levels, strict=True):
            each.setLevel(level)


def open_migrated(settings: Settings) -> Client:
    """A client for the configured ClickHouse with pending migrations applied, waiting for it to come up.

    A worker may start while ClickHouse restarts: connecting and migrating are retried with
    backoff (up to ``write_retry_max_seconds`` apart), each failure logged, for
    ``clickhouse_startup_wait_seconds``; then :class:`ClickHouseUnreachable` says where and why,
    rather than a worker that looks alive but never consumes.
    """
    where = f"ClickHouse at {redacted_dsn(settings.resolved_clickhouse_dsn)}"
    deadline = time.monotonic() + settings.clickhouse_startup_wait_seconds
    delay = 0.5
    while True:
        try:
            return _open_and_migrate(settings)
        except Exception as exc:  # driver errors are many types; all mean "not ready"
            reason = exc.reason if isinstance(exc, ClickHouseUnreachable) else str(exc)
            if time.monotonic() + delay > deadline:
                waited = settings.clickhouse_startup_wait_seconds
                raise ClickHouseUnreachable(f"{where} not ready within {waited:g}s", reason, waited) from exc
            logger.warning("%s not ready, retrying in %.1fs: %s", where, delay, reason)
        time.sleep(delay)
        delay = min(delay * 2, settings.write_retry_max_seconds)


def _open_and_migrate(settings: Settings) -> Client:
    client = open_clickhouse(settings)
    try:
        applied = migrate(client, settings.clickhouse_database, settings.retention, settings.clickhouse_cluster)
    except BaseException:
        client.close()
        raise
    if applied:
        logger.info("applied ClickHouse migrations: %s", ", ".join(applied))
    return client


def migrate(client: Client, database: str, retention: RetentionSettings | None = None, cluster: str = "") -> list[str]:
    """Create the database, apply pending migrations and ``retention``'s TTLs; returns what was applied now.

    ``retention`` None leaves the tables' TTLs as they are; ``cluster`` renders every statement
    for that cluster (:class:`~pipeline.sinks.ddl.Layout`).  A database with nothing pending
    and its retention unchanged is only read: a worker that signs in with ``SELECT`` and
    ``INSERT`` alone (infra/README.md) starts once ``halluwatch migrate`` has run as a user
    that may create tables.
    """
    layout = Layout(database, cluster)
    applied = _apply_pending(client, layout) if pending_migrations(client, database) else []
    changed = apply_retention(client, layout, retention) if retention is not None else None
    return [*applied, changed] if changed else applied


def _apply_pending(client: Client, layout: Layout) -> list[str]:
    """Create the database and its migrations table, apply the migrations it lacks; their names."""
    database = layout.database
    client.command(layout.render("CREATE DATABASE IF NOT EXISTS {database}"))
    client.command(
        layout.render(
            f"CREATE TABLE IF NOT EXISTS {{database}}.{MIGRATIONS_TABLE} "
            "(version UInt32, name String, applied_at DateTime DEFAULT now()) "
            "ENGINE = ReplacingMergeTree ORDER BY version"
        )
    )
    done = {row[0] for row in client.query(f"SELECT version FROM {database}.{MIGRATIONS_TABLE}").result_rows}  # noqa: S608 - identifiers validated, values bound
    applied = []
    for migration in migrations():
        if migration.version in done:
            continue
        client.command(layout.render(migration.sql_template))
        client.insert(
            f"{database}.{MIGRATIONS_TABLE}",
            [[migration.version, migration.name]],
            column_names=["version", "name"],
        )
        applied.append(f"{migration.version:03d}_{migration.name}")
    return applied


def pending_migrations(client: Client, database: str) -> int:
    """How many migrations of this release ``database`` lacks (all, without its migrations table)."""
    versions = {migration.version for migration in migrations()}
    if str(client.command(f"EXISTS TABLE {database}.{MIGRATIONS_TABLE}")).strip() != "1":
        return len(versions)
    done = {row[0] for row in client.query(f"SELECT version FROM {database}.{MIGRATIONS_TABLE}").result_rows}  # noqa: S608 - identifiers validated
    return len(versions - done)


class Sink(ABC):
    """Where processed rows go.  ``add`` buffers; ``flush`` makes them durable.

    The worker commits Kafka offsets only after ``flush`` returned.  ``flush`` must raise
    :class:`SinkUnavailable` (keeping its buffer) rather than drop rows.
    """

    @abstractmethod
    def add(self, table: str, rows: Sequence[Sequence[Any]]) -> None:
        """Buffer rows of ``table``, shaped like its ``TABLE_COLUMNS`` entry."""

    @abstractmethod
    def flush(self) -> None:
        """Write everything buffered."""

    def close(self) -> None:  # noqa: B027 - sinks without resources need nothing here
        """Release connections."""


class ClickHouseSink(Sink):
    """Batched inserts; one insert per table per flush."""

    def __init__(self, client: Client, database: str, retry_after_seconds: float = 1.0) -> None:
        self._client = client
        self._database = database
        self._retry_after_seconds = retry_after_seconds
        self._buffers: dict[str, list[Sequence[Any]]] = {table: [] for table in TABLE_COLUMNS}

    def add(self, table: str, rows: Sequence[Sequence[Any]]) -> None:
        """Buffer rows until the next flush."""
        if table not in self._buffers:
            raise ValueError(f"unknown table {table!r}; expected one of {', '.join(self._buffers)}")
        self._buffers[table].extend(rows)

    def flush(self) -> None:
        """Insert buffered rows; on failure keep them and raise :class:`SinkUnavailable`."""
        try:
            # Each table is cleared only once its own insert succeeded, so a retry after a
            # partial failure re-sends just the rest (and duplicates would merge anyway).
            for table, rows in self._buffers.items():
                if rows:
                    started = time.perf_counter()
                    self._client.insert(f"{self._database}.{table}", rows, column_names=TABLE_COLUMNS[table])
                    metrics.CLICKHOUSE_INSERT_SECONDS.labels(table).observe(time.perf_counter() - started)
                    metrics.CLICKHOUSE_INSERT_ROWS.labels(table).observe(len(rows))
                    self._buffers[table] = []
        except Exception as exc:  # driver errors are many types; all mean "not written"
            raise SinkUnavailable(f"ClickHouse insert failed: {exc}", self._retry_after_seconds) from exc

    def close(self) -> None:
        """Close the client."""
        self._client.close()
