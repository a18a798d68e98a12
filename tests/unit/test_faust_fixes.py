"""Commits never pass a record that was not acked; the watchdog re-reads holes nobody will fill.

The consumer here is a stand-in holding the few pieces of faust state the watchdog reads;
tests/integration/test_crash_recovery.py is where the real defect showed (and no longer does).
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from faust.types import TP

from pipeline.stream.dropped_records import SkippedRecordsWatchdog, commit_only_contiguous
from pipeline.stream.plumbing import BATCHES

SPANS = TP("spans", 0)
CHANGELOG = TP("app-table-changelog", 0)


@dataclass(frozen=True)
class Message:
    tp: TP


@dataclass
class Consumer:
    positions: dict[TP, int]
    flow_active: bool = True
    _committed_offset: dict[TP, int | None] = field(default_factory=dict)
    _read_offset: dict[TP, int | None] = field(default_factory=dict)
    _acked: defaultdict[TP, list[int]] = field(default_factory=lambda: defaultdict(list))
    _acked_index: defaultdict[TP, set[int]] = field(default_factory=lambda: defaultdict(set))
    _unacked_messages: set[Any] = field(default_factory=set)
    seeks: list[tuple[TP, int]] = field(default_factory=list)

    def assignment(self) -> set[TP]:
        return set(self.positions)

    async def position(self, tp: TP) -> int:
        return self.positions[tp]

    async def perform_seek(self) -> None:
        self.seeks.append((SPANS, -1))  # faust's own seek; committed offsets are set by the test

    async def earliest_offsets(self, *tps: TP) -> dict[TP, int]:
        return dict.fromkeys(tps, 3)  # as after retention deleted the first records

    async def seek(self, tp: TP, offset: int) -> None:
        self.seeks.append((tp, offset))
        self.positions[tp] = offset
        self._read_offset[tp] = offset


class App:
    def __init__(self, consumer: Consumer) -> None:
        self.consumer = consumer
        self.rebalancing = False
        self.tables = SimpleNamespace(changelog_topics={CHANGELOG.topic})
        self.look: Callable[[], Awaitable[None]] | None = None

    def timer(self, interval: float) -> Callable[[Callable[[], Awaitable[None]]], None]:
        def register(function: Callable[[], Awaitable[None]]) -> None:
            self.look = function

        return register


def looks(app: App, times: int = 2) -> list[tuple[TP, int]]:
    assert app.look is not None
    for _ in range(times):
        asyncio.run(app.look())
    return app.consumer.seeks


def watched(consumer: Consumer) -> App:
    app = App(consumer)
    SkippedRecordsWatchdog(app, 1.0)  # type: ignore[arg-type]
    return app


def test_fetched_but_undelivered_records_are_read_again_from_the_committed_offset():
    consumer = Consumer({SPANS: 383}, _committed_offset={SPANS: 112}, _read_offset={SPANS: 112})
    app = watched(consumer)
    assert looks(app, 1) == []  # one look is not enough: records may be on their way
    assert looks(app, 1) == [(SPANS, 112)]


def test_a_partition_never_committed_is_read_again_from_its_start():
    assert looks(watched(Consumer({SPANS: 383}, _read_offset={SPANS: None}))) == [(SPANS, 0)]


def test_records_delivered_up_to_the_position_are_left_alone():
    consumer = Consumer({SPANS: 200}, _committed_offset={SPANS: 150}, _read_offset={SPANS: 199})
    consumer._acked[SPANS] = list(range(150, 200))
    consumer._acked_index[SPANS].update(range(150, 200))
    assert looks(watched(consumer)) == []


def test_a_fresh_seek_with_nothing_fetched_yet_is_left_alone():
    assert looks(watched(Consumer({SPANS: 112}, _committed_offset={SPANS: 112}, _read_offset={SPANS: 112}))) == []


def test_records_in_flight_or_progress_between_looks_are_left_alone():
    in_flight = Consumer({SPANS: 383}, _committed_offset={SPANS: 5}, _read_offset={SPANS: 5})
    in_flight._unacked_messages.add(Message(SPANS))
    assert looks(watched(in_flight)) == []

    moving = Consumer({SPANS: 383}, _committed_offset={SPANS: 5}, _read_offset={SPANS: 5})
    app = watched(moving)
    looks(app, 1)
    moving._read_offset[SPANS] = 40
    assert looks(app, 1) == []


def test_nothing_is_judged_while_rebalancing_or_on_changelogs():
    consumer = Consumer({SPANS: 383, CHANGELOG: 90}, _read_offset={SPANS: None, CHANGELOG: None})
    app = watched(consumer)
    app.rebalancing = True
    assert looks(app) == []
    app.rebalancing = False
    assert looks(app) == [(SPANS, 0)]  # the changelog partition is the recovery's business


def test_a_hole_before_the_first_acked_record_is_read_again():
    # Offsets 5..20 were dropped, 21..382 delivered and acked: faust can never commit past 5.
    consumer = Consumer({SPANS: 383}, _committed_offset={SPANS: 5}, _read_offset={SPANS: 382})
    consumer._acked[SPANS] = list(range(21, 383))
    consumer._acked_index[SPANS].update(range(21, 383))
    assert looks(watched(consumer)) == [(SPANS, 5)]


def contiguous(committed: int | None, acked: list[int]) -> tuple[Consumer, int | None]:
    consumer = Consumer({SPANS: 100}, _committed_offset={SPANS: committed})
    consumer._acked[SPANS] = list(acked)
    consumer._acked_index[SPANS].update(acked)
    commit_only_contiguous(App(consumer))  # type: ignore[arg-type]
    return consumer, consumer._new_offset(SPANS)  # type: ignore[attr-defined]


def test_a_commit_covers_only_the_acked_run_from_the_committed_offset():
    consumer, offset = contiguous(5, [7, 5, 6, 9, 10])
    assert offset == 8 and consumer._acked[SPANS] == [9, 10] and consumer._acked_index[SPANS] == {9, 10}


def test_a_missing_record_at_the_committed_offset_holds_the_commit_back():
    # faust 0.15 commits 11 here, over record 5 that never came.
    assert contiguous(5, [6, 7, 8, 9, 10])[1] is None
    assert contiguous(None, [21, 22])[1] is None  # no known start: nothing to commit


def test_acks_from_before_a_seek_back_are_dropped_once_committed():
    consumer, offset = contiguous(5, [2, 3, 5, 6])
    assert offset == 7 and consumer._acked[SPANS] == []


def test_never_committed_stream_partitions_start_at_their_earliest_offset():
    consumer = Consumer({SPANS: 50, CHANGELOG: 9}, _committed_offset={SPANS: None, CHANGELOG: None})
    commit_only_contiguous(App(consumer))  # type: ignore[arg-type]
    asyncio.run(consumer.perform_seek())
    assert consumer.seeks == [(SPANS, -1), (SPANS, 3)]  # faust's seek, then ours; not the changelog
    assert consumer._committed_offset[SPANS] == 3 and consumer._committed_offset[CHANGELOG] is None


def test_an_idle_worker_rereads_records_stuck_past_the_committed_offset_whatever_faust_says():
    # faust tracks a message of the partition that never reached a stream: "in flight" forever.
    stuck = Consumer({SPANS: 383}, _committed_offset={SPANS: 5}, _read_offset={SPANS: 382})
    stuck._unacked_messages.add(Message(SPANS))
    app = watched(stuck)
    assert looks(app, 2) == []
    assert looks(app, 1) == [(SPANS, 5)]  # the third look without any batch activity


def test_a_batch_in_progress_is_never_taken_for_a_stuck_worker():
    busy = Consumer({SPANS: 383}, _committed_offset={SPANS: 5}, _read_offset={SPANS: 382})
    busy._unacked_messages.add(Message(SPANS))  # e.g. the batch held while ClickHouse is down
    app = watched(busy)
    with BATCHES.batch():
        assert looks(app, 5) == []
