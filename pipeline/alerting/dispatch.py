"""Deciding how a batch of alerts reaches its destinations, without any Kafka in sight.

The dispatcher sends, applies each route's rate limit (alerts over it go out as one
digest message, never dropped), and turns every failure into an outcome: retry in so
many seconds, or give up.  The alert router (:mod:`pipeline.alerting.stage`) acts on the
outcomes with topics and tables; keeping the two apart makes the delivery policy
testable against plain local HTTP servers.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from pipeline.alerting.alert import Alert, DeliveryStatus
from pipeline.alerting.destinations import DeliveryError, Destination
from pipeline.alerting.ratelimit import RouteRateLimiter
from pipeline.config.alerting import AlertingSettings
from pipeline.config.content_policy import STORE_ALL, ContentPolicy

# Whether an alert already reached a destination for good (a replay or a retry of it).
AlreadyDone = Callable[[Alert, Destination], bool]
# A failed delivery to try again: the alert and the number of this attempt.
Retry = tuple[Alert, int]
_T = TypeVar("_T")


def _once(items: Sequence[_T], alert_of: Callable[[_T], Alert]) -> list[_T]:
    """``items`` with each alert's first occurrence only.

    A batch can hold one alert twice (a record read again while its first copy still waited in
    the consumer); ``done`` knows only deliveries settled in earlier batches, so both copies
    would be sent.
    """
    seen: set[str] = set()
    unique = []
    for item in items:
        if (alert_id := alert_of(item).alert_id) not in seen:
            seen.add(alert_id)
            unique.append(item)
    return unique


@dataclass(frozen=True, slots=True)
class Outcome:
    """What happened to one alert at one destination."""

    alert: Alert
    destination: Destination
    status: DeliveryStatus
    attempt: int
    error: str = ""
    retry_in_seconds: float = 0.0  # with RETRYING: when to try again


class Dispatcher:
    """Sends alerts to their routes' destinations within the routes' rate limits."""

    def __init__(
        self,
        config: AlertingSettings,
        routes: Mapping[str, list[Destination]],
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        content: ContentPolicy = STORE_ALL.alerts,
    ) -> None:
        self._config = config
        self._content = content  # of the errors: a server's reply may echo what it was sent
        self._routes = dict(routes)
        self._by_name = {d.name: d for destinations in self._routes.values() for d in destinations}
        self._limiter = RouteRateLimiter({name: route.max_per_minute for name, route in config.routes.items()}, clock)
        self._sleep = sleep

    def destinations(self, route: str) -> list[Destination]:
        """Where a route's alerts go; an unknown route (an alert from an older config) goes to ``log``."""
        fallback = self._routes.get("log") or next(iter(self._routes.values()))
        return self._routes.get(route) or fallback

    def destination(self, name: str) -> Destination | None:
        """A configured destination by name."""
        return self._by_name.get(name)

    async def close(self) -> None:
        """Close every destination's connections."""
        for destination in self._by_name.values():
            await destination.close()

    async def dispatch(self, route: str, alerts: Sequence[Alert], done: AlreadyDone) -> list[Outcome]:
        """Send a batch of one route's alerts: singly within the limit, the overflow as one digest."""
        destinations = self.destinations(route)
        todo = [a for a in _once(alerts, lambda alert: alert) if not all(done(a, d) for d in destinations)]
        if not todo:
            return []
        singles, overflow = await self._within_limit(route, todo, any(d.rate_limited for d in destinations))
        outcomes = []
        for destination in destinations:
            for alert in singles:
                if not done(alert, destination):
                    outcomes.append(await self._send(alert, destination, 1))
            pending = [alert for alert in overflow if not done(alert, destination)]
            if pending:
                outcomes.extend(await self._send_digest(route, pending, destination, [1] * len(pending)))
        return outcomes

    async def redeliver(self, route: str, destination: Destination, retries: Sequence[Retry]) -> list[Outcome]:
        """Try failed deliveries to one of a route's destinations again, as :meth:`dispatch` sends.

        Within the route's limit each alert is its own message again; the overflow goes as one
        digest. One at a time, a backlog of retries after an outage would take a minute per
        ``max_per_minute`` of them, and reach the on-call as a flood once through.
        """
        retries = _once(retries, lambda retry: retry[0])
        if not retries:
            return []
        singles, overflow = await self._within_limit(route, retries, destination.rate_limited)
        outcomes = [await self._send(alert, destination, attempt) for alert, attempt in singles]
        if overflow:
            alerts, attempts = zip(*overflow, strict=True)
            outcomes.extend(await self._send_digest(route, list(alerts), destination, list(attempts)))
        return outcomes

    async def _within_limit(self, route: str, items: list[_T], limited: bool) -> tuple[list[_T], list[_T]]:
        """Split ``items`` into those sent singly and the overflow sent as one digest.

        The last slot carries the digest; with none left, this waits for the next one.
        """
        allowed = self._limiter.take(route, len(items)) if limited else len(items)
        if allowed >= len(items):
            return items, []
        if allowed == 0:
            await self._wait_for_slot(route)
        return items[: max(allowed - 1, 0)], items[max(allowed - 1, 0) :]

    async def _wait_for_slot(self, route: str) -> None:
        while (wait := self._limiter.seconds_until_available(route)) > 0:
            await self._sleep(wait)
        self._limiter.take(route, 1)

    async def _send(self, alert: Alert, destination: Destination, attempt: int) -> Outcome:
        try:
            await destination.send(alert)
        except Exception as exc:  # library errors of any type are a failed attempt, never a crash
            return self._failure(alert, destination, attempt, exc)
        return Outcome(alert, destination, DeliveryStatus.DELIVERED, attempt)

    async def _send_digest(
        self, route: str, alerts: list[Alert], destination: Destination, attempts: list[int]
    ) -> list[Outcome]:
        try:
            await destination.send_digest(route, alerts)
        except Exception as exc:  # each alert then retries on its own, within the limit again
            return [self._failure(a, destination, n, exc) for a, n in zip(alerts, attempts, strict=True)]
        return [Outcome(a, destination, DeliveryStatus.DIGESTED, n) for a, n in zip(alerts, attempts, strict=True)]

    def _failure(self, alert: Alert, destination: Destination, attempt: int, exc: Exception) -> Outcome:
        error = self._content.reason(*_error_parts(exc))
        retryable = not isinstance(exc, DeliveryError) or exc.retryable
        if not retryable or attempt >= self._config.delivery_attempts:
            return Outcome(alert, destination, DeliveryStatus.FAILED, attempt, error)
        config = self._config
        backoff = min(config.retry_initial_seconds * 2 ** (attempt - 1), config.retry_max_seconds)
        hinted = exc.retry_after_seconds if isinstance(exc, DeliveryError) else None
        return Outcome(alert, destination, DeliveryStatus.RETRYING, attempt, error, max(backoff, hinted or 0.0))


def _error_parts(exc: Exception) -> tuple[str, str]:
    """A failed attempt's error as (our words, the detail a server or library gave, which may echo content)."""
    if isinstance(exc, DeliveryError):
        return f"{type(exc).__name__}: {exc.summary}", exc.detail
    return type(exc).__name__, str(exc)
