"""Per-route send budget: at most ``max_per_minute`` messages in any 60-second window."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Mapping

WINDOW_SECONDS = 60.0


class RouteRateLimiter:
    """Sliding-window counter per route; routes without a limit are unlimited."""

    def __init__(self, limits: Mapping[str, int], clock: Callable[[], float] = time.monotonic) -> None:
        self._limits = dict(limits)
        self._clock = clock
        self._sent: dict[str, deque[float]] = {}

    def take(self, route: str, wanted: int) -> int:
        """How many of ``wanted`` sends may go now; those are recorded as sent."""
        wanted = max(wanted, 0)
        limit = self._limits.get(route)
        if limit is None:
            return wanted
        sent = self._window(route)
        allowed = max(min(wanted, limit - len(sent)), 0)
        sent.extend([self._clock()] * allowed)
        return allowed

    def seconds_until_available(self, route: str) -> float:
        """Seconds until ``take`` allows one more send on the route (0 when it would now)."""
        limit = self._limits.get(route)
        sent = self._window(route)
        if limit is None or len(sent) < limit:
            return 0.0
        # A slot frees when the send that put the window at its limit leaves it.
        return max(sent[-limit] + WINDOW_SECONDS - self._clock(), 0.0)

    def _window(self, route: str) -> deque[float]:
        sent = self._sent.setdefault(route, deque())
        expired = self._clock() - WINDOW_SECONDS
        while sent and sent[0] <= expired:
            sent.popleft()
        return sent
