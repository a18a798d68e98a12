"""Where alerts go: the destination interface and the in-attempt retry loop.

One delivery attempt retries quickly inside itself (a 429 with a short ``Retry-After``, a
5xx, a dropped connection); whatever is still failing after that is raised as a
``DeliveryError`` and the caller schedules the alert on the retry topic (docs/operations.md: never drop).
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import math
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, ClassVar

import aiohttp

from pipeline.alerting.alert import Alert
from pipeline.alerting.incident import IncidentNote
from pipeline.config.alerting import AlertingSettings, RouteConfig

logger = logging.getLogger(__name__)

# A longer Retry-After is not waited out inside an attempt: the caller reschedules instead.
RETRY_AFTER_CAP_SECONDS = 30.0
# Backoff between quick retries after a 5xx or a connection error: 0.5 s, 1 s, 2 s...
BACKOFF_INITIAL_SECONDS = 0.5
_DETAIL_CHARS = 200  # of a response body, in error messages


class DeliveryError(Exception):
    """A destination did not take the alert.

    ``retryable`` says whether trying again later can help (a 5xx or a 429 can; a bad token
    cannot); ``retry_after_seconds`` is the server's ``Retry-After`` when it sent one.
    ``message`` is ours (destination, status); ``detail`` is what the server or the client
    library said, which may echo what it was sent: the content mode treats it as content.
    """

    def __init__(
        self, message: str, *, retryable: bool, retry_after_seconds: float | None = None, detail: str = ""
    ) -> None:
        super().__init__(f"{message}: {detail}" if detail else message)
        self.summary = message
        self.detail = detail
        self.retryable = retryable
        self.retry_after_seconds = retry_after_seconds


class Destination(ABC):
    """Something that delivers alerts. ``name`` is stable across restarts (it keys delivery state)."""

    name: str
    # Whether the route's per-minute limit applies: it protects people and paid APIs, not a log.
    rate_limited: ClassVar[bool] = True

    @abstractmethod
    async def send(self, alert: Alert) -> None:
        """Deliver one alert; raises ``DeliveryError`` when it was not delivered."""

    @abstractmethod
    async def send_digest(self, route: str, alerts: Sequence[Alert]) -> None:
        """Deliver several alerts of one route together (over its rate limit); raises ``DeliveryError``."""

    @abstractmethod
    async def send_incident(self, note: IncidentNote) -> str:
        """Deliver a rate-monitor incident's event; raises ``DeliveryError``.

        Returns the Slack message ts when this posted the incident's first message (the
        thread later notes and grouped alerts go to), else "".
        """

    async def close(self) -> None:  # noqa: B027 - most destinations hold nothing to release
        """Release connections; the destination must not be used afterwards."""


@dataclass(frozen=True, slots=True)
class DestinationType:
    """One kind of destination, as routes, ``doctor`` and explanations see it.

    ``fields`` are the ``RouteConfig`` fields that ask for it; ``lacks`` says which secret it
    still needs on a route that asks for it ("" when it can deliver); ``build`` makes the
    destination of a route that asks for it and lacks nothing; ``describe`` is its words for
    people (``slack #oncall``). How it renders an alert is its ``Destination``'s own.
    """

    fields: tuple[str, ...]
    wanted: Callable[[RouteConfig], bool]
    lacks: Callable[[AlertingSettings, str], str]
    build: Callable[[AlertingSettings, str], Destination]
    describe: Callable[[AlertingSettings, str], str]


def parse_retry_after(value: str | None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or an HTTP date), or None."""
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        seconds = (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp() - datetime.now(UTC).timestamp()
    return max(seconds, 0.0) if math.isfinite(seconds) else None


@dataclass(frozen=True, slots=True)
class HttpReply:
    """What one request got back, as much as the retry loop needs."""

    status: int
    ok: bool
    retry_after_seconds: float | None = None
    detail: str = ""
    message_id: str = ""  # what the server named what it created (a Slack message's ts)

    @classmethod
    def of(cls, status: int, headers: Mapping[str, Any], detail: str = "", *, ok: bool | None = None) -> HttpReply:
        """A reply from its status and headers; ``ok`` defaults to "the status is 2xx"."""
        retry_after = next((str(v) for k, v in headers.items() if k.lower() == "retry-after"), None)
        return cls(
            status=status,
            ok=200 <= status < 300 if ok is None else ok,
            retry_after_seconds=parse_retry_after(retry_after),
            detail=detail[:_DETAIL_CHARS],
        )


def _failure(name: str, reply: HttpReply) -> DeliveryError:
    message, detail = f"{name}: HTTP {reply.status}", reply.detail
    if reply.status == 429:
        return DeliveryError(message, retryable=True, retry_after_seconds=reply.retry_after_seconds, detail=detail)
    return DeliveryError(message, retryable=reply.status >= 500 or reply.status == 408, detail=detail)


async def deliver_with_retries(
    name: str,
    attempt: Callable[[], Awaitable[HttpReply]],
    *,
    retries: int,
    retry_after_cap: float = RETRY_AFTER_CAP_SECONDS,
    backoff_initial: float = BACKOFF_INITIAL_SECONDS,
) -> HttpReply:
    """Run ``attempt`` until it succeeds and return its reply, at most ``retries`` more times; else ``DeliveryError``.

    A 429 waits its ``Retry-After`` (exponential backoff without one) unless that is longer
    than ``retry_after_cap``: then it raises at once, carrying the wait for the caller. A
    5xx, 408, timeout or connection error backs off exponentially; any other status raises
    a non-retryable error at once.
    """
    for tried in range(max(retries, 0) + 1):
        try:
            reply = await attempt()
        except (aiohttp.ClientError, TimeoutError) as error:
            failure = DeliveryError(f"{name}: {type(error).__name__}", retryable=True, detail=str(error))
        else:
            if reply.ok:
                return reply
            failure = _failure(name, reply)
        wait = failure.retry_after_seconds
        if not failure.retryable or (wait is not None and wait > retry_after_cap):
            raise failure
        if tried < retries:
            # Without the server's detail, which may echo content: the router logs the outcome as the mode allows.
            logger.info("%s: retrying (%s)", name, failure.summary)
            await asyncio.sleep(wait if wait is not None else backoff_initial * 2**tried)
    raise failure


class HttpDestination(Destination):
    """A destination talking HTTP through one aiohttp session, opened on first use.

    The session belongs to the event loop it was opened in: use and ``close()`` the
    destination inside one loop.
    """

    def __init__(self, name: str, config: AlertingSettings) -> None:
        self.name = name
        self._config = config
        self._client_session: aiohttp.ClientSession | None = None

    def _session(self) -> aiohttp.ClientSession:
        if self._client_session is None or self._client_session.closed:
            timeout = aiohttp.ClientTimeout(total=self._config.request_timeout_seconds)
            self._client_session = aiohttp.ClientSession(timeout=timeout)
        return self._client_session

    async def _deliver(self, attempt: Callable[[], Awaitable[HttpReply]]) -> HttpReply:
        return await deliver_with_retries(self.name, attempt, retries=self._config.request_retries)

    async def close(self) -> None:
        """Close the HTTP session."""
        if self._client_session is not None:
            await self._client_session.close()
            self._client_session = None
