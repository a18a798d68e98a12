"""faust plumbing shared by the worker's stages: raw topics, retries, dead letters."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import faust
from faust.types import Message

from pipeline import metrics
from pipeline.storage import SinkUnavailable

logger = logging.getLogger(__name__)

# Writes rows to a ClickHouse table durably (retrying until it can): (table, rows).
RowStore = Callable[[str, Sequence[Sequence[Any]]], Awaitable[None]]

# Sends a message that could not be handled to a dead-letter topic: (message, reason kind, reason).
DeadLetterSender = Callable[[Message, str, str], Awaitable[None]]


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


async def retrying(what: str, operation: Callable[[], Awaitable[None]], max_delay_seconds: float) -> None:
    """Run ``operation`` until it succeeds, backing off; the caller's batch stays unacked meanwhile.

    Holding the batch is the backpressure: the agent stops taking events, so memory
    stays bounded by one batch while ClickHouse or the broker is down.
    """
    delay = 0.5
    while True:
        try:
            await operation()
            return
        except SinkUnavailable as exc:
            delay = max(delay, exc.retry_after_seconds)
            logger.warning("%s failed, retrying in %.1fs: %s", what, delay, exc)
        except Exception as exc:  # broker errors come in many types
            logger.warning("%s failed, retrying in %.1fs: %r", what, delay, exc)
        metrics.WRITE_RETRIES.inc()
        await asyncio.sleep(delay)
        delay = min(delay * 2, max_delay_seconds)
