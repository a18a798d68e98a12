"""The faust-streaming worker: the spans, agreement and alert stages of SPEC §2 in one app.

The spans stage lives here; the agreement stage (:mod:`pipeline.agreement.stage`), the
alert router (:mod:`pipeline.alerting.stage`), the sampled-detector stage
(:mod:`pipeline.sampled.stage`) and the log join (:mod:`pipeline.log_join.stage`)
register their own agents and tables on the same app and share its ClickHouse sink and
dead-letter topic.

Spans stage, per batch (``take_events``): decode and normalize in the detector pool (never
on the event loop, so heartbeats keep flowing); hand LLM calls without content to the log
join, which detects them once their GenAI log records came or their window closed; detect
the rest; write to ClickHouse; publish findings,
re-keyed traces and dead letters and wait for the broker's acknowledgement; only then
ack the events, which lets faust commit their offsets.  A crash anywhere before the ack
re-delivers the batch, and the idempotent tables absorb the repeat.

faust acks ``take_events`` batches by itself when the loop moves on, even if the body
failed.  To tie commits to durability instead, each event's message gets one extra
reference when the batch is taken, released only after the writes succeeded: faust's
ack alone never reaches zero references, so nothing uncommitted-yet-unwritten is ever
committed.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

import faust
from faust.types import EventT, Message, StreamT

from detectors.llm_call import LLMCall
from detectors.registry import build_suite
from detectors.thresholds import load_thresholds
from pipeline import metrics
from pipeline.agreement.stage import AgreementStage
from pipeline.alerting.stage import AlertRouter
from pipeline.config.settings import Settings
from pipeline.ingest.otlp_traces import Encoding
from pipeline.log_join.stage import LogJoinStage
from pipeline.sampled.stage import ConsistencyStage
from pipeline.sinks.clickhouse import ClickHouseSink, Sink, open_migrated
from pipeline.sinks.findings_otlp import FindingExporter
from pipeline.sinks.rows import finding_row, llm_call_row
from pipeline.spans.processor import BatchResult, DeadLetter, InboundMessage, SpanBatchProcessor
from pipeline.stream.dropped_records import SkippedRecordsWatchdog, commit_only_contiguous
from pipeline.stream.plumbing import BATCHES, publish, raw_topic, retrying, wait_acknowledged

logger = logging.getLogger(__name__)

# How often to look for stream records faust fetched and never delivered (two looks to act).
SKIPPED_RECORDS_LOOK_SECONDS = 2.0


def faust_broker_url(bootstrap: str) -> str:
    """Faust's broker URL for a Kafka bootstrap list ``host:port[,host:port...]``."""
    return ";".join(f"kafka://{server.strip()}" for server in bootstrap.split(",") if server.strip())


class PipelineWorker:
    """Owns the faust app, the detector pool and the sink of one worker process."""

    def __init__(self, settings: Settings, sink: Sink | None = None) -> None:
        self.settings = settings
        thresholds = load_thresholds(settings.thresholds_file)
        self.suite = build_suite(settings, thresholds)
        self.suite.start()  # model export/load now, before the group join, not in the first batch
        logger.info("thresholds %s; detectors: %s", thresholds.version, ", ".join(d.name for d in self.suite.detectors))
        self.processor = SpanBatchProcessor(
            self.suite,
            thresholds.version,
            None if settings.kafka_input_encoding == "auto" else Encoding(settings.kafka_input_encoding),
            settings.max_message_bytes,
            settings.content_limits(),
            settings.content_policies().findings,
        )
        self._llm_calls_content = settings.content_policies().llm_calls
        self.sink = sink or self._clickhouse_sink(settings)
        self._detector_pool = ThreadPoolExecutor(settings.detector_threads, thread_name_prefix="detect")
        # One writer thread: chDB and the sink buffers are not for concurrent use.
        self._sink_pool = ThreadPoolExecutor(1, thread_name_prefix="sink")
        self.finding_export = FindingExporter.from_settings(settings)  # None: findings_otlp_endpoint unset
        self.messages_done = 0  # input messages durably processed by this process
        self.findings_published = 0  # findings records this process published (and the broker acked)
        self.app = self._build_app()

    @staticmethod
    def _clickhouse_sink(settings: Settings) -> ClickHouseSink:
        return ClickHouseSink(open_migrated(settings), settings.clickhouse_database)

    def _build_app(self) -> faust.App:
        s = self.settings
        app = faust.App(
            s.kafka_group_id,
            broker=faust_broker_url(s.kafka_bootstrap),
            broker_credentials=s.kafka_security.faust_credentials(),
            store="memory://",
            autodiscover=False,
            web_enabled=False,
            datadir=str(s.data_dir / "faust"),
            topic_partitions=s.kafka_topic_partitions,
            broker_max_poll_records=s.kafka_max_poll_records,
            stream_buffer_maxsize=s.kafka_max_buffered_messages,
            consumer_max_fetch_size=s.kafka_max_fetch_bytes,
            broker_session_timeout=s.kafka_session_timeout_seconds,
            broker_rebalance_timeout=s.kafka_rebalance_timeout_seconds,
            broker_heartbeat_interval=s.kafka_heartbeat_interval_seconds,
            broker_request_timeout=s.kafka_request_timeout_seconds,
            broker_commit_interval=s.kafka_commit_interval_seconds,
            consumer_auto_offset_reset="earliest",
            producer_acks=-1,
        )
        partitions = s.kafka_topic_partitions
        self.findings_topic = raw_topic(app, partitions, s.kafka_findings_topic)
        self.dlq_topic = raw_topic(app, partitions, s.kafka_dlq_topic)
        self.rekeyed_topic = raw_topic(app, partitions, s.kafka_rekeyed_topic)
        source = raw_topic(app, partitions, s.kafka_input_topic, s.kafka_rekeyed_topic)
        app.agent(source, name="halluwatch.spans")(self._consume)
        alerts_topic = raw_topic(app, partitions, s.kafka_alerts_topic)
        self.agreement = AgreementStage(app, s, self.findings_topic, alerts_topic, self.dead_letter)
        alert_topics = (
            alerts_topic,
            raw_topic(app, partitions, s.kafka_alerts_retry_topic),
            raw_topic(app, partitions, s.kafka_alerts_dlq_topic),
        )
        self.router = AlertRouter(app, s, alert_topics, self.store, self.dead_letter)
        self.consistency_topic = raw_topic(app, partitions, s.consistency.topic)
        self.consistency = ConsistencyStage(
            app, s, self.consistency_topic, self.findings_topic, self.store, self.dead_letter
        )
        self.log_join = LogJoinStage(app, s, self._detect_joined, self.dead_letter)
        commit_only_contiguous(app)
        SkippedRecordsWatchdog(app, SKIPPED_RECORDS_LOOK_SECONDS)  # registers its timer on the app
        app.on_before_shutdown.connect(self._on_shutdown)
        return app

    async def _consume(self, stream: StreamT[bytes]) -> None:
        s = self.settings
        batches = stream.take_events(s.batch_max_messages, within=s.batch_max_wait_seconds)  # type: ignore[attr-defined]
        async for events in batches:
            for event in events:
                event.message.incref()  # released in _handle once durable (see module doc)
            batch = asyncio.ensure_future(self._handle_counted(stream, events))
            try:
                await asyncio.shield(batch)
            except asyncio.CancelledError:
                # Shutting down: finish the batch in hand so its offsets can be committed.
                await batch
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
        result = await loop.run_in_executor(self._detector_pool, self.processor.normalize, messages)
        # Calls without content wait for their GenAI log records; the join detects them later.
        result.llm_calls = await self.log_join.offer_spans(result.llm_calls)
        await loop.run_in_executor(self._detector_pool, self.processor.detect, result)
        await self._write(result)
        await self._publish(result)
        for event in events:
            await stream.ack(event)
        self.messages_done += len(events)
        metrics.MESSAGES_DONE.inc(len(events))
        metrics.BATCH_SECONDS.observe(time.perf_counter() - started)

    async def _detect_joined(self, calls: Sequence[LLMCall]) -> None:
        """Detect, write and publish calls the log join released; returns once they are durable."""
        loop = asyncio.get_running_loop()
        result = await loop.run_in_executor(self._detector_pool, self.processor.detect_joined, calls)
        await self._write(result)
        await self._publish(result)

    async def _write(self, result: BatchResult) -> None:
        now = datetime.now(UTC)
        calls = [llm_call_row(call, self._llm_calls_content, now) for call in result.llm_calls]
        findings = [finding_row(record, now) for record in result.findings]
        await self.store({"llm_calls": calls, "findings": findings})

    async def store(self, rows_by_table: Mapping[str, Sequence[Sequence[Any]]]) -> None:
        """Write rows to ClickHouse tables, retrying with backoff until they are durable."""
        if not any(rows_by_table.values()):
            return
        loop = asyncio.get_running_loop()

        def add_all() -> None:
            for table, rows in rows_by_table.items():
                self.sink.add(table, rows)

        # add and flush both run in the one sink thread: the buffers are not thread-safe.
        await loop.run_in_executor(self._sink_pool, add_all)

        async def flush() -> None:
            await loop.run_in_executor(self._sink_pool, self.sink.flush)

        await retrying("ClickHouse write", flush, self.settings.write_retry_max_seconds)
        for table, rows in rows_by_table.items():
            metrics.ROWS_WRITTEN.labels(table).inc(len(rows))

    async def dead_letter(self, message: Message, reason_kind: str, reason: str) -> None:
        """Send a message that cannot be handled to the dead-letter topic, with the reason in headers."""
        letter = DeadLetter(
            InboundMessage(message.key, message.value or b"", message.topic, message.partition, message.offset),
            reason_kind,
            reason,
        )
        await publish(
            self.dlq_topic, message.key, message.value, self.settings.write_retry_max_seconds, letter.headers()
        )
        metrics.DEAD_LETTERS.labels(reason_kind).inc()
        logger.warning("dead-lettered %s/%s: %s", message.topic, message.offset, reason)

    async def _publish(self, result: BatchResult) -> None:
        sampled = self.consistency.sample(result.llm_calls)  # once: a retried send must not sample again

        async def send_all() -> None:
            pending: list[Awaitable[Any]] = []
            for key, value in result.rekeyed:
                pending.append(await self.rekeyed_topic.send(key=key, value=value))
            for record in result.findings:
                value = json.dumps(record, ensure_ascii=False, default=str).encode()
                pending.append(await self.findings_topic.send(key=record["trace_id"].encode(), value=value))
            for key, value in sampled:
                pending.append(await self.consistency_topic.send(key=key, value=value))
            for letter in result.dead_letters:
                pending.append(
                    await self.dlq_topic.send(
                        key=letter.message.key, value=letter.message.value, headers=letter.headers()
                    )
                )
                logger.warning("dead-lettered %s/%s: %s", letter.message.topic, letter.message.offset, letter.reason)
            await wait_acknowledged(pending)

        await retrying("Kafka publish", send_all, self.settings.write_retry_max_seconds)
        self.findings_published += len(result.findings)
        if self.finding_export:  # fire and forget: queued for the exporter's thread
            self.finding_export.emit(result.findings)

    async def _on_shutdown(self, sender: Any, /, *args: Any, signal: Any, **kwargs: Any) -> None:
        """Release pools and the ClickHouse client once the consumer has stopped."""
        await self.router.close()
        await self.consistency.close()
        self._detector_pool.shutdown(wait=True)
        self._sink_pool.shutdown(wait=True)
        self.sink.close()
        self.suite.close()
        if self.finding_export:
            await asyncio.to_thread(self.finding_export.shutdown)
