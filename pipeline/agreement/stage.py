"""The agreement stage of the worker: findings in, at most one alert per trace per rule out.

Per-trace state lives in a faust table backed by a changelog topic, so a restarted or
rebalanced worker recovers it before consuming again (see :func:`pipeline.stream.plumbing.trace_table`).

Order matters for "exactly one": the alert is published and acknowledged first, then
the state that records it is written.  A crash in between re-sends the alert on
redelivery, and the router's delivery table absorbs it; the opposite order could lose it.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Sequence

import faust
from faust.types import Message, StreamT

from pipeline import metrics
from pipeline.agreement.rules import AgreementRule, Decision, TraceState, bears_on_decision
from pipeline.config.alerting import AlertingSettings
from pipeline.config.policy_book import PolicyBook
from pipeline.config.stream import StreamSettings
from pipeline.rate.maps import AppMaps
from pipeline.sinks.finding import Finding, findings_in_message
from pipeline.stream.plumbing import (
    DeadLetterSender,
    durable_batches,
    isolating_failures,
    publish,
    trace_table,
    withholding,
)
from pipeline.untrusted import MalformedRecord

logger = logging.getLogger(__name__)

TABLE_NAME = "halluwatch-agreement"


class AgreementStage:
    """Registers the agreement agent, its table and its expiry timer on ``app``."""

    def __init__(
        self,
        app: faust.App,
        stream: StreamSettings,
        config: AlertingSettings,
        policies: PolicyBook,
        findings_topic: faust.TopicT,
        alerts_topic: faust.TopicT,
        dead_letter: DeadLetterSender,
        app_maps: AppMaps | None = None,
        release_check_seconds: float = 5.0,
    ) -> None:
        self._stream = stream
        self.rule = AgreementRule.from_settings(config, policies, app_maps)
        self.alerts_topic = alerts_topic
        self._policies = policies
        # A malformed finding's reason quotes the record, which holds what the findings mode allows.
        self._dead_letter = withholding(dead_letter, stream.content.findings)
        self.states = trace_table(app, TABLE_NAME, stream.topic_partitions)
        self.findings_seen = 0  # findings records fully handled by this process
        self.alerts_published = 0
        app.agent(findings_topic, name="halluwatch.agreement")(self._consume)
        app.timer(min(60.0, config.window_seconds / 2))(self._expire)
        app.timer(release_check_seconds)(self._release)

    @property
    def decisions_held(self) -> int:
        """Traces whose decision waits for a judgment."""
        return sum(1 for raw in self.states.values() if raw.get("awaiting_until") is not None)

    async def _consume(self, stream: StreamT[bytes]) -> None:
        s = self._stream
        async for events in durable_batches(stream, s.batch_max_messages, s.batch_max_wait_seconds):
            messages = [event.message for event in events]
            await isolating_failures(messages, self._handle, self._dead_letter, "agreement")
            metrics.TRACE_STATES.set(len(self.states))

    async def _handle(self, messages: Sequence[Message]) -> None:
        by_trace: dict[str, list[Finding]] = defaultdict(list)
        records = 0
        for message in messages:
            try:
                findings = findings_in_message(message.value or b"")
            except MalformedRecord as exc:
                await self._dead_letter(message, "malformed_finding", f"not findings records: {exc}")
                continue
            for finding in findings:
                if bears_on_decision(finding):  # all the rule reads: a trace without flags needs no state
                    by_trace[finding.trace_id].append(finding)
            records += len(findings)
        for trace_id, findings in by_trace.items():
            await self.apply(trace_id, findings)
        self.findings_seen += records
        metrics.AGREEMENT_FINDINGS.inc(records)

    async def apply(self, trace_id: str, findings: list[Finding]) -> None:
        """Fold a trace's findings into its state; publish an alert when a rule fires."""
        key = trace_id.encode()
        held = self.states.get(key)
        await self._settle(key, self.rule.apply(TraceState.from_dict(held) if held else None, findings, time.time()))

    async def _settle(self, key: bytes, decision: Decision) -> None:
        if decision.alert is not None:
            # Applied once, here, by the alert's policy: the alerts topics, the alerts table and every message
            # then carry the same.
            alert = decision.alert.with_content(self._policies.named(decision.alert.policy).content.alerts)
            # Acknowledged by the broker before the state says "fired"; never given up on.
            await publish(self.alerts_topic, key, alert.to_json(), self._stream.write_retry_max_seconds)
            metrics.ALERTS.labels(alert.rule, alert.route).inc()
            self.alerts_published += 1
            logger.info("alert %s (%s) on trace %s: %s", alert.rule, alert.route, alert.trace_id,
                        alert.detector_names, extra={"trace_id": alert.trace_id})  # fmt: skip
        if decision.state is not None:
            self.states[key] = decision.state.to_dict()

    async def _release(self) -> None:
        """Decide the held traces whose judge did not answer by their deadline, each once."""
        now = time.time()
        held = [(key, raw) for key, raw in self.states.items() if raw.get("awaiting_until") is not None]
        for key, raw in held:
            state = TraceState.from_dict(raw)
            decision = self.rule.release(state, now)
            if decision.state is not None:
                logger.info("trace %s decided without its judgment: the deadline passed", state.trace_id,
                            extra={"trace_id": state.trace_id})  # fmt: skip
            await self._settle(key, decision)
        metrics.DECISIONS_HELD.set(self.decisions_held)

    async def _expire(self) -> None:
        """Forget traces whose window closed, so state stays bounded by traffic in one window.

        A trace still waiting for its judge stays until it is decided.
        """
        now = time.time()
        expired = [
            key
            for key, raw in self.states.items()
            if raw.get("awaiting_until") is None and self.rule.expired(float(raw["first_seen"]), now)
        ]
        for key in expired:
            del self.states[key]
        metrics.TRACE_STATES.set(len(self.states))
