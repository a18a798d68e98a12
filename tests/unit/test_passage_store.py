"""The passage store on a real SQLite file: exact bytes back, expiry, the size bound, failures off the hot path."""

from __future__ import annotations

import logging
import sqlite3
import time
from pathlib import Path

import numpy as np
import pytest

from detectors.config import EmbeddingConfig
from detectors.models.embeddings import Embedder, TokenVectors
from detectors.models.passage_store import PassageStore


def store(path: Path, **options: float) -> tuple[PassageStore, list[tuple[int, int]], list[tuple[int, int]]]:
    reads: list[tuple[int, int]] = []
    sizes: list[tuple[int, int]] = []
    opened = PassageStore(
        path,
        max_megabytes=int(options.get("max_megabytes", 10)),
        ttl_hours=options.get("ttl_hours", 1.0),
        on_read=lambda hits, misses: reads.append((hits, misses)),
        on_size=lambda size, parts: sizes.append((size, parts)),
    )
    return opened, reads, sizes


def tokens(seed: int, count: int = 5, dimension: int = 8) -> TokenVectors:
    rng = np.random.default_rng(seed)
    vectors = rng.standard_normal((count, dimension)).astype(np.float32)
    offsets = tuple((3 * i, 3 * i + 2) for i in range(count))
    return TokenVectors(vectors, offsets, rng.random(count).astype(np.float32))


def test_token_vectors_come_back_bit_for_bit() -> None:
    original = tokens(1)
    again = TokenVectors.from_bytes(original.to_bytes(), 8)
    assert again.vectors.tobytes() == original.vectors.tobytes()
    assert again.norms is not None and original.norms is not None
    assert again.norms.tobytes() == original.norms.tobytes()
    assert again.offsets == original.offsets
    with pytest.raises(ValueError, match="not tokens of 9 dimensions"):
        TokenVectors.from_bytes(original.to_bytes(), 9)


def test_reads_what_was_written_across_reopening(tmp_path: Path) -> None:
    first, reads, sizes = store(tmp_path / "passages.sqlite")
    parts = {b"a" * 20: tokens(1).to_bytes(), b"b" * 20: tokens(2).to_bytes()}
    first.write(parts)
    first.close()
    second, reads, sizes_again = store(tmp_path / "passages.sqlite")  # a restarted worker
    assert second.read([b"a" * 20, b"c" * 20, b"b" * 20]) == parts
    assert reads == [(2, 1)]
    size = sum(map(len, parts.values()))
    assert sizes == [(0, 0), (size, 2)]  # on opening, then after the first write's trim
    assert sizes_again == [(size, 2)]  # what the restarted worker found


def test_parts_unread_past_the_ttl_are_not_served_and_are_trimmed(tmp_path: Path) -> None:
    opened, _, sizes = store(tmp_path / "passages.sqlite", ttl_hours=0.5 / 3600)  # half a second
    opened.write({b"old": b"x" * 40})
    time.sleep(0.6)
    assert opened.read([b"old"]) == {}
    opened.write({b"new": b"y" * 40})
    opened.trim()
    assert sizes[-1] == (40, 1)
    assert opened.read([b"new"]) == {b"new": b"y" * 40}


def test_past_the_size_bound_the_least_recently_read_go_first(tmp_path: Path) -> None:
    opened, _, sizes = store(tmp_path / "passages.sqlite", max_megabytes=1)
    part = b"z" * 300_000
    opened.write({b"first": part})
    time.sleep(0.01)
    opened.write({b"second": part})
    time.sleep(0.01)
    opened.write({b"third": part})
    opened.write({b"fourth": part})  # 1.2 MB: over the bound
    opened.trim()
    assert sizes[-1] == (900_000, 3)  # down to 90 % of the bound, so the next write does not trim at once
    assert set(opened.read([b"first", b"second", b"third", b"fourth"])) == {b"second", b"third", b"fourth"}


def test_the_size_is_summed_from_an_index_not_through_the_rows_blobs(tmp_path: Path) -> None:
    path = tmp_path / "passages.sqlite"
    with sqlite3.connect(path) as old:  # a file of the first schema: read times indexed alone
        old.executescript(
            "CREATE TABLE passages (key BLOB PRIMARY KEY, vectors BLOB NOT NULL, bytes INTEGER NOT NULL,"
            " read_at REAL NOT NULL); CREATE INDEX passages_read_at ON passages (read_at);"
        )
        old.execute("INSERT INTO passages VALUES (?, ?, ?, ?)", (b"kept", b"v" * 200_000, 200_000, time.time()))
    old.close()
    opened, _, sizes = store(path)
    opened.open()
    assert sizes == [(200_000, 1)]  # reported on opening, the old rows kept
    queries = (
        "SELECT COALESCE(SUM(bytes), 0), COUNT(*) FROM passages",  # the size, at opening and every trim
        "SELECT read_at, SUM(bytes) OVER (ORDER BY read_at) FROM passages",  # where the size bound cuts
    )
    with sqlite3.connect(path) as reader:
        scans = [row[-1] for query in queries for row in reader.execute(f"EXPLAIN QUERY PLAN {query}")
                 if row[-1].startswith("SCAN passages")]  # fmt: skip
        indexes = {row[0] for row in reader.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    reader.close()
    assert scans == ["SCAN passages USING COVERING INDEX passages_read_at_bytes"] * 2
    assert "passages_read_at" not in indexes
    assert opened.read([b"kept"]) == {b"kept": b"v" * 200_000}


def test_the_embedder_opens_its_store_as_it_loads_the_model(tmp_path: Path, model_cache_dir: Path) -> None:
    opened, reads, sizes = store(tmp_path / "passages.sqlite")
    embedder = Embedder(EmbeddingConfig(cache_dir=model_cache_dir), opened)
    embedder.load()  # a worker's start: the file opened and its size reported before the first batch
    assert sizes == [(0, 0)] and reads == []
    embedder.close()


def test_a_store_that_cannot_open_reads_as_empty_and_logs_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocked = tmp_path / "a-directory"
    blocked.mkdir()
    opened, reads, _ = store(blocked)  # SQLite cannot open a directory as its file
    with caplog.at_level(logging.ERROR, "detectors.models.passage_store"):
        opened.write({b"a": b"1"})
        assert opened.read([b"a", b"b"]) == {}
        assert opened.read([b"a"]) == {}
    assert reads == [(0, 2), (0, 1)]
    assert len([r for r in caplog.records if "passage store" in r.getMessage()]) == 1


def test_settings_out_of_range_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="max_megabytes"):
        PassageStore(tmp_path / "p.sqlite", max_megabytes=0, ttl_hours=1)
    with pytest.raises(ValueError, match="ttl_hours"):
        PassageStore(tmp_path / "p.sqlite", max_megabytes=1, ttl_hours=0)
