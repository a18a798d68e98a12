"""The spans stage: OTLP messages in; LLM calls detected, written and published.

Per batch (``take_events``): decode and normalize in the detector pool (never on the event
loop, so heartbeats keep flowing); hand LLM calls without content to the log join, which
gives them back through :meth:`SpansStage.detect_joined` once their GenAI log records came
or their window closed; detect the rest; write to ClickHouse; publish findings, re-keyed
traces, sampled calls and dead letters and wait for the broker's acknowledgement; only
then ack the events, which lets faust commit their offsets.  A crash anywhere before the
ack re-delivers the batch, and the idempotent tables absorb the repeat.

faust acks ``take_events`` batches by itself when the loop moves on, even if the body
failed.  To tie commits to durability instead, each event's message gets one extra
reference when the batch is taken, released only after the writes succeeded: faust's
ack alone never reaches zero references, so nothing uncommitted-yet-unwritten is ever
committed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import faust
from faust.types import EventT, StreamT

from detectors.llm_call import LLMCall
from pipeline import metrics
from pipeline.config.policy_book import PolicyBook
from pipeline.config.stream import LogJoinSettings, StreamSettings
from pipeline.log_join.stage import LogJoinStage
from pipeline.sinks.finding import findings_messages
from pipeline.sinks.finding_sinks import FindingSinks
from pipeline.sinks.rows import finding_row, llm_call_row, tool_run_rows
from pipeline.spans.processor import BatchResult, InboundMessage, SpanBatchProcessor
from pipeline.stream.formats import with_format
from pipeline.stream.plumbing import (
    BATCHES,
    SHUTDOWN_GRACE_SECONDS,
    DeadLetterSender,
    RowStore,
    put_down,
    retrying,
    wait_acknowledged,
    withholding,
)

logger = logging.getLogger(__name__)

# The calls of a batch the sampled detectors should judge, as keyed records for their topic.
Sampler = Callable[[Sequence[LLMCall]], list[tuple[bytes, bytes]]]
# The calls of a batch the judge should answer, as keyed records for the same topic; adds their
# escalation findings to the batch.
Escalate = Callable[[BatchResult], list[tuple[bytes, bytes]]]


@dataclass(frozen=True, slots=True)
class SpansOutputs:
    """Where the spans stage publishes: findings, re-keyed traces, sampled calls (dead letters: its sender)."""

    findings: faust.TopicT
    rekeyed: faust.TopicT
    sampled: faust.TopicT


class SpansStage:
    """Consumes the span topics; owns the log join that holds content-free calls."""

    def __init__(
        self,
        app: faust.App,
        stream: StreamSettings,
        log_join: LogJoinSettings,
        policies: PolicyBook,
        processor: SpanBatchProcessor,
        detector_pool: Executor,
        outputs: SpansOutputs,
        store: RowStore,
        sample: Sampler,
        dead_letter: DeadLetterSender,
        finding_sinks: FindingSinks,
        escalate: Escalate | None = None,
    ) -> None:
        self._app = app
        self._stream = stream
        self._processor = processor
        self._detector_pool = detector_pool
        self._outputs = outputs
        self._store = store
        self._sample = sample
        self._escalate = escalate
        self._finding_sinks = finding_sinks
        self._policies = policies  # each call's llm_calls row is kept as its application's content mode says
        self._llm_calls_content = stream.content.llm_calls  # tool runs are kept as the llm_calls table's content
        self._dead_letter = withholding(dead_letter, stream.content.llm_calls)  # a reason may quote the input
        self.messages_done = 0  # input messages durably processed by this process
        self.findings_published = 0  # findings records this process published (and the broker acked)
        self.log_join = LogJoinStage(app, stream, log_join, self.detect_joined, dead_letter)

    async def consume(self, stream: StreamT[bytes]) -> None:
        """The agent body: batches of span messages, each acked only once durable."""
        s = self._stream
        batches = stream.take_events(s.batch_max_messages, within=s.batch_max_wait_seconds)  # type: ignore[attr-defined]
        async for events in batches:
            for event in events:
                event.message.incref()  # released in _handle once durable (see module doc)
            batch = asyncio.ensure_future(self._handle_counted(stream, events))
            try:
                await asyncio.shield(batch)
            except asyncio.CancelledError:
                # Shutting down: finish the batch in hand so its offsets can be committed, if that
                # takes no longer than the grace; one stuck on an outage is let go unacked, to be
                # read again after the restart.
                try:
                    await asyncio.wait_for(batch, SHUTDOWN_GRACE_SECONDS)
                except TimeoutError:
                    logger.warning("stopping with a batch of %d message(s) unfinished: read again on restart",
                                   len(events))  # fmt: skip
                    put_down(self._app, [event.message for event in events])
                raise

    async def _handle_counted(self, stream: StreamT[bytes], events: Sequence[EventT[bytes]]) -> None:
        with BATCHES.batch():
            await self._handle(stream, events)

    async def _handle(self, stream: StreamT[bytes], events: Sequence[EventT[bytes]]) -> None:
        started = time.perf_counter()
        loop = asyncio.get_running_loop()
        messages = [
            InboundMessage(m.key, m.value or b"", m.topic, m.partition, m.offset) for m in (e.message for e in events)
        ]
        result = await loop.run_in_executor(self._detector_pool, self._processor.normalize, messages)
        # Calls without content wait for their GenAI log records, calls without sources may wait for
        # facts of their trace from other messages; the join detects them later.
        result.llm_calls = await self.log_join.offer_spans(result.llm_calls, result.facts, result.incomplete_traces)
        await loop.run_in_executor(self._detector_pool, self._processor.detect, result)
        await self._deliver(result)
        for event in events:
            await stream.ack(event)
        self.messages_done += len(events)
        metrics.MESSAGES_DONE.inc(len(events))
        metrics.BATCH_SECONDS.observe(time.perf_counter() - started)

    async def detect_joined(self, calls: Sequence[LLMCall]) -> None:
        """Detect, write and publish calls the log join released; returns once they are durable."""
        loop = asyncio.get_running_loop()
        result = await loop.run_in_executor(self._detector_pool, self._processor.detect_joined, calls)
        await self._deliver(result)

    async def _deliver(self, result: BatchResult) -> None:
        """Escalate, write, publish: once each, so a retried write or send never escalates again."""
        escalated = self._escalate(result) if self._escalate is not None else []
        await self.write(result)
        await self._publish(result, escalated)

    async def write(self, result: BatchResult) -> None:
        """Write a batch's calls and findings to ClickHouse; returns once they are durable."""
        now = datetime.now(UTC)
        erasable = self._stream.erasable_keys
        calls = [
            llm_call_row(call, self._policies.for_call(call).content.llm_calls, now, result.judgement_of(call),
                         erasable)
            for call in result.llm_calls
        ]  # fmt: skip
        findings = [finding_row(finding, now) for finding in result.findings]
        tool_runs = tool_run_rows(result.facts, self._llm_calls_content, now)
        await self._store({"llm_calls": calls, "findings": findings, "tool_runs": tool_runs})

    async def _publish(self, result: BatchResult, escalated: Sequence[tuple[bytes, bytes]]) -> None:
        sampled = [*self._sample(result.llm_calls), *escalated]  # once: a retried send must not sample again
        out = self._outputs

        async def send_all() -> None:
            pending: list[Awaitable[Any]] = []
            for key, value in result.rekeyed:
                pending.append(await out.rekeyed.send(key=key, value=value, headers=with_format()))
            for key, value in findings_messages(result.findings):
                pending.append(await out.findings.send(key=key, value=value, headers=with_format()))
            for key, value in sampled:
                pending.append(await out.sampled.send(key=key, value=value, headers=with_format()))
            await wait_acknowledged(pending)

        await retrying("Kafka publish", send_all, self._stream.write_retry_max_seconds)
        for letter in result.dead_letters:  # each bounded: a letter the broker refuses must not hold the rest
            await self._dead_letter(letter.message, letter.reason_kind, letter.reason)
        self.findings_published += len(result.findings)
        self._finding_sinks.emit(result.findings)  # fire and forget: each sink queues for its own thread
