"""Work-around for faust-streaming 0.15 seeking aiokafka from the wrong thread, which crashes the worker.

faust runs its aiokafka consumer on a thread of its own, with its own event loop, and calls the
consumer there (``call_thread``) for everything but a plain seek: ``Consumer.seek`` calls
aiokafka's ``AIOKafkaConsumer.seek`` from the app's thread.  aiokafka's ``Fetcher.seek_to`` then
drops the partition's prefetched records (``if tp in self._records: del self._records[tp]``)
while the consumer thread may be in ``Fetcher.fetched_records``, which lists the partitions with
records, takes each one's (``self._records[tp]``) and drops it once drained
(``del self._records[tp]``).  Whichever thread comes second raises
``KeyError: TopicPartition(...)``, and the worker exits 1 (https://github.com/robinhood/aiokafka/issues/19).
On one event loop the same code is safe: nothing in it awaits between listing and dropping.
The seeks come right after a group rejoin (:mod:`pipeline.stream.dropped_records` seeks never
committed partitions to their start) and from its watchdog's re-reads, so a worker that
rebalances often meets the race sooner or later.  Seen with faust-streaming 0.15.3 and aiokafka
0.14.0 (tests/integration/test_crash_recovery.py, now and then).

:func:`seek_on_consumer_thread` makes the app's consumer seek on the consumer thread, as faust's
own ``seek_wait`` and ``seek_to_committed`` already do, so aiokafka's state has one owner.
:func:`check_seek_internals` fails the worker's start when faust's seek no longer has that shape.
"""

from __future__ import annotations

import inspect
from importlib.metadata import version
from typing import Any

import faust
from faust.transport import consumer as faust_consumer
from faust.transport.drivers import aiokafka as faust_aiokafka
from faust.types import TP

from pipeline.stream.dropped_records import FaustInternalsChanged


def seek_on_consumer_thread(app: faust.App) -> None:
    """Make ``app``'s consumer run its seeks on the thread that owns the aiokafka consumer."""
    consumer: Any = app.consumer  # the consumer thread is not part of faust's ConsumerT interface

    async def seek_there(partition: TP, offset: int) -> None:
        thread = consumer._thread
        await thread.call_thread(thread.seek, partition, offset)

    consumer._seek = seek_there


def check_seek_internals(
    consumer_class: type = faust_consumer.Consumer, thread_class: type = faust_aiokafka.AIOKafkaConsumerThread
) -> None:
    """Raise :class:`FaustInternalsChanged` when faust's seek is no longer the direct call replaced here.

    ``Consumer.seek`` must still go through ``_seek`` (or replacing it changes nothing), and the
    consumer thread's ``seek`` must still be a plain function: a coroutine would mean faust moved
    the seek onto the thread itself, and running it there again would wait on its own queue.
    """
    changed = []
    seek_code = getattr(getattr(consumer_class, "seek", None), "__code__", None)
    if seek_code is None or "_seek" not in seek_code.co_names:
        changed.append("Consumer.seek no longer calls Consumer._seek")
    if not callable(getattr(thread_class, "call_thread", None)):
        changed.append("the consumer thread has no call_thread")
    seek = getattr(thread_class, "seek", None)
    if not callable(seek) or inspect.iscoroutinefunction(seek):
        changed.append("the consumer thread's seek is no longer a plain function")
    if changed:
        raise FaustInternalsChanged(
            f"faust-streaming {version('faust-streaming')}: pipeline/stream/consumer_seek.py relies on faust "
            f"seeking aiokafka directly, but {'; '.join(changed)}; install faust-streaming 0.15.3 "
            "(what the work-around was written for) or update the work-around"
        )
