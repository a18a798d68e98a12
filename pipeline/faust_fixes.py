"""A watchdog for a faust-streaming 0.15 consumer defect that silently skips stream records.

faust takes a batch of records from aiokafka and hands them to the streams one at a time;
when a rebalance or a table recovery stops the flow or pauses partitions meanwhile, it drops
the records it has not handed on yet, although aiokafka's position has already moved past
them.  faust counts on seeking back to the committed offsets afterwards, but that seek can
come before the drop, and skips partitions with nothing committed.  Then the skipped records
are never read again: the worker waits forever short of the end of the partition, and once
newer records are processed and committed over the hole, they are lost.  (Seen with workers
restarted mid-stream: one partition of four never read again, aiokafka at its end.)

:class:`SkippedRecordsWatchdog` looks for exactly that state — a stream partition with
nothing of it in flight, no progress between two looks, and a hole: aiokafka's position past
the next record faust delivered, or acked records that start after the committed offset —
and seeks it back to its committed offset (its start when nothing is committed), so faust
reads the hole again.  Records read twice are absorbed by the
idempotent tables, as every at-least-once redelivery is.
"""

from __future__ import annotations

import logging
from typing import Any

import faust
from faust.types import TP

from pipeline import metrics

logger = logging.getLogger(__name__)


class SkippedRecordsWatchdog:
    """Every ``interval_seconds``, re-reads stream partitions whose fetched records faust never delivered."""

    def __init__(self, app: faust.App, interval_seconds: float) -> None:
        self._app = app
        self._last_look: dict[TP, tuple[int, int, int]] = {}  # position, next delivered, first acked
        app.timer(interval_seconds)(self._look)

    async def _look(self) -> None:
        app = self._app
        consumer: Any = app.consumer  # the state read here is faust's, not in its ConsumerT interface
        if app.rebalancing or not consumer.flow_active:
            self._last_look.clear()  # positions move while faust seeks; judge only a settled consumer
            return
        changelogs = app.tables.changelog_topics  # table recovery positions those itself
        in_flight = {message.tp for message in list(consumer._unacked_messages)}
        for tp in consumer.assignment():
            if tp.topic in changelogs or tp in in_flight:
                self._last_look.pop(tp, None)
                continue
            position = await consumer.position(tp)
            if position is None:
                continue
            committed = consumer._committed_offset.get(tp) or 0
            next_delivered = max(_after_read(consumer, tp, committed), committed)
            acked: list[int] = consumer._acked.get(tp) or []
            # Records after the last delivered one, or before the first acked one, never came.
            first_acked = min(acked, default=committed)
            look = (position, next_delivered, first_acked)
            hole = position > next_delivered or first_acked > committed
            stuck = hole and self._last_look.get(tp) == look
            self._last_look[tp] = look
            if stuck:
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


def _after_read(consumer: Any, tp: TP, committed: int) -> int:
    """The offset after the last record faust delivered of ``tp`` (as far as its state tells)."""
    read: int | None = consumer._read_offset.get(tp)
    # After a seek, faust's read offset is the sought offset, not a delivered record.
    if read is None or (read == committed and read not in consumer._acked_index[tp]):
        return committed
    return read + 1
