"""The silences in force, as the alert router sees them: re-read every few seconds, never in the way.

A new silence must apply within seconds, so the router cannot hold a set for long; it
must not ask ClickHouse for every batch either.  And silences are a convenience, alerts
are the product: a read that fails keeps the last known set (logged once, counted), and a
read that hangs is waited for only briefly before the batch goes on with that set.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime

from pipeline import metrics
from pipeline.alerting.silences import Silence

logger = logging.getLogger(__name__)

# How long a batch waits for a read in flight (the first one included) before going on without it.
READ_WAIT_SECONDS = 2.0

# Reads the silences in force at a moment (a ClickHouse query, off the event loop).
SilenceReader = Callable[[datetime], Awaitable[Sequence[Silence]]]


def _utc_now() -> datetime:
    return datetime.now(UTC)


class ActiveSilences:
    """The silences in force now, refreshed at most every ``refresh_seconds``.

    ``current`` must not raise: a failed read is logged once (until a read succeeds again)
    and counted in ``halluwatch_silence_read_errors_total``.
    """

    def __init__(
        self,
        read: SilenceReader,
        refresh_seconds: float,
        clock: Callable[[], float] = time.monotonic,
        now: Callable[[], datetime] = _utc_now,
    ) -> None:
        if refresh_seconds <= 0:
            raise ValueError(f"refresh_seconds must be positive, got {refresh_seconds}")
        self._read = read
        self._refresh_seconds = refresh_seconds
        self._clock = clock
        self._now = now
        self._known: list[Silence] = []
        self._next_read_at = float("-inf")
        self._reading: asyncio.Task[None] | None = None
        self._failing = False

    async def current(self) -> list[Silence]:
        """The known silences that hold now, after a re-read when one is due."""
        if self._reading is None and self._clock() >= self._next_read_at:
            self._reading = asyncio.create_task(self._refresh())
        if self._reading is not None:
            await asyncio.wait({self._reading}, timeout=READ_WAIT_SECONDS)  # not cancelled: it lands later
        now = self._now()
        return [silence for silence in self._known if silence.active(now)]

    async def _refresh(self) -> None:
        try:
            self._known = list(await self._read(self._now()))
        except Exception as exc:  # driver errors are many types; all mean "not read"
            metrics.SILENCE_READ_ERRORS.inc()
            if not self._failing:
                logger.error("reading silences failed; the %d known stay in force until a read succeeds: %s",
                             len(self._known), exc)  # fmt: skip
            self._failing = True
        else:
            if self._failing:
                logger.info("reading silences works again: %d in force", len(self._known))
            self._failing = False
        finally:
            self._reading = None
            self._next_read_at = self._clock() + self._refresh_seconds
