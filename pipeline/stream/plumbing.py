"""faust plumbing shared by the worker's stages: raw topics, retries, dead letters."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from typing import Any, Protocol

import faust
from aiokafka.partitioner import murmur2
from faust.types import EventT, Message, StreamT

from pipeline import metrics
from pipeline.config.content_policy import ContentPolicy, split_reason
from pipeline.sinks.clickhouse import SinkUnavailable
from pipeline.stream.formats import with_format

logger = logging.getLogger(__name__)

# How long a publish may wait for the broker's acknowledgement before it is sent again: a
# send the client never resolves must not stall a stage (a repeat is harmless downstream).
PUBLISH_ACK_TIMEOUT_SECONDS = 30.0

# How long a stopping stage may go on with the batch in hand (a SIGTERM must stop a worker
# within its orchestrator's grace, 30 s by default in Kubernetes, whatever it is waiting for).
SHUTDOWN_GRACE_SECONDS = 10.0

# Writes rows to ClickHouse tables durably (retrying until it can): {table: rows}.
RowStore = Callable[[Mapping[str, Sequence[Sequence[Any]]]], Awaitable[None]]


class InputRecord(Protocol):
    """What a dead letter needs of the record it is about: a faust message, or the spans stage's copy of one."""

    @property
    def key(self) -> bytes | None: ...  # noqa: D102 - the Kafka record's own
    @property
    def value(self) -> bytes | None: ...  # noqa: D102
    @property
    def topic(self) -> str: ...  # noqa: D102
    @property
    def partition(self) -> int: ...  # noqa: D102
    @property
    def offset(self) -> int: ...  # noqa: D102


# Sends a record that could not be handled to a dead-letter topic: (record, reason kind, reason).
DeadLetterSender = Callable[[InputRecord, str, str], Awaitable[None]]


def withholding(send: DeadLetterSender, content: ContentPolicy) -> DeadLetterSender:
    """``send`` with each reason as ``content`` allows: a reason may quote the message it is about.

    Reasons are written ``what failed: what the exception said``; the detail after the first
    ``": "`` is content (:func:`~pipeline.config.content_policy.split_reason`). The letter's
    value stays the message as it came (``infra/README.md``, "Content on internal topics").
    """

    async def send_withheld(message: InputRecord, reason_kind: str, reason: str) -> None:
        await send(message, reason_kind, content.reason(*split_reason(reason)))

    return send_withheld


def raw_topic(app: faust.App, partitions: int, *names: str) -> faust.TopicT:
    """A bytes-in, bytes-out topic, created with ``partitions`` partitions if missing."""
    return app.topic(
        *names,
        key_type=bytes,
        value_type=bytes,
        key_serializer="raw",
        value_serializer="raw",
        internal=True,
        partitions=partitions,
    )


class TraceTable(faust.Table):  # type: ignore[type-arg]  # faust's classes are loosely typed
    """A changelog-backed table of JSON values keyed by the raw trace id.

    Each key's changelog partition is the one the Kafka default partitioner (murmur2, as
    faust's producer uses for every topic we key by trace id) gives the key, so a trace's
    state sits in the partition of its findings and alerts, and can be written outside
    stream iteration, by expiry timers.  (faust's own ``use_partitioner`` asks the producer
    for topic metadata it may not have fetched yet.)
    """

    def partition_for_key(self, key: Any) -> int:
        """The partition Kafka's default partitioner picks for ``key``."""
        return (murmur2(key) & 0x7FFFFFFF) % self.partitions  # type: ignore[no-any-return]


def trace_table(app: faust.App, name: str, partitions: int) -> TraceTable:
    """Register a :class:`TraceTable` with ``partitions`` partitions on ``app``."""
    table = TraceTable(
        app,
        name=name,
        default=None,
        beacon=app.tables.beacon,
        partitions=partitions,
        key_type=bytes,  # raw keys, also when recovering from the changelog; values are JSON
    )
    app.tables.add(table)
    return table


class BatchActivity:
    """How many stage batches are being worked on, and how many finished: tells an idle worker.

    Also which topics an agent holds on purpose, a record in hand while it waits (an alert
    retry waiting out its back-off): the agent reads every partition of its topic, so the
    records behind it, in any of them, are not lost, only waiting.
    """

    def __init__(self) -> None:
        self.in_progress = 0
        self.finished = 0
        self.held: set[str] = set()

    @contextlib.contextmanager
    def holding(self, topic: str) -> Iterator[None]:
        """Mark ``topic`` as held on purpose inside the block."""
        self.held.add(topic)
        try:
            yield
        finally:
            self.held.discard(topic)

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Count the batch worked on inside the block."""
        self.in_progress += 1
        try:
            yield
        finally:
            self.in_progress -= 1
            self.finished += 1


BATCHES = BatchActivity()
"""Every stage's batches in this process (:mod:`pipeline.stream.dropped_records` acts only on an idle worker)."""


async def durable_batches(stream: StreamT[bytes], max_events: int, within: float) -> AsyncIterator[list[EventT[bytes]]]:
    """``take_events`` batches whose offsets are committed only once the caller's loop body finished.

    faust acks a ``take_events`` batch when the loop moves on, even if the body raised (or
    was cancelled by a shutdown).  Each message gets one extra reference here, released
    only when the body returned for the batch; a batch cut short stays uncommitted and is
    redelivered after a restart.
    """
    async for events in stream.take_events(max_events, within=within):  # type: ignore[attr-defined]
        for event in events:
            event.message.incref()
        with BATCHES.batch():
            yield events
        for event in events:
            await stream.ack(event)


def put_down(app: faust.App, messages: Sequence[Message]) -> None:
    """Let go of messages in hand without acking them, when a stop or a rebalance interrupts their handling.

    faust waits, before a stop or a rebalance completes, for every message it handed out to be
    acked; one held back on purpose would stall it for good. Put down, a message is neither
    acked (its offset is not committed: a restart, the next owner of its partition, or the
    dropped-records watchdog reads it again) nor waited for. It keeps one reference that is
    never released, so the acks that follow anyway (the stream's on leaving the event,
    :func:`durable_batches`' after the loop body) cannot bring it to zero and ack it.
    """
    unacked: Any = app.consumer._unacked_messages  # type: ignore[attr-defined]  # faust's private bookkeeping
    for message in messages:
        message.incref()
        unacked.discard(message)


async def publish(
    topic: faust.TopicT,
    key: bytes | None,
    value: bytes | None,
    max_delay_seconds: float,
    headers: list[tuple[str, bytes]] | None = None,
    give_up_after_seconds: float | None = None,
) -> bool:
    """Send one record, with the format header, and wait for the broker's acknowledgement, retrying until it comes.

    With ``give_up_after_seconds``, returns False once that long passed without an acknowledgement.
    """

    async def send() -> None:
        await wait_acknowledged([await topic.send(key=key, value=value, headers=with_format(headers or ()))])

    return await retrying(f"publish to {topic.get_topic_name()}", send, max_delay_seconds, give_up_after_seconds)


async def wait_acknowledged(sends: Sequence[Awaitable[Any]]) -> None:
    """Wait for the broker's acknowledgement of ``sends``; TimeoutError after PUBLISH_ACK_TIMEOUT_SECONDS.

    Sends still pending then are left to finish, not cancelled: faust logs a traceback for
    every cancelled send, and the caller's retry sends them again anyway.
    """
    futures = [asyncio.ensure_future(send) for send in sends]
    if not futures:
        return
    done, pending = await asyncio.wait(futures, timeout=PUBLISH_ACK_TIMEOUT_SECONDS)
    for future in pending:
        future.add_done_callback(_retrieve_outcome)
    for future in done:
        future.result()  # the first failed send raises
    if pending:
        raise TimeoutError(
            f"{len(pending)} of {len(futures)} sends unacknowledged after {PUBLISH_ACK_TIMEOUT_SECONDS:g}s"
        )


def _retrieve_outcome(future: asyncio.Future[Any]) -> None:
    """Mark an abandoned send's outcome as seen, so asyncio does not log it as never retrieved."""
    if not future.cancelled():
        future.exception()


async def retrying(
    what: str,
    operation: Callable[[], Awaitable[None]],
    max_delay_seconds: float,
    give_up_after_seconds: float | None = None,
) -> bool:
    """Run ``operation`` until it succeeds, backing off; the caller's batch stays unacked meanwhile.

    Holding the batch is the backpressure: the agent stops taking events, and once its
    stream buffer is full (``kafka_max_buffered_messages``) faust stops fetching, so memory
    stays bounded while ClickHouse or the broker is down.  With ``give_up_after_seconds``,
    returns False once that long has passed without success (True on success); without it,
    never gives up.  A stop cancels the wait at once.
    """
    loop = asyncio.get_running_loop()
    deadline = None if give_up_after_seconds is None else loop.time() + give_up_after_seconds
    delay = 0.5
    while True:
        try:
            await operation()
            return True
        except SinkUnavailable as exc:
            delay = max(delay, exc.retry_after_seconds)
            logger.warning("%s failed, retrying in %.1fs: %s", what, delay, exc)
        except Exception as exc:  # broker errors come in many types
            logger.warning("%s failed, retrying in %.1fs: %r", what, delay, exc)
        metrics.WRITE_RETRIES.inc()
        if deadline is not None and loop.time() + delay > deadline:
            return False
        await asyncio.sleep(delay)
        delay = min(delay * 2, max_delay_seconds)


async def isolating_failures(
    messages: Sequence[Message],
    handle: Callable[[Sequence[Message]], Awaitable[None]],
    dead_letter: DeadLetterSender,
    what: str,
    passing: tuple[type[Exception], ...] = (),
) -> None:
    """``handle(messages)``; if it fails unexpectedly, each message again alone, dead-lettering those that fail twice.

    A stage's decoders refuse what is malformed, but a record may still trip a defect further on
    (a detector, a rule, a renderer).  Raised out of the agent, that would crash it and the
    record would be read again and again, holding back every record behind it: instead the
    record that fails on its own goes to the dead-letter topic with the exception's class, and
    the stage goes on.  Exceptions in ``passing`` (a stage's own control flow) go through.
    """
    try:
        await handle(messages)
        return
    except passing:
        raise
    except Exception:
        logger.exception("%s failed on a batch of %d record(s); handling them one by one", what, len(messages))
    for message in messages:
        try:
            await handle([message])
        except passing:
            raise
        except Exception as exc:
            logger.exception("%s failed twice on %s/%s/%s", what, message.topic, message.partition, message.offset)
            await dead_letter(message, "internal_error", f"{what} failed: {type(exc).__name__}: {exc}")
