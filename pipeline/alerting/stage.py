"""The alert router: alerts in, Slack / PagerDuty / log out, each delivery once (docs/operations.md).

Every (alert, destination) pair is one delivery, remembered in a changelog-backed table
keyed by trace id once it reached a final state, so a replayed alert or a restarted
worker never posts it again.  How alerts are sent (rate limits, digests, what counts as
retryable) is the :class:`~pipeline.alerting.dispatch.Dispatcher`'s business; the router
acts on its outcomes.  A failed delivery is not retried in place (that would stall every
other alert) but published to the retry topic with the time it may be tried again.  The
retry agent takes those records in batches and makes each retry once it is due, earliest
first, sent as the router sends (over the route's limit, as one digest), with one
``alerts`` insert per batch: one retry at a time, each waiting for a rate-limit slot and
its own insert, fell far behind a destination that flapped.  After the retry budget, or on
a refusal no retry can fix, the alert goes to the alerts dead-letter topic with a metric
and an error log.  Every outcome is written to the ClickHouse ``alerts`` table.  With rate
monitors, alerts under an open incident are first bound for it (``group``,
:mod:`pipeline.monitors.grouping`) and their rows say ``grouped``, with the incident id in
``error``.  An alert matching an operator's silence (:mod:`pipeline.alerting.silences`) is
not sent; its outcome is ``silenced``, final like a delivery, so a replay after the silence
ended stays quiet too.
"""

from __future__ import annotations

import functools
import logging
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import faust
from faust.types import Message, StreamT

from pipeline import metrics
from pipeline.alerting.alert import Alert, AlertRetry, DeliveryStatus
from pipeline.alerting.alert_row import alert_row
from pipeline.alerting.destinations import Destination
from pipeline.alerting.dispatch import Dispatcher, Outcome
from pipeline.alerting.routes import build_destinations
from pipeline.alerting.silence_cache import ActiveSilences, SilenceReader
from pipeline.alerting.silencing import silenced, silenced_outcomes, silencing
from pipeline.config.alerting import AlertingSettings
from pipeline.config.stream import StreamSettings
from pipeline.stream.plumbing import (
    BATCHES,
    DeadLetterSender,
    RowStore,
    durable_batches,
    isolating_failures,
    publish,
    put_down,
    trace_table,
    withholding,
)
from pipeline.untrusted import MalformedRecord

logger = logging.getLogger(__name__)

TABLE_NAME = "halluwatch-alert-deliveries"
ROUTER_BATCH = 100
ROUTER_BATCH_SECONDS = 0.2
INTERRUPT_CHECK_SECONDS = 0.5  # how soon a waiting retry or rate-limited batch notices a rebalance

# Binds alerts for open incidents to them (the rate monitors' grouping); returns the batch in order.
Grouping = Callable[[Sequence[Alert]], Awaitable[list[Alert]]]


async def _ungrouped(alerts: Sequence[Alert]) -> list[Alert]:
    return list(alerts)


class _Interrupted(Exception):
    """A stop or a rebalance came while an agent waited: it puts its records down unacked, to be read again.

    The agent goes on rather than returning: records faust handed it already (a batch being
    taken) would otherwise stay in hand, and the stop or rebalance would wait for them for good.
    """


_PASSING = (_Interrupted,)  # the agents' own control flow, never a record's failure


@dataclass(frozen=True, slots=True)
class _Retry:
    """A retry record's request: this attempt of this alert at this destination, not before ``not_before``."""

    message: Message
    alert: Alert
    destination: Destination
    attempt: int
    not_before: float  # time.time()


class AlertRouter:
    """Registers the router and retry agents, the delivery table and its expiry timer on ``app``."""

    def __init__(
        self,
        app: faust.App,
        stream: StreamSettings,
        config: AlertingSettings,
        topics: tuple[faust.TopicT, faust.TopicT, faust.TopicT],
        store: RowStore,
        dead_letter: DeadLetterSender,
        read_silences: SilenceReader,
        group: Grouping | None = None,
    ) -> None:
        self.config = config
        self._group = group or _ungrouped
        self._max_delay = stream.write_retry_max_seconds
        alerts_topic, self.retry_topic, self.dlq_topic = topics
        self._store = store
        self._dead_letter = withholding(dead_letter, stream.content.llm_calls)
        self._app = app
        content = stream.content.alerts  # delivery errors are kept as alerts content is
        self.dispatcher = Dispatcher(self.config, build_destinations(self.config), sleep=self._sleep, content=content)
        self.deliveries = trace_table(app, TABLE_NAME, stream.topic_partitions)
        self.silences = ActiveSilences(read_silences, self.config.silence_refresh_seconds)
        self.alerts_seen = 0  # alerts records fully handled by this process
        app.agent(alerts_topic, name="halluwatch.alert-router")(self._route)
        app.agent(self.retry_topic, name="halluwatch.alert-retry")(self._retry)
        app.timer(min(600.0, self.config.dedup_retention_hours * 900))(self._expire)

    async def close(self) -> None:
        """Close the destinations' HTTP sessions."""
        await self.dispatcher.close()

    async def _route(self, stream: StreamT[bytes]) -> None:
        async for events in durable_batches(stream, ROUTER_BATCH, ROUTER_BATCH_SECONDS):
            messages = [event.message for event in events]
            try:
                await isolating_failures(messages, self._route_batch, self._dead_letter, "alert routing", _PASSING)
            except _Interrupted:  # events taken already come through too: each is sent or put down
                put_down(self._app, messages)
            else:
                self.alerts_seen += len(events)

    async def _route_batch(self, messages: Sequence[Message]) -> None:
        parsed = []
        for message in messages:
            try:
                parsed.append(Alert.from_json(message.value or b""))
            except MalformedRecord as exc:
                await self._dead_letter(message, "malformed_alert", str(exc))
        # One dispatch per route and incident: a digest of grouped alerts goes to one thread.
        by_route: dict[tuple[str, str], list[Alert]] = defaultdict(list)
        for alert in await self._group(parsed):
            by_route[(alert.route, alert.incident.incident_id if alert.incident else "")].append(alert)
        rows = []
        silences = await self.silences.current()
        for (route, _), alerts in by_route.items():
            to_send, silenced = silenced_outcomes(alerts, self.dispatcher.destinations(route), self._done, silences)
            for outcome in silenced + await self.dispatcher.dispatch(route, to_send, self._done):
                rows.append(await self._settle(outcome))
        await self._store({"alerts": rows})  # one insert per batch: many tiny inserts hurt ClickHouse

    async def _retry(self, stream: StreamT[bytes]) -> None:
        async for events in durable_batches(stream, ROUTER_BATCH, ROUTER_BATCH_SECONDS):
            rows: list[list[Any]] = []
            messages = [event.message for event in events]
            retry_batch = functools.partial(self._retry_batch, rows=rows)
            try:
                await isolating_failures(messages, retry_batch, self._dead_letter, "alert retry", _PASSING)
            except _Interrupted:
                put_down(self._app, [event.message for event in events])
            finally:
                if rows:  # attempts made before an interruption are recorded too
                    await self._store({"alerts": rows})  # one insert per batch, not per retry

    async def _retry_batch(self, messages: Sequence[Message], rows: list[list[Any]]) -> None:
        """Make each retry once it is due, earliest first; appends the outcomes' ``alerts`` rows to ``rows``."""
        waiting = [retry for message in messages if (retry := await self._due_retry(message)) is not None]
        while waiting:
            waiting.sort(key=lambda retry: retry.not_before)
            # Holding the topic until the next retry is due is the retry delay itself.
            with BATCHES.holding(waiting[0].message.topic):
                await self._sleep(max(waiting[0].not_before - time.time(), 0.0))
            due_by = time.time()
            ready = [retry for retry in waiting if retry.not_before <= due_by]
            waiting = waiting[len(ready) :]
            await self._redeliver(ready, rows)

    async def _redeliver(self, retries: Sequence[_Retry], rows: list[list[Any]]) -> None:
        """Make due retries, per route and destination as the router sends (singly or in a digest).

        Each destination's outcomes are settled before the next destination's are sent: a stop or
        a rebalance while that one waits for a rate-limit slot puts the batch down, and a delivery
        made but not yet remembered would be made again by whoever reads the records next.
        """
        silences = await self.silences.current()  # perhaps set while they waited
        by_destination: dict[tuple[str, Destination], dict[str, _Retry]] = defaultdict(dict)
        for retry in retries:
            delivery = _delivery_id(retry.alert, retry.destination)
            if not self._due(retry.alert, retry.destination, retry.attempt):
                continue  # its attempt was made: a record read twice
            if silence := silencing(retry.alert, silences):
                outcome = silenced(retry.alert, retry.destination, silence, attempts=retry.attempt - 1)
                rows.append(await self._settle(outcome))
            else:  # keyed by delivery: a record read twice in one batch is one retry
                by_destination[(retry.alert.route, retry.destination)][delivery] = retry
        for (route, destination), pending in by_destination.items():
            todo = [(retry.alert, retry.attempt) for retry in pending.values()]
            for outcome in await self.dispatcher.redeliver(route, destination, todo):
                rows.append(await self._settle(outcome))

    async def _due_retry(self, message: Message) -> _Retry | None:
        """The retry a record asks for, if it is still to be made (a malformed one is dead-lettered)."""
        try:
            record = AlertRetry.from_json(message.value or b"", time.time())
        except MalformedRecord as exc:
            await self._dead_letter(message, "malformed_alert_retry", str(exc))
            return None
        destination = self.dispatcher.destination(record.destination)
        if destination is None:
            await self._dead_letter(message, "unknown_destination", f"{record.destination} is no longer configured")
            return None
        if not self._due(record.alert, destination, record.attempt):
            return None  # a record read again (a restart, a re-read): its attempt was made
        return _Retry(message, record.alert, destination, record.attempt, record.not_before)

    async def _settle(self, outcome: Outcome) -> list[Any]:
        """Act on an outcome: schedule the retry or dead-letter it, remember it; returns its ``alerts`` row."""
        alert, destination = outcome.alert, outcome.destination
        key = alert.trace_id.encode()
        if outcome.status is DeliveryStatus.RETRYING:
            not_before = time.time() + outcome.retry_in_seconds
            retry = AlertRetry(alert, destination.name, outcome.attempt + 1, not_before, outcome.error)
            await publish(self.retry_topic, key, retry.to_json(), self._max_delay)
            logger.warning("alert %s to %s failed (attempt %d), retrying in %.0fs: %s", alert.alert_id,
                           destination.name, outcome.attempt, outcome.retry_in_seconds, outcome.error,
                           extra={"trace_id": alert.trace_id})  # fmt: skip
        elif outcome.status is DeliveryStatus.FAILED:
            headers = [
                ("halluwatch.destination", destination.name.encode()),
                ("halluwatch.attempts", str(outcome.attempt).encode()),
                ("halluwatch.reason", outcome.error.encode()[:2000]),
            ]
            await publish(self.dlq_topic, key, alert.to_json(), self._max_delay, headers)
            metrics.ALERT_DEAD_LETTERS.inc()
            logger.error("alert %s to %s failed for good after %d attempt(s): %s", alert.alert_id,
                         destination.name, outcome.attempt, outcome.error,
                         extra={"trace_id": alert.trace_id})  # fmt: skip
        elif outcome.status is DeliveryStatus.SILENCED:
            logger.info("alert %s to %s not sent: %s", alert.alert_id, destination.name, outcome.error,
                        extra={"trace_id": alert.trace_id})  # fmt: skip
        status, error = _recorded(outcome)
        if self._remember(outcome, status):
            # On the broker before anything else: a worker killed after a delivery repeats it
            # only if its memory of the delivery was still in the producer's buffer.
            await self._app.producer.flush()
        metrics.ALERT_DELIVERIES.labels(destination.name, str(status)).inc()
        return alert_row(alert, destination.name, status, outcome.attempt, error, datetime.now(UTC))

    def _remember(self, outcome: Outcome, status: DeliveryStatus) -> bool:
        """Record a final outcome, or which attempt the retry topic now holds, in the deliveries table.

        Returns whether there was anything to record.
        """
        if not status.final and outcome.status is not DeliveryStatus.RETRYING:
            return False
        key = outcome.alert.trace_id.encode()
        held: dict[str, Any] = self.deliveries.get(key) or {"first_at": time.time(), "done": {}}
        delivery = _delivery_id(outcome.alert, outcome.destination)
        scheduled: dict[str, int] = held.setdefault("scheduled", {})
        if status.final:
            held["done"][delivery] = str(status)
            scheduled.pop(delivery, None)
        else:
            scheduled[delivery] = outcome.attempt + 1
        self.deliveries[key] = held
        return True

    async def _sleep(self, seconds: float) -> None:
        """Sleep, but give way to a stop or a rebalance (both wait for every record in hand): _Interrupted.

        A rebalance is told by faust's stopped flow, the window in which it waits for records in
        hand; not by ``app.rebalancing``, which stays set after the flow resumed until recovery
        ends, when records read again are handed out and must be handled.
        """
        consumer: Any = self._app.consumer  # flow_active is faust's, not in its ConsumerT interface
        deadline = time.monotonic() + seconds
        while True:
            if self._app.should_stop or not consumer.flow_active:
                raise _Interrupted
            if (left := deadline - time.monotonic()) <= 0:
                return
            await self._app.sleep(min(left, INTERRUPT_CHECK_SECONDS))

    def _done(self, alert: Alert, destination: Destination) -> bool:
        """Whether the delivery needs nothing from the router: it reached a final state or waits on the retry topic."""
        held: dict[str, Any] | None = self.deliveries.get(alert.trace_id.encode())
        delivery = _delivery_id(alert, destination)
        return held is not None and (delivery in held["done"] or delivery in held.get("scheduled", {}))

    def _due(self, alert: Alert, destination: Destination, attempt: int) -> bool:
        """Whether a retry record's attempt is still to be made: not final, and the attempt last scheduled.

        A delivery with nothing scheduled on record is due: the record may have been published
        just before a crash lost the table's update.
        """
        held: dict[str, Any] = self.deliveries.get(alert.trace_id.encode()) or {"done": {}}
        delivery = _delivery_id(alert, destination)
        return delivery not in held["done"] and held.get("scheduled", {}).get(delivery, attempt) == attempt

    async def _expire(self) -> None:
        """Forget deliveries older than the dedup retention."""
        cutoff = time.time() - self.config.dedup_retention_hours * 3600
        for key in [key for key, held in self.deliveries.items() if held["first_at"] < cutoff]:
            del self.deliveries[key]


def _recorded(outcome: Outcome) -> tuple[DeliveryStatus, str]:
    """The status and error an outcome is recorded with: a delivery into an incident is ``grouped`` into it."""
    sent = outcome.status in (DeliveryStatus.DELIVERED, DeliveryStatus.DIGESTED)
    if sent and outcome.alert.incident is not None:
        return DeliveryStatus.GROUPED, outcome.alert.incident.incident_id
    return outcome.status, outcome.error


def _delivery_id(alert: Alert, destination: Destination) -> str:
    return f"{alert.alert_id}@{destination.name}"
