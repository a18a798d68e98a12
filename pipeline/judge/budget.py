"""Each application's judge budget: calls per minute and tokens per day, shared by the workers that judge its calls.

The worker asks :meth:`JudgeBudget.grant` how many of the escalations it holds may go to the
judge now; it sends the most valuable that many (:func:`pipeline.escalation.band.most_valuable`)
and decides the others without a judgment, saying why.  Tokens are reserved at an estimate when
a call is granted and settled with what the judge reports once it answers.

What has been spent lives behind :class:`SpendCounter`, keyed by application and window (the
minute, the UTC day).  :class:`LocalCounter` is one process's.  A fleet divides each budget by
the Kafka partitions each worker owns (``share``: owned / all): calls are spread over partitions
by trace id, so each worker sees its share of every application's traffic and spends its share
of the budget, the sum never exceeds it, and no decision waits on a round trip.  A counter in
ClickHouse would let one worker use another's idle share, but ClickHouse has no atomic
increment: workers reading and adding concurrently overshoot, and every grant would wait on a
query.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

_MINUTE = 60.0


class SpendCounter(Protocol):
    """What an application has spent in a window (``calls:<minute>``, ``tokens:<day>``)."""

    def spent(self, app: str, window: str) -> float:
        """The amount spent so far."""
        ...

    def add(self, app: str, window: str, amount: float) -> None:
        """Count ``amount`` more (negative: give back what a reservation did not use)."""
        ...


class LocalCounter:
    """One process's counter; windows older than the current ones are dropped as new ones open."""

    def __init__(self) -> None:
        self._spent: dict[tuple[str, str], float] = {}

    def spent(self, app: str, window: str) -> float:
        """The amount spent so far."""
        return self._spent.get((app, window), 0.0)

    def add(self, app: str, window: str, amount: float) -> None:
        """Count ``amount`` more."""
        key = (app, window)
        if key not in self._spent:
            kind = window.partition(":")[0]
            self._spent = {k: v for k, v in self._spent.items() if k[0] != app or not k[1].startswith(kind + ":")}
        self._spent[key] = self._spent.get(key, 0.0) + amount


class Limits(Protocol):
    """One application's budget (None: no limit of that kind); the settings' ``JudgeBudgetConfig`` is one."""

    @property
    def calls_per_minute(self) -> float | None:
        """Judge calls per minute."""
        ...

    @property
    def tokens_per_day(self) -> float | None:
        """Tokens per UTC day."""
        ...


@dataclass(frozen=True, slots=True)
class BudgetLimits:
    """One application's budget (None: no limit of that kind)."""

    calls_per_minute: float | None = None
    tokens_per_day: float | None = None


@dataclass(frozen=True, slots=True)
class BudgetLeft:
    """What an application may still spend: calls this minute, tokens today (None: no limit)."""

    calls: float | None
    tokens: float | None


class JudgeBudget:
    """The judge budgets of every application, this worker's ``share`` of each."""

    def __init__(
        self,
        limits: Mapping[str, Limits],
        counter: SpendCounter,
        clock: Callable[[], float] = time.time,
        share: float = 1.0,
        default: Limits | None = None,
    ) -> None:
        self._limits = dict(limits)
        self._default: Limits = default or BudgetLimits(0.0, 0.0)  # an application with no budget is never judged
        self._counter = counter
        self._clock = clock
        self._share = 1.0
        self.reshare(share)

    def reshare(self, share: float) -> None:
        """Take a new share of every budget (this worker's partitions changed)."""
        if not 0.0 <= share <= 1.0:
            raise ValueError(f"a worker's share of a budget lies in [0, 1], got {share}")
        self._share = share

    def left(self, app: str) -> BudgetLeft:
        """What ``app`` may still spend on this worker: calls this minute, tokens today."""
        limits = self._limits.get(app, self._default)
        minute, day = self._windows()
        return BudgetLeft(
            _left(limits.calls_per_minute, self._share, self._counter.spent(app, minute)),
            _left(limits.tokens_per_day, self._share, self._counter.spent(app, day)),
        )

    def grant(self, app: str, wanted: int, tokens_each: float) -> int:
        """How many of ``wanted`` judge calls of about ``tokens_each`` tokens may go now; those are counted as spent."""
        left = self.left(app)
        granted = wanted
        if left.calls is not None:
            granted = min(granted, math.floor(left.calls))
        if left.tokens is not None and tokens_each > 0:
            granted = min(granted, math.floor(left.tokens / tokens_each))
        granted = max(granted, 0)
        if granted:
            minute, day = self._windows()
            self._counter.add(app, minute, granted)
            self._counter.add(app, day, granted * tokens_each)
        return granted

    def settle(self, app: str, reserved: float, used: float) -> None:
        """Replace a granted call's reserved tokens by what it used (today's count)."""
        self._counter.add(app, self._windows()[1], used - reserved)

    def _windows(self) -> tuple[str, str]:
        now = self._clock()
        return f"calls:{math.floor(now / _MINUTE)}", f"tokens:{datetime.fromtimestamp(now, UTC).date().isoformat()}"


def _left(limit: float | None, share: float, spent: float) -> float | None:
    return None if limit is None else max(limit * share - spent, 0.0)
