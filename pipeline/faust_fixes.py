"""Work-around for a faust-streaming 0.15 consumer defect that silently skips stream records.

faust takes a batch of records from aiokafka and hands them to the streams one by one; when a
rebalance or a table recovery stops the flow or pauses partitions meanwhile, it drops the
records it has not handed on yet, although aiokafka's position has already moved past them.
faust counts on its recovery to seek every stream partition back to the committed offset,
which re-delivers them — but it skips partitions that have no committed offset yet (a new
group, or a partition nobody has finished a batch of).  On those, the dropped records are
never read again: the worker waits forever short of the end of the partition, and once newer
records are processed and committed over the hole, they are lost for good.  (Seen with a
worker restarted mid-stream: one partition of four was never read again.)

:func:`seek_uncommitted_to_start` makes the recovery's seek complete: after faust's own, each
stream partition without a committed offset is sought to its start, as the worker's
``consumer_auto_offset_reset="earliest"`` means.  Records read twice this way are absorbed by
the idempotent tables, as every at-least-once redelivery is.
"""

from __future__ import annotations

import logging

import faust

logger = logging.getLogger(__name__)


def seek_uncommitted_to_start(app: faust.App) -> None:
    """After every recovery seek of ``app``'s consumer, seek uncommitted stream partitions to their start."""
    consumer = app.consumer
    seek_to_committed = consumer.perform_seek

    async def perform_seek() -> None:
        await seek_to_committed()
        # faust keeps what perform_seek found in _committed_offset (None: nothing committed);
        # the ConsumerT interface does not declare it.
        committed = consumer._committed_offset  # type: ignore[attr-defined]
        changelogs = app.tables.changelog_topics  # the recovery positions those itself
        uncommitted = [tp for tp in consumer.assignment() if tp.topic not in changelogs and committed.get(tp) is None]
        for tp in uncommitted:
            await consumer.seek(tp, 0)
        if uncommitted:
            logger.info("reading %d stream partitions without a committed offset from their start", len(uncommitted))

    consumer.perform_seek = perform_seek  # type: ignore[method-assign]
