"""Commits never pass a record that was not acked; the watchdog re-reads holes nobody will fill.

The consumer here is a stand-in holding the few pieces of faust state the watchdog reads;
tests/integration/test_crash_recovery.py is where the real defect showed (and no longer does).
"""

from __future__ import annotations

import asyncio
import inspect
import os
import subprocess
import sys
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import faust
import pytest
from faust.transport import consumer as faust_consumer
from faust.transport.drivers import aiokafka as faust_aiokafka
from faust.types import TP

from pipeline.stream.dropped_records import (
    FaustInternalsChanged,
    SkippedRecordsWatchdog,
    check_faust_internals,
    commit_only_contiguous,
)
from pipeline.stream.plumbing import BATCHES

SPANS = TP("spans", 0)
CHANGELOG = TP("app-table-changelog", 0)


@dataclass(frozen=True)
class Message:
    tp: TP
    offset: int = 0


@dataclass
class Consumer:
    positions: dict[TP, int]
    flow_active: bool = True
    _committed_offset: dict[TP, int | None] = field(default_factory=dict)
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

    async def callback(self, message: Message) -> None:
        """faust's hand-over of a record to the streams (here: nothing to hand it to)."""

    async def getmany(self, timeout: float) -> AsyncIterator[tuple[TP, Message]]:
        return
        yield  # an async generator, as faust's is


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


def looks(app: App, times: int = 2, *, fetching: bool = True) -> list[tuple[TP, int]]:
    """Let the watchdog look ``times``; after each look faust begins a fetch unless not ``fetching``."""
    assert app.look is not None
    for _ in range(times):
        asyncio.run(app.look())
        if fetching:
            app.consumer.getmany(timeout=1.0)  # as faust's fetch loop calls it, once the batch before is done
    return app.consumer.seeks


def watched(consumer: Consumer, *handed_over: int) -> App:
    """``consumer`` under a watchdog, after faust handed the records at ``handed_over`` of SPANS to the streams."""
    app = App(consumer)
    SkippedRecordsWatchdog(app, 1.0)  # type: ignore[arg-type]
    hand_over(app, *handed_over)
    return app


def hand_over(app: App, *offsets: int) -> None:
    for offset in offsets:
        asyncio.run(app.consumer.callback(Message(SPANS, offset)))  # through the watchdog's wrapper


def test_fetched_but_undelivered_records_are_read_again_from_the_committed_offset():
    consumer = Consumer({SPANS: 383}, _committed_offset={SPANS: 112})
    app = watched(consumer)
    assert looks(app, 1) == []  # one look is not enough: records may be on their way
    assert looks(app, 1) == [(SPANS, 112)]


def test_records_behind_a_hand_over_that_waits_are_left_alone_until_faust_fetches_again():
    # One stream's full buffer holds faust's hand-over of a batch mixing every topic: the
    # records after it are fetched, not delivered, and on their way.
    consumer = Consumer({SPANS: 383}, _committed_offset={SPANS: 112})
    app = watched(consumer)
    with BATCHES.batch():  # the stage behind the full buffer
        assert looks(app, 5, fetching=False) == []
    assert looks(app, 1) == []  # the batch was handed on whole: faust begins the next fetch
    assert looks(app, 1) == [(SPANS, 112)]  # ... and the records of the look before never came


def test_a_partition_never_committed_is_read_again_from_its_start():
    assert looks(watched(Consumer({SPANS: 383}, _committed_offset={SPANS: 0}))) == [(SPANS, 0)]


def test_a_partition_whose_start_is_not_sought_yet_is_left_alone():
    # Assigned by a rebalance that began while the watchdog looked: 0 would re-read all of it.
    assert looks(watched(Consumer({SPANS: 383}))) == []


def test_records_delivered_up_to_the_position_are_left_alone():
    consumer = Consumer({SPANS: 200}, _committed_offset={SPANS: 150})
    consumer._acked[SPANS] = list(range(150, 200))
    consumer._acked_index[SPANS].update(range(150, 200))
    assert looks(watched(consumer, *range(150, 200))) == []


def test_a_record_at_the_committed_offset_waiting_in_a_stream_buffer_is_left_alone():
    # Handed over, not taken by its stream yet (so neither in flight nor acked); faust's read
    # offset says 7 for it as for a seek to 7, and the watchdog once took it for a hole.
    app = watched(Consumer({SPANS: 8}, _committed_offset={SPANS: 7}), 7)
    with BATCHES.batch():  # its stage is busy with the batch before
        assert looks(app, 5) == []


def test_a_record_faust_dropped_mid_hand_over_is_read_again():
    # A pause cancels the hand-over; faust's read offset moves past the record all the same.
    consumer = Consumer({SPANS: 8}, _committed_offset={SPANS: 7})

    async def cancelled(message: Message) -> None:
        raise asyncio.CancelledError

    consumer.callback = cancelled  # type: ignore[method-assign]
    app = watched(consumer)
    with pytest.raises(asyncio.CancelledError):
        hand_over(app, 7)
    assert looks(app) == [(SPANS, 7)]


def test_a_fresh_seek_with_nothing_fetched_yet_is_left_alone():
    assert looks(watched(Consumer({SPANS: 112}, _committed_offset={SPANS: 112}))) == []


def test_records_in_flight_or_progress_between_looks_are_left_alone():
    in_flight = Consumer({SPANS: 383}, _committed_offset={SPANS: 5})
    in_flight._unacked_messages.add(Message(SPANS))
    assert looks(watched(in_flight)) == []

    moving = Consumer({SPANS: 383}, _committed_offset={SPANS: 5})
    app = watched(moving)
    looks(app, 1)
    hand_over(app, 40)
    assert looks(app, 1) == []


def test_nothing_is_judged_while_rebalancing_or_on_changelogs():
    consumer = Consumer({SPANS: 383, CHANGELOG: 90}, _committed_offset={SPANS: 0})
    app = watched(consumer)
    app.rebalancing = True
    assert looks(app) == []
    app.rebalancing = False
    assert looks(app) == [(SPANS, 0)]  # the changelog partition is the recovery's business


def test_a_hole_before_the_first_acked_record_is_read_again():
    # Offsets 5..20 were dropped, 21..382 delivered and acked: faust can never commit past 5.
    consumer = Consumer({SPANS: 383}, _committed_offset={SPANS: 5})
    consumer._acked[SPANS] = list(range(21, 383))
    consumer._acked_index[SPANS].update(range(21, 383))
    assert looks(watched(consumer, *range(21, 383))) == [(SPANS, 5)]


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
    stuck = Consumer({SPANS: 383}, _committed_offset={SPANS: 5})
    stuck._unacked_messages.add(Message(SPANS))
    app = watched(stuck, 382)
    assert looks(app, 2) == []
    assert looks(app, 1) == [(SPANS, 5)]  # the third look without any batch activity


def test_a_batch_in_progress_is_never_taken_for_a_stuck_worker():
    busy = Consumer({SPANS: 383}, _committed_offset={SPANS: 5})
    busy._unacked_messages.add(Message(SPANS))  # e.g. the batch held while ClickHouse is down
    app = watched(busy, 382)
    with BATCHES.batch():
        assert looks(app, 5) == []


FAUST = f"faust-streaming {version('faust-streaming')}: pipeline/stream/dropped_records.py relies on"


def test_the_installed_faust_has_every_internal_the_work_around_uses():
    check_faust_internals()
    # The checked class is the one a kafka:// app really gets.
    app = faust.App("probe", broker="kafka://127.0.0.1:1", autodiscover=False, web_enabled=False, store="memory://")
    assert type(app.consumer) is faust_aiokafka.Consumer
    check_faust_internals(type(app.consumer))


@pytest.mark.parametrize(
    ("owner", "name", "named"),
    [
        (faust_consumer.Consumer, "_add_gap", "Consumer._add_gap"),
        (faust_consumer.Consumer, "_new_offset", "Consumer._new_offset"),
        (faust_consumer.Consumer, "flow_active", "Consumer.flow_active"),
    ],
)
def test_a_faust_without_an_internal_fails_naming_version_and_attribute(monkeypatch, owner, name, named):
    monkeypatch.delattr(owner, name)
    with pytest.raises(FaustInternalsChanged) as failure:
        check_faust_internals()
    assert str(failure.value).startswith(FAUST)
    assert f"relies on {named}, which this version lacks" in str(failure.value)


def test_per_instance_state_faust_no_longer_sets_is_missing(monkeypatch):
    def init_without_acks(self: Any, *args: Any, **kwargs: Any) -> None:
        self._acked_index, self._committed_offset, self.callback = {}, {}, None
        self._unacked_messages = set()  # ... but never self._acked

    monkeypatch.setattr(faust_consumer.Consumer, "__init__", init_without_acks)
    with pytest.raises(FaustInternalsChanged, match=r"relies on Consumer\._acked, which"):
        check_faust_internals()


def test_a_replaced_method_faust_no_longer_calls_is_missing(monkeypatch):
    # A release that kept _new_offset but computed commits elsewhere would ignore the replacement.
    monkeypatch.setattr(faust_consumer.Consumer, "_filter_committable_offsets", lambda self, tps: {})
    with pytest.raises(FaustInternalsChanged, match=r"relies on a call of Consumer\._new_offset in faust's consumer"):
        check_faust_internals()


async def _drain_without_callback(self: Any, fetcher: Any) -> None:
    self.getmany(timeout=1.0)
    await self._add_gap(None, 0, 0)  # faust's own loop still fills gaps


async def _drain_without_getmany(self: Any, fetcher: Any) -> None:
    await self._wait_next_records(1.0)
    await self.callback(None)
    await self._add_gap(None, 0, 0)


@pytest.mark.parametrize(
    ("drain", "lost"), [(_drain_without_callback, "callback"), (_drain_without_getmany, "getmany")]
)
def test_a_fetch_loop_that_no_longer_looks_up_what_the_watchdog_wraps_is_missing(monkeypatch, drain, lost):
    # The watchdog sees fetches and hand-overs by wrapping the consumer's getmany and callback; a
    # loop that reached them another way would leave it blind, never re-reading a dropped record.
    monkeypatch.setattr(faust_consumer.Consumer, "_drain_messages", drain)
    with pytest.raises(FaustInternalsChanged) as failure:
        check_faust_internals()
    assert f"relies on a call of Consumer.{lost} in Consumer._drain_messages, which" in str(failure.value)


def test_the_watchdog_counts_the_fetches_of_a_real_faust_consumer():
    app = faust.App("probe", broker="kafka://127.0.0.1:1", autodiscover=False, web_enabled=False, store="memory://")
    watchdog = SkippedRecordsWatchdog(app, 1.0)
    fetch = app.consumer.getmany(timeout=0.0)  # faust's fetch loop calls it through the consumer, so
    assert watchdog._fetches == 1 and inspect.isasyncgen(fetch)
    asyncio.run(fetch.aclose())


def test_the_worker_command_says_so_in_one_line_and_exits_1(tmp_path: Path):
    # Before any model loads or ClickHouse is reached: no broker or store is running here.
    probe = (
        "import faust.transport.consumer as c; del c.Consumer._add_gap; "
        "import sys; from pipeline.cli import main; sys.argv = ['halluwatch', 'worker']; main()"
    )
    env = {
        **os.environ,
        "HALLUWATCH_DATA_DIR": str(tmp_path / "data"),
        "HALLUWATCH_CLICKHOUSE_DSN": "http://127.0.0.1:9/",
    }
    done = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 1, done.stdout + done.stderr
    lines = (done.stdout + done.stderr).strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"Error: {FAUST} Consumer._add_gap"), lines
