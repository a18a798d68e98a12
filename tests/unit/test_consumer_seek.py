"""A seek never drops aiokafka's prefetched records under the consumer thread's feet.

The fetcher here is aiokafka's own, holding real prefetched records of one partition; the
consumer thread is a real mode thread, as faust's is, and the seek is faust's own
``Consumer.seek``.  tests/integration/test_crash_recovery.py is where the crash showed.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import faust
import pytest
from aiokafka.consumer.fetcher import Fetcher, FetchResult, PartitionRecords
from aiokafka.consumer.subscription_state import SubscriptionState
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from aiokafka.record.memory_records import MemoryRecords
from aiokafka.structs import TopicPartition
from faust.transport import consumer as faust_consumer
from faust.transport.drivers import aiokafka as faust_aiokafka
from mode.threads import QueueServiceThread

from pipeline.stream.consumer_seek import check_seek_internals, seek_on_consumer_thread
from pipeline.stream.dropped_records import FaustInternalsChanged

SPANS = TopicPartition("spans", 0)
RECORDS = 3
WAIT = 5.0  # seconds: only a broken test waits this long


class HaltingRecords:
    """Real partition records that halt after the first one until ``resume`` (a thread switch, held open)."""

    def __init__(self, records: PartitionRecords) -> None:
        self._records = records
        self.halted = threading.Event()
        self.resume = threading.Event()

    @property
    def next_fetch_offset(self) -> int:
        offset: int = self._records.next_fetch_offset
        return offset

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        if self._records.next_fetch_offset == 1:
            self.halted.set()
            self.resume.wait(WAIT)
        return next(self._records)


def prefetched() -> tuple[Fetcher, HaltingRecords]:
    """An aiokafka fetcher as after a fetch response: ``RECORDS`` records of ``SPANS`` waiting to be drained.

    Made on the event loop that will drain it, as aiokafka's state is.
    """
    batch = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=0, producer_id=-1, producer_epoch=-1, base_sequence=-1,
        batch_size=1 << 20,
    )  # fmt: skip
    for offset in range(RECORDS):
        batch.append(offset, timestamp=None, key=None, value=b"span", headers=[])
    subscriptions = SubscriptionState()
    subscriptions.assign_from_user({SPANS})
    subscriptions.seek(SPANS, 0)
    records = HaltingRecords(PartitionRecords(SPANS, MemoryRecords(bytes(batch.build())), [], 0, None, None, True, 0))
    fetcher = Fetcher.__new__(Fetcher)  # its state alone: no client, no background fetch task
    fetcher._subscriptions = subscriptions
    fetcher._wait_consume_future = None
    assignment = subscriptions.subscription.assignment
    fetcher._records = {SPANS: FetchResult(SPANS, assignment=assignment, partition_records=records, backoff=0)}
    return fetcher, records


def test_a_seek_from_another_thread_mid_drain_crashes_aiokafkas_fetcher() -> None:
    # What faust does unguarded: its app thread seeks while the consumer thread drains.
    async def drain_while_seeking() -> None:
        fetcher, records = prefetched()

        def seek_from_app_thread() -> None:
            records.halted.wait(WAIT)
            fetcher.seek_to(SPANS, 0)
            records.resume.set()

        app_thread = threading.Thread(target=seek_from_app_thread)
        app_thread.start()
        try:
            await fetcher.fetched_records({SPANS})
        finally:
            app_thread.join()

    with pytest.raises(KeyError, match=r"TopicPartition\(topic='spans', partition=0\)"):
        asyncio.run(drain_while_seeking())


class ConsumerThread(QueueServiceThread):
    """Hosts the fetcher as faust's consumer thread hosts aiokafka; seeks it as aiokafka's consumer does."""

    fetcher: Fetcher

    def seek(self, partition: TopicPartition, offset: int) -> None:
        self.fetcher.seek_to(partition, offset)


def test_a_guarded_seek_waits_for_the_drain_and_then_takes_effect() -> None:
    async def drain_and_seek() -> tuple[Fetcher, dict[TopicPartition, list[Any]], bool]:
        app = faust.App("probe", broker="kafka://127.0.0.1:1", autodiscover=False, web_enabled=False)
        consumer: Any = app.consumer
        consumer._thread = thread = ConsumerThread()
        seek_on_consumer_thread(app)
        await thread.start()
        try:
            fetcher, records = await thread.call_thread(prefetched)  # type: ignore[arg-type]  # mode runs plain functions too
            thread.fetcher = fetcher
            drain = asyncio.ensure_future(thread.call_thread(fetcher.fetched_records, {SPANS}))
            await asyncio.to_thread(records.halted.wait, WAIT)
            seek = asyncio.ensure_future(consumer.seek(SPANS, 0))
            await asyncio.sleep(0.2)  # ample for a seek made on this thread to drop the records
            dropped_mid_drain = SPANS not in fetcher._records
            records.resume.set()
            drained = await drain
            await seek
            return fetcher, drained, dropped_mid_drain
        finally:
            await thread.stop()

    fetcher, drained, dropped_mid_drain = asyncio.run(drain_and_seek())
    assert not dropped_mid_drain
    assert [record.offset for record in drained[SPANS]] == list(range(RECORDS))
    # The seek came after: back at offset 0, with nothing prefetched left to hand out.
    assert fetcher._subscriptions.subscription.assignment.state_value(SPANS).position == 0
    assert SPANS not in fetcher._records


def test_the_installed_faust_seeks_as_the_work_around_expects() -> None:
    check_seek_internals()


def test_a_faust_that_seeks_on_its_consumer_thread_itself_fails_the_start(monkeypatch: pytest.MonkeyPatch) -> None:
    async def seek_on_thread(self: Any, partition: TopicPartition, offset: int) -> None: ...

    monkeypatch.setattr(faust_aiokafka.AIOKafkaConsumerThread, "seek", seek_on_thread)
    with pytest.raises(FaustInternalsChanged, match=r"consumer_seek\.py .*the consumer thread's seek is no longer"):
        check_seek_internals()


def test_a_faust_whose_seek_bypasses_the_replaced_method_fails_the_start(monkeypatch: pytest.MonkeyPatch) -> None:
    async def seek(self: Any, partition: TopicPartition, offset: int) -> None: ...

    monkeypatch.setattr(faust_consumer.Consumer, "seek", seek)
    with pytest.raises(FaustInternalsChanged, match=r"Consumer\.seek no longer calls Consumer\._seek"):
        check_seek_internals()
