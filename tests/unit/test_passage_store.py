"""The passage store on a real SQLite file: exact bytes back, expiry, the size bound, failures off the hot path."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import numpy as np
import pytest

from detectors.models.embeddings import TokenVectors
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
