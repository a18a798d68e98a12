"""The alert router: alerts in, Slack / PagerDuty / log out, each delivery once (SPEC §5).

Every (alert, destination) pair is one delivery, remembered in a changelog-backed
table keyed by trace id once it reached a final state, so a replayed alert or a
restarted worker never posts it again.  A failed delivery is not retried in place
(that would stall every other alert) but published to the retry topic with the time
it may be tried again; the retry agent sleeps until then.  After the retry budget, or
on a refusal no retry can fix, the alert goes to the alerts dead-letter topic with a
metric and an error log.  Every outcome is written to the ClickHouse ``alerts`` table.

Each route has a per-minute rate limit; alerts over it go out as one digest message
in the same batch, never dropped and never held back.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import defaultdict
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import faust
from faust.types import EventT, StreamT

from pipeline import metrics
from pipeline.alerting.alert import Alert
from pipeline.alerting.destinations import DeliveryError, Destination, build_destinations
from pipeline.alerting.ratelimit import RouteRateLimiter
from pipeline.rows import DeliveryStatus, alert_row
from pipeline.settings import Settings
from pipeline.streams import DeadLetterSender, RowStore, publish, trace_table

logger = logging.getLogger(__name__)

TABLE_NAME = "halluwatch-alert-deliveries"
ROUTER_BATCH = 100


class AlertRouter:
    """Registers the router and retry agents, the delivery table and its expiry timer on ``app``."""

    def __init__(
        self,
        app: faust.App,
        settings: Settings,
        topics: tuple[faust.TopicT, faust.TopicT, faust.TopicT],
        store: RowStore,
        dead_letter: DeadLetterSender,
    ) -> None:
        self.config = settings.alerting
        self._max_delay = settings.write_retry_max_seconds
        alerts_topic, self.retry_topic, self.dlq_topic = topics
        self._store = store
        self._dead_letter = dead_letter
        self.routes = build_destinations(self.config)
        self._by_name = {d.name: d for destinations in self.routes.values() for d in destinations}
        self.limiter = RouteRateLimiter({name: route.max_per_minute for name, route in self.config.routes.items()})
        self.deliveries = trace_table(app, TABLE_NAME, settings.kafka_topic_partitions)
        self.alerts_seen = 0  # alerts records fully handled by this process
        app.agent(alerts_topic, name="halluwatch.alert-router")(self._route)
        app.agent(self.retry_topic, name="halluwatch.alert-retry")(self._retry)
        app.timer(min(600.0, self.config.dedup_retention_hours * 900))(self._expire)

    def destinations(self, route: str) -> list[Destination]:
        """Where a route's alerts go; an unknown route (an alert from an older config) goes to the log."""
        fallback: list[Destination] = self.routes.get("log") or next(iter(self.routes.values()))
        return self.routes.get(route) or fallback

    async def close(self) -> None:
        """Close the destinations' HTTP sessions."""
        for destination in self._by_name.values():
            await destination.close()

    async def _route(self, stream: StreamT[bytes]) -> None:
        batches = stream.take_events(ROUTER_BATCH, within=0.2)  # type: ignore[attr-defined]
        async for events in batches:
            by_route: dict[str, list[Alert]] = defaultdict(list)
            for alert in await self._parse(events):
                by_route[alert.route].append(alert)
            for route, alerts in by_route.items():
                await self._deliver_route(route, alerts)
            self.alerts_seen += len(events)

    async def _parse(self, events: Sequence[EventT[bytes]]) -> list[Alert]:
        alerts = []
        for event in events:
            try:
                alerts.append(Alert.from_json(event.message.value or b""))
            except (ValueError, KeyError, TypeError) as exc:
                await self._dead_letter(event.message, "malformed_alert", f"not an alert record: {exc!r}")
        return alerts

    async def _deliver_route(self, route: str, alerts: list[Alert]) -> None:
        """Deliver a route's alerts of one batch within its rate limit; the overflow as a digest."""
        for destination in self.destinations(route):
            todo = [alert for alert in alerts if not self._done(alert, destination)]
            if not todo:
                continue
            allowed = self.limiter.take(f"{route}@{destination.name}", len(todo))
            if allowed >= len(todo):
                singles, overflow = todo, []
            else:  # the last slot (or the next free one) carries the digest
                singles, overflow = todo[: max(allowed - 1, 0)], todo[max(allowed - 1, 0) :]
                if allowed == 0:
                    await self._wait_for_slot(f"{route}@{destination.name}")
            for alert in singles:
                await self._deliver(alert, destination, attempt=1)
            if overflow:
                await self._deliver_digest(route, overflow, destination)

    async def _wait_for_slot(self, bucket: str) -> None:
        while (wait := self.limiter.seconds_until_available(bucket)) > 0:
            await asyncio.sleep(wait)
        self.limiter.take(bucket, 1)

    async def _deliver(self, alert: Alert, destination: Destination, attempt: int) -> None:
        try:
            await destination.send(alert)
        except Exception as exc:
            await self._failed(alert, destination, attempt, exc)
        else:
            await self._record(alert, destination, DeliveryStatus.DELIVERED, attempt)

    async def _deliver_digest(self, route: str, alerts: list[Alert], destination: Destination) -> None:
        try:
            await destination.send_digest(route, alerts)
        except Exception as exc:  # each alert then retries on its own, within the limit again
            for alert in alerts:
                await self._failed(alert, destination, 1, exc)
        else:
            for alert in alerts:
                await self._record(alert, destination, DeliveryStatus.DIGESTED, 1)

    async def _failed(self, alert: Alert, destination: Destination, attempt: int, exc: Exception) -> None:
        error = f"{type(exc).__name__}: {exc}"
        retryable = not isinstance(exc, DeliveryError) or exc.retryable
        if not retryable or attempt >= self.config.delivery_attempts:
            await self._give_up(alert, destination, attempt, error)
            return
        backoff = min(self.config.retry_initial_seconds * 2 ** (attempt - 1), self.config.retry_max_seconds)
        hinted = exc.retry_after_seconds if isinstance(exc, DeliveryError) else None
        retry = {
            "alert": json.loads(alert.to_json()),
            "destination": destination.name,
            "attempt": attempt + 1,
            "not_before": time.time() + max(backoff, hinted or 0.0),
            "error": error,
        }
        await publish(self.retry_topic, alert.trace_id.encode(), json.dumps(retry).encode(), self._max_delay)
        logger.warning("alert %s to %s failed (attempt %d), will retry: %s", alert.alert_id, destination.name,
                       attempt, error)  # fmt: skip
        await self._record(alert, destination, DeliveryStatus.RETRYING, attempt, error)

    async def _give_up(self, alert: Alert, destination: Destination, attempt: int, error: str) -> None:
        headers = [
            ("halluwatch.destination", destination.name.encode()),
            ("halluwatch.attempts", str(attempt).encode()),
            ("halluwatch.reason", error.encode()[:2000]),
        ]
        await publish(self.dlq_topic, alert.trace_id.encode(), alert.to_json(), self._max_delay, headers)
        metrics.ALERT_DEAD_LETTERS.inc()
        logger.error("alert %s to %s failed for good after %d attempt(s): %s", alert.alert_id, destination.name,
                     attempt, error)  # fmt: skip
        await self._record(alert, destination, DeliveryStatus.FAILED, attempt, error)

    async def _retry(self, stream: StreamT[bytes]) -> None:
        async for event in stream.events():
            message = event.message
            try:
                retry = json.loads(message.value or b"")
                alert = Alert.from_json(json.dumps(retry["alert"]))
                attempt, not_before = int(retry["attempt"]), float(retry["not_before"])
                destination = self._by_name.get(str(retry["destination"]))
            except (ValueError, KeyError, TypeError) as exc:
                await self._dead_letter(message, "malformed_alert_retry", f"not a retry record: {exc!r}")
                continue
            if destination is None:
                await self._dead_letter(message, "unknown_destination", f"{retry['destination']} is not configured")
                continue
            # Holding this partition until the alert is due is the retry delay itself.
            await asyncio.sleep(max(not_before - time.time(), 0.0))
            if not self._done(alert, destination):
                await self._wait_for_slot(f"{alert.route}@{destination.name}")
                await self._deliver(alert, destination, attempt)

    def _done(self, alert: Alert, destination: Destination) -> bool:
        held: dict[str, Any] | None = self.deliveries.get(alert.trace_id.encode())
        return held is not None and _delivery_id(alert, destination) in held["done"]

    async def _record(
        self, alert: Alert, destination: Destination, status: DeliveryStatus, attempt: int, error: str = ""
    ) -> None:
        metrics.ALERT_DELIVERIES.labels(destination.name, str(status)).inc()
        if status is not DeliveryStatus.RETRYING:  # remembered first: the smallest window for a repeat
            key = alert.trace_id.encode()
            held: dict[str, Any] = self.deliveries.get(key) or {"first_at": time.time(), "done": {}}
            held["done"][_delivery_id(alert, destination)] = str(status)
            self.deliveries[key] = held
        await self._store("alerts", [alert_row(alert, destination.name, status, attempt, error, datetime.now(UTC))])

    async def _expire(self) -> None:
        """Forget deliveries older than the dedup retention."""
        cutoff = time.time() - self.config.dedup_retention_hours * 3600
        for key in [key for key, held in self.deliveries.items() if held["first_at"] < cutoff]:
            del self.deliveries[key]


def _delivery_id(alert: Alert, destination: Destination) -> str:
    return f"{alert.alert_id}@{destination.name}"
