"""Work-arounds for faust-streaming 0.15 consumer defects that skip, then lose, stream records.

faust takes a batch of records from aiokafka and hands them to the streams one at a time;
when a rebalance or a table recovery stops the flow or pauses partitions meanwhile, it drops
the records it has not handed on yet, although aiokafka's position has already moved past
them.  It counts on seeking back to the committed offsets afterwards, but that seek can come
before the drop, and skips partitions with nothing committed.  Worse, its commit bookkeeping
then commits over the hole: it takes the jump in offsets for a gap of offsets that do not
exist (as in compacted or transactional topics), it lets the first acked record of a never
committed partition start the run to commit, and it allows one missing record at the head of
the run.  (Seen with workers restarted mid-stream: a partition never read again, and LLM
spans missing from ClickHouse although every offset was committed.)

:func:`commit_only_contiguous` replaces that bookkeeping on the app's consumer: every stream
partition starts from a known offset (its committed one, or its earliest), and a commit covers
only the run of acked records that starts there — a hole holds the commit back.  Our topics are
neither compacted nor transactional, so their offsets have no real gaps.

:class:`SkippedRecordsWatchdog` then finds the held-back partitions — nothing of them in
flight, no progress between two looks, and records after the committed offset that never came
(aiokafka's position past the next record faust handed to the streams, or acked records
starting after the committed offset) — and seeks them back to the committed offset, so faust
reads the hole again.  Records read twice are absorbed by the idempotent tables, as every
at-least-once redelivery is.  Two things it watches itself, by wrapping the consumer's
callback and ``getmany`` before faust's fetch loop starts (that loop looks both up once):

- which record of each partition faust last handed to the streams.  faust's own read offset
  cannot tell a record handed over at the committed offset, waiting in a stream's buffer,
  from a seek to it, and it moves past the records it drops;
- how many fetches faust began.  faust awaits each record's hand-over, so one stream with a
  full buffer holds back the rest of a batch that mixes every topic the worker reads: those
  records are on their way, not dropped, until faust begins its next fetch.

(Both seen on Apache Kafka under steady traffic: alerts re-read while their first copies
still waited in the consumer.)

Both lean on faust's private consumer state and methods: :func:`check_faust_internals` checks
at start-up that the installed faust still has every one of them, and still calls the methods
replaced here, so another faust release fails the worker's start with one line, not a worker
that silently stops committing or re-reading.
"""

from __future__ import annotations

import bisect
import dis
import inspect
import logging
from collections.abc import Iterable, Iterator
from importlib.metadata import version
from types import CodeType
from typing import Any

import faust
from faust.transport.drivers.aiokafka import Consumer as KafkaConsumer
from faust.types import TP

from pipeline import metrics
from pipeline.config.watchdog_timing import IDLE_LOOKS
from pipeline.stream.plumbing import BATCHES

logger = logging.getLogger(__name__)


def commit_only_contiguous(app: faust.App) -> None:
    """Make ``app``'s consumer commit only runs of acked records that start at the committed offset."""
    consumer: Any = app.consumer  # faust's bookkeeping is not part of its ConsumerT interface
    seek_to_committed = consumer.perform_seek

    async def perform_seek() -> None:
        await seek_to_committed()
        # faust leaves never committed partitions where aiokafka happens to be, with no start.
        changelogs = app.tables.changelog_topics  # table recovery positions those itself
        uncommitted = [
            tp
            for tp in consumer.assignment()
            if tp.topic not in changelogs and (consumer._committed_offset.get(tp) or -1) < 0
        ]
        if uncommitted:
            for tp, offset in (await consumer.earliest_offsets(*uncommitted)).items():
                await consumer.seek(tp, offset)
                consumer._committed_offset[tp] = offset

    def new_offset(tp: TP) -> int | None:
        acked: list[int] = consumer._acked[tp]
        committed: int | None = consumer._committed_offset[tp]
        if not acked or committed is None:
            return None
        acked.sort()
        del acked[: bisect.bisect_left(acked, committed)]  # acked before a seek back: committed since
        run_end = committed
        while run_end - committed < len(acked) and acked[run_end - committed] == run_end:
            run_end += 1
        if run_end == committed:
            return None  # the record at the committed offset is not acked (yet, or it never came)
        del acked[: run_end - committed]
        consumer._acked_index[tp].difference_update(range(committed, run_end))
        return run_end

    async def no_gaps(tp: TP, offset_from: int, offset_to: int) -> None:
        """A jump in offsets on our topics is records faust dropped, never offsets that do not exist."""

    consumer.perform_seek = perform_seek
    consumer._new_offset = new_offset
    consumer._add_gap = no_gaps


class SkippedRecordsWatchdog:
    """Every ``interval_seconds``, re-reads stream partitions whose fetched records faust never delivered."""

    def __init__(self, app: faust.App, interval_seconds: float) -> None:
        self._app = app
        # position, next delivered, first acked; and how many fetches faust had begun when first seen so
        self._last_look: dict[TP, tuple[tuple[int, int, int], int]] = {}
        self._batches_finished = BATCHES.finished
        self._idle_looks = 0  # looks in a row with no stage batch in progress or finished
        self._fetches = 0  # fetches faust began: each once the batch before was handed on (or dropped) whole
        self._handed_over: dict[TP, int] = {}  # the offset of the last record handed to the streams
        self._watch_fetch_loop(app.consumer)
        app.timer(interval_seconds)(self._look)

    def _watch_fetch_loop(self, consumer: Any) -> None:
        """Wrap what faust's fetch loop looks up on the consumer when it starts, after the app is built."""
        fetch, hand_over = consumer.getmany, consumer.callback

        def getmany(*args: Any, **kwargs: Any) -> Any:
            self._fetches += 1
            return fetch(*args, **kwargs)

        async def callback(message: Any) -> None:
            await hand_over(message)  # cancelled when faust drops the record: not handed over
            self._handed_over[message.tp] = message.offset

        consumer.getmany, consumer.callback = getmany, callback

    async def _look(self) -> None:
        app = self._app
        consumer: Any = app.consumer  # the state read here is faust's, not in its ConsumerT interface
        idle = BATCHES.in_progress == 0 and BATCHES.finished == self._batches_finished
        self._batches_finished = BATCHES.finished
        self._idle_looks = self._idle_looks + 1 if idle else 0
        if app.rebalancing or not consumer.flow_active:
            self._last_look.clear()  # positions move while faust seeks; judge only a settled consumer
            self._idle_looks = 0
            return
        changelogs = app.tables.changelog_topics  # table recovery positions those itself
        in_flight = {message.tp for message in list(consumer._unacked_messages)}
        # A worker idle this long has committed all it processed (settings keep the commit
        # interval inside this window): records past a partition's committed offset are then
        # stuck somewhere in faust, whatever its state says.
        long_idle = self._idle_looks >= IDLE_LOOKS
        for tp in consumer.assignment():
            if tp.topic in changelogs or tp.topic in BATCHES.held:
                self._last_look.pop(tp, None)
                continue
            position = await consumer.position(tp)
            if position is None:
                continue
            committed = consumer._committed_offset.get(tp)
            if committed is None:
                continue  # assigned a moment ago, its start not sought yet: 0 would re-read it all
            if long_idle and position > committed:
                await self._reread(consumer, tp, committed)
                self._idle_looks = 0
                continue
            if tp in in_flight:
                self._last_look.pop(tp, None)
                continue
            last = self._handed_over.get(tp, -1)
            # One handed over before a seek back (ours or a rebalance's) says nothing of the records after it.
            next_delivered = last + 1 if committed <= last < position else committed
            acked: list[int] = consumer._acked.get(tp) or []
            # Records after the last delivered one, or before the first acked one, never came.
            first_acked = min(acked, default=committed)
            look = (position, next_delivered, first_acked)
            # Right after a seek, position == committed: the hole is being read again.
            hole = position > committed and (position > next_delivered or first_acked > committed)
            seen, fetches_then = self._last_look.get(tp, (None, self._fetches))
            if seen != look:
                self._last_look[tp] = (look, self._fetches)
            elif hole and self._fetches > fetches_then:  # the batch faust was handing on then is done
                await self._reread(consumer, tp, committed)

    async def _reread(self, consumer: Any, tp: TP, offset: int) -> None:
        logger.warning(
            "%s[%d]: fetched records were never delivered (faust-streaming defect); re-reading from offset %d",
            tp.topic,
            tp.partition,
            offset,
        )
        metrics.SKIPPED_RECORDS_REREAD.inc()
        self._last_look.pop(tp, None)
        await consumer.seek(tp, offset)


# What this module relies on in faust's consumer (the class of kafka:// brokers); the app and its
# tables are used through their public interface only.
_CONSUMER_METHODS = (
    "perform_seek", "seek", "assignment", "position", "earliest_offsets", "getmany", "_new_offset", "_add_gap"
)  # fmt: skip
_CONSUMER_STATE = ("_committed_offset", "_acked", "_acked_index", "callback", "_unacked_messages", "flow_active")
_REPLACED = ("perform_seek", "_new_offset", "_add_gap")  # replaced here: faust's own code must call them
# Wrapped here: faust's fetch loop must look them up on the consumer, or the watchdog sees no fetch, no hand-over.
_FETCH_LOOP, _WRAPPED = "_drain_messages", ("getmany", "callback")


class FaustInternalsChanged(RuntimeError):
    """The installed faust lacks private state or methods that the work-arounds here read or replace."""


def check_faust_internals(consumer_class: type = KafkaConsumer) -> None:
    """Raise :class:`FaustInternalsChanged` naming what the installed faust lacks of what this module uses.

    Methods must exist on the consumer class; its state must be a class attribute or be set
    by an ``__init__`` of faust's consumer classes (instances have it from the start); the
    replaced methods must still be called by faust's consumer code, or replacing them would
    change nothing; and its fetch loop must still use the ``getmany`` and ``callback`` that
    the watchdog wraps to see fetches and hand-overs.
    """
    faust_classes = [cls for cls in consumer_class.__mro__ if cls.__module__.startswith("faust.")]
    initialised = _attribute_names(faust_classes, "STORE_ATTR", methods=("__init__",))
    called = _attribute_names(faust_classes, "LOAD_ATTR", "LOAD_METHOD")
    missing = [f"Consumer.{name}" for name in _CONSUMER_METHODS if not callable(getattr(consumer_class, name, None))]
    missing += [
        f"Consumer.{name}" for name in _CONSUMER_STATE if not hasattr(consumer_class, name) and name not in initialised
    ]
    missing += [
        f"a call of Consumer.{name} in faust's consumer"
        for name in _REPLACED
        if hasattr(consumer_class, name) and name not in called
    ]
    looked_up = _attribute_names(faust_classes, "LOAD_ATTR", "LOAD_METHOD", methods=(_FETCH_LOOP,))
    missing += [f"a call of Consumer.{name} in Consumer.{_FETCH_LOOP}" for name in _WRAPPED if name not in looked_up]
    if missing:
        raise FaustInternalsChanged(
            f"faust-streaming {version('faust-streaming')}: pipeline/stream/dropped_records.py relies on "
            f"{', '.join(missing)}, which this version lacks; install faust-streaming 0.15.2 or 0.15.3 "
            "(what the work-around was written for) or update the work-around"
        )


def _attribute_names(classes: Iterable[type], *opnames: str, methods: tuple[str, ...] = ()) -> set[str]:
    """The attribute names in ``opnames`` instructions of the methods (all, or those named) of ``classes``."""
    names: set[str] = set()
    for cls in classes:
        for name, value in vars(cls).items():
            if methods and name not in methods:
                continue
            function = inspect.unwrap(getattr(value, "fget", None) or getattr(value, "__func__", value))
            code = getattr(function, "__code__", None)
            if isinstance(code, CodeType):
                names.update(i.argval for i in _instructions(code) if i.opname in opnames)
    return names


def _instructions(code: CodeType) -> Iterator[dis.Instruction]:
    yield from dis.get_instructions(code)
    for constant in code.co_consts:
        if isinstance(constant, CodeType):  # nested functions and comprehensions
            yield from _instructions(constant)
