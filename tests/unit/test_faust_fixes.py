"""The skipped-records watchdog acts only on a settled partition with a hole nobody will fill.

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

from pipeline.faust_fixes import SkippedRecordsWatchdog

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
