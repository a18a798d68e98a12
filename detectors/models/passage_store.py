"""The passage store: source parts' token embeddings on disk, so a part is encoded once, not once per process.

In a RAG application the same chunks of the same documents are retrieved again and again;
the embedder's in-memory cache keeps the last source parts of one process, which a restart
empties and no other worker shares.  This store keeps them in an SQLite file.

Design choices (bench/README.md, "The passage store", has the measurements):

* **SQLite on a local disk, not a ClickHouse table.**  A batch's parts are read with one
  ``SELECT ... WHERE key IN (...)`` before the model runs and the fresh ones written with one
  transaction after it; the workers of one host share the file (WAL mode: readers never
  wait for the writer).  ClickHouse would share across hosts, but a part's matrix is
  ~170 kB, and moving a batch's megabytes through the server costs about what encoding them
  again does on a warm host.
* **Keys, not names.**  The caller hashes the encoder, its version and the reading rules
  together with the part's text (:meth:`Embedder.store_key`): a new model or new rules
  never read an old vector; the old rows age out.
* **Exact bytes.**  The store keeps what the embedder gives it (a part's vectors, norms
  and character offsets as float32/int32 arrays, :meth:`TokenVectors.to_bytes`) and returns
  it bit for bit: a part read back is the part as its batch encoded it.
* **Bounded.**  A part unread for ``ttl_hours`` is dropped, and past ``max_megabytes`` the
  least recently read go first; both are enforced after writes, at most once a minute.
  The size comes from an index of ``(read_at, bytes)``: a column stored after a row's blob
  is reached only through the blob's overflow pages, so summing it from the table read
  every page of the file (50 ms at 500 MB, at every opening and trim; 0.4 ms from the index).
* **Never on the hot path's failure list.**  An SQLite error (disk full, a locked file past
  the timeout) is logged once and counted: the batch is encoded as if the store were empty.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

logger = logging.getLogger(__name__)

# hits, misses of one read; bytes and parts held after a write
ReadObserver = Callable[[int, int], None]
SizeObserver = Callable[[int, int], None]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS passages (
    key BLOB PRIMARY KEY,
    vectors BLOB NOT NULL,
    bytes INTEGER NOT NULL,
    read_at REAL NOT NULL
);
DROP INDEX IF EXISTS passages_read_at;
CREATE INDEX IF NOT EXISTS passages_read_at_bytes ON passages (read_at, bytes);
"""
_SIZE = "SELECT COALESCE(SUM(bytes), 0), COUNT(*) FROM passages"
_TOUCH_SECONDS = 3600.0  # a hit refreshes a row's read time at most this often (a write per hour, not per read)
_TRIM_SECONDS = 60.0
_LOCK_TIMEOUT_SECONDS = 5.0
_KEYS_PER_QUERY = 500  # under SQLite's bound on a statement's parameters


class PassageStore:
    """Encoded source parts (bytes) by key, in an SQLite file; thread-safe, opened on first use."""

    def __init__(
        self,
        path: Path,
        *,
        max_megabytes: int,
        ttl_hours: float,
        on_read: ReadObserver | None = None,
        on_size: SizeObserver | None = None,
    ) -> None:
        if max_megabytes < 1:
            raise ValueError(f"max_megabytes must be at least 1, not {max_megabytes}")
        if ttl_hours <= 0:
            raise ValueError(f"ttl_hours must be positive, not {ttl_hours}")
        self.path = path
        self._max_bytes = max_megabytes * 1_000_000
        self._ttl_seconds = ttl_hours * 3600.0
        self._on_read = on_read or (lambda _hits, _misses: None)
        self._on_size = on_size or (lambda _bytes, _parts: None)
        self._lock = threading.Lock()
        self._connection: sqlite3.Connection | None = None
        self._trimmed_at = 0.0
        self._failed = False  # logged once; counted every time by the read observer (as misses)

    def read(self, keys: Sequence[bytes]) -> dict[bytes, bytes]:
        """The stored parts of those ``keys`` that are in the store."""
        if not keys:
            return {}
        found: dict[bytes, bytes] = {}
        now = time.time()
        try:
            with self._lock:
                connection = self._open()
                stale: list[bytes] = []
                for first in range(0, len(keys), _KEYS_PER_QUERY):
                    chunk = list(keys[first : first + _KEYS_PER_QUERY])
                    rows = connection.execute(
                        f"SELECT key, vectors, read_at FROM passages WHERE key IN ({','.join('?' * len(chunk))})",  # noqa: S608 - placeholders only
                        chunk,
                    ).fetchall()
                    for key, blob, read_at in rows:
                        if now - read_at > self._ttl_seconds:
                            continue  # expired, not yet trimmed
                        found[key] = blob
                        if now - read_at > _TOUCH_SECONDS:
                            stale.append(key)
                if stale:
                    with connection:
                        connection.executemany(
                            "UPDATE passages SET read_at = ? WHERE key = ?", [(now, k) for k in stale]
                        )
        except sqlite3.Error:
            self._fail("reading")
            found = {}
        self._on_read(len(found), len(keys) - len(found))
        return found

    def write(self, parts: Mapping[bytes, bytes]) -> None:
        """Keep ``parts`` (replacing rows of the same key), then trim the store if it is due."""
        if not parts:
            return
        now = time.time()
        rows = [(key, blob, len(blob), now) for key, blob in parts.items()]
        try:
            with self._lock:
                connection = self._open()
                with connection:
                    connection.executemany("INSERT OR REPLACE INTO passages VALUES (?, ?, ?, ?)", rows)
                if now - self._trimmed_at >= _TRIM_SECONDS:
                    self._trim(connection, now)
        except sqlite3.Error:
            self._fail("writing")

    def trim(self) -> None:
        """Drop expired parts, then the least recently read past the size bound; report the size."""
        try:
            with self._lock:
                self._trim(self._open(), time.time())
        except sqlite3.Error:
            self._fail("trimming")

    def open(self) -> None:
        """Open the file now (a worker's start), not at the first batch's read."""
        try:
            with self._lock:
                self._open()
        except sqlite3.Error:
            self._fail("opening")

    def close(self) -> None:
        """Close the file (a later call opens it again)."""
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None

    def _open(self) -> sqlite3.Connection:
        if self._connection is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            connection = sqlite3.connect(self.path, timeout=_LOCK_TIMEOUT_SECONDS, check_same_thread=False)
            # Rows are ~170 kB: large pages write them in a few page writes, not forty (a new file only).
            connection.execute("PRAGMA page_size=65536")
            connection.execute("PRAGMA journal_mode=WAL")
            connection.execute("PRAGMA synchronous=NORMAL")  # a lost last write on power loss is a re-encode
            connection.executescript(_SCHEMA)
            self._on_size(*connection.execute(_SIZE).fetchone())  # what a restarted worker finds
            self._connection = connection
            logger.info("passage store %s: up to %d MB, parts unread for %g h dropped",
                        self.path, self._max_bytes // 1_000_000, self._ttl_seconds / 3600)  # fmt: skip
        return self._connection

    def _trim(self, connection: sqlite3.Connection, now: float) -> None:
        """Drop what is due (caller holds the lock).

        Sizes come from the ``bytes`` column: SQLite's ``LENGTH`` of a blob reads the whole blob.
        """
        self._trimmed_at = now
        with connection:
            connection.execute("DELETE FROM passages WHERE read_at < ?", (now - self._ttl_seconds,))
            size, parts = connection.execute(_SIZE).fetchone()
            if size > self._max_bytes:
                # The least recently read first, down to 90 % of the bound, so the next writes do not trim at once.
                cut = connection.execute(
                    "SELECT read_at FROM (SELECT read_at, SUM(bytes) OVER (ORDER BY read_at) AS running "
                    "FROM passages) WHERE running >= ? LIMIT 1",
                    (size - int(self._max_bytes * 0.9),),
                ).fetchone()
                connection.execute("DELETE FROM passages WHERE read_at <= ?", cut)
                size, parts = connection.execute(_SIZE).fetchone()
        self._on_size(int(size), int(parts))

    def _fail(self, doing: str) -> None:
        if not self._failed:
            logger.exception("passage store %s: %s failed; encoding without the store until it works", self.path, doing)
        self._failed = True
