"""The agreement stage of the worker: findings in, at most one alert per trace per rule out.

Per-trace state lives in a faust table backed by a changelog topic, so a restarted or
rebalanced worker recovers it before consuming again.  The table is keyed by the raw
trace id with the producer's partitioner, exactly as the findings topic is, so each
trace's state sits in the partition of its findings; that also lets the expiry timer
delete states outside stream iteration.

Order matters for "exactly one": the alert is published and acknowledged first, then
the state that records it is written.  A crash in between re-sends the alert on
redelivery, and the router's delivery table absorbs it; the opposite order could lose it.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import faust
from faust.types import StreamT

from pipeline import metrics
from pipeline.agreement import AgreementRule, TraceState
from pipeline.settings import Settings
from pipeline.streams import DeadLetterSender

logger = logging.getLogger(__name__)

TABLE_NAME = "halluwatch-agreement"


class AgreementStage:
    """Registers the agreement agent, its table and its expiry timer on ``app``."""

    def __init__(
        self,
        app: faust.App,
        settings: Settings,
        findings_topic: faust.TopicT,
        alerts_topic: faust.TopicT,
        dead_letter: DeadLetterSender,
    ) -> None:
        config = settings.alerting
        self.rule = AgreementRule(config.rules, config.window_seconds)
        self.alerts_topic = alerts_topic
        self._dead_letter = dead_letter
        self.states = app.Table(
            TABLE_NAME,
            default=None,
            key_serializer="raw",
            value_serializer="json",
            partitions=settings.kafka_topic_partitions,
            use_partitioner=True,
        )
        self.findings_seen = 0  # findings records fully handled by this process
        self.alerts_published = 0
        app.agent(findings_topic, name="halluwatch.agreement")(self._consume)
        app.timer(min(60.0, config.window_seconds / 2))(self._expire)

    async def _consume(self, stream: StreamT[bytes]) -> None:
        async for event in stream.events():
            message = event.message
            try:
                finding = json.loads(message.value or b"")
                trace_id = str(finding["trace_id"])
            except (ValueError, KeyError, TypeError) as exc:
                await self._dead_letter(message, "malformed_finding", f"not a findings record: {exc!r}")
            else:
                await self.apply(trace_id, finding)
            self.findings_seen += 1

    async def apply(self, trace_id: str, finding: dict[str, Any]) -> None:
        """Fold one finding into its trace's state; publish an alert when a rule fires."""
        key = trace_id.encode()
        held = self.states.get(key)
        decision = self.rule.apply(TraceState.from_dict(held) if held else None, finding, time.time())
        metrics.FINDINGS_AGREED.labels(str(decision.state is not None).lower()).inc()
        if decision.alert is not None:
            alert = decision.alert
            sent = await self.alerts_topic.send(key=key, value=alert.to_json())
            await sent  # acknowledged by the broker before the state says "fired"
            metrics.ALERTS.labels(alert.rule, alert.route).inc()
            self.alerts_published += 1
            logger.info("alert %s (%s) on trace %s: %s", alert.rule, alert.route, trace_id, alert.detector_names)
        if decision.state is not None:
            self.states[key] = decision.state.to_dict()
        metrics.TRACE_STATES.set(len(self.states))

    async def _expire(self) -> None:
        """Forget traces whose window closed, so state stays bounded by traffic in one window."""
        now = time.time()
        expired = [key for key, raw in self.states.items() if self.rule.expired(float(raw["first_seen"]), now)]
        for key in expired:
            del self.states[key]
        metrics.TRACE_STATES.set(len(self.states))
