"""The worker: one faust app that runs every stage of the path in docs/architecture.md, and the services they share.

The spans stage (:mod:`pipeline.spans.stage`, with the log join it owns), the agreement
stage (:mod:`pipeline.agreement.stage`), the alert router (:mod:`pipeline.alerting.stage`),
the sampled-detector stage (:mod:`pipeline.sampled.stage`) and, when configured, the rate
monitors (:mod:`pipeline.monitors.stage`) register their agents, tables and timers on this
app.  They share the detector pool, the ClickHouse sink (:meth:`store`) and the dead-letter
topic (:meth:`dead_letter`), the offset-commit work-around of
:mod:`pipeline.stream.dropped_records` and the seek work-around of :mod:`pipeline.stream.consumer_seek`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from typing import Any, TypeVar

import faust

from detectors.thresholds import load_thresholds
from detectors.verdict import load_verdict_model
from pipeline import metrics
from pipeline.agreement.stage import AgreementStage
from pipeline.alerting.destinations import Destination
from pipeline.alerting.silence_store import SilenceStore
from pipeline.alerting.silences import Silence
from pipeline.alerting.stage import AlertRouter
from pipeline.config.alert_routes import AlertRoutes
from pipeline.config.data_dirs import writable_dir
from pipeline.config.policy_book import PolicyBook
from pipeline.config.settings import Settings
from pipeline.config.watchdog_timing import LOOK_SECONDS
from pipeline.escalation.escalator import Escalator
from pipeline.ingest.otlp_traces import Encoding
from pipeline.judge.budget import JudgeBudget, LocalCounter
from pipeline.monitors.stage import MonitorStage
from pipeline.monitors.store import IncidentStore
from pipeline.rate.false_alarms import RouteFalseAlarms, route_false_alarms
from pipeline.rate.maps import AppMap, AppMaps, MapStore
from pipeline.rate.sampler import Strata
from pipeline.rate.store import RateStore, Scope
from pipeline.sampled.stage import ConsistencyStage
from pipeline.sinks.clickhouse import ClickHouseSink, Sink, open_clickhouse, open_migrated
from pipeline.sinks.finding_sinks import FindingSinks
from pipeline.spans.processor import LETTER_HEADERS_BYTES, DeadLetter, InboundMessage, SpanBatchProcessor
from pipeline.spans.stage import SpansOutputs, SpansStage
from pipeline.spans.suite import suite_from_settings
from pipeline.stream.consumer_seek import check_seek_internals, seek_on_consumer_thread
from pipeline.stream.dropped_records import SkippedRecordsWatchdog, check_faust_internals, commit_only_contiguous
from pipeline.stream.kafka_auth import faust_credentials
from pipeline.stream.plumbing import InputRecord, publish, raw_topic, retrying

logger = logging.getLogger(__name__)

T = TypeVar("T")


def faust_broker_url(bootstrap: str) -> str:
    """Faust's broker URL for a Kafka bootstrap list ``host:port[,host:port...]``."""
    return ";".join(f"kafka://{server.strip()}" for server in bootstrap.split(",") if server.strip())


class PipelineWorker:
    """Owns the faust app, the detector pool and the sink of one worker process."""

    def __init__(self, settings: Settings, sink: Sink | None = None) -> None:
        check_faust_internals()  # before models load or ClickHouse is reached: a faust upgrade fails at once
        check_seek_internals()
        self.settings = settings
        profile = settings.detectors.embeddings.profile
        self.thresholds = thresholds = load_thresholds(settings.thresholds_file, profile)
        # Before the models load: a verdict model trained for another profile refuses the start at once.
        verdict = load_verdict_model(settings.detectors.verdict_model, profile)
        self.suite = suite_from_settings(settings, thresholds)
        self.suite.start()  # model export/load now, before the group join, not in the first batch
        embeddings = settings.detectors.embeddings
        store = embeddings.passage_store
        where = f"{store.path} (up to {store.max_megabytes} MB)" if store.enabled and store.path else "off"
        logger.info(
            "embedding profile %s: %s (%s); passage store %s", profile, embeddings.model, embeddings.precision, where
        )
        logger.info("thresholds %s; detectors: %s", thresholds.version, ", ".join(d.name for d in self.suite.detectors))
        if thresholds.inherited:
            logger.warning(
                "thresholds file %s has no entry for %s: built-in thresholds used (recalibrate to set them)",
                settings.thresholds_file,
                ", ".join(thresholds.inherited),
            )
        self.policies = PolicyBook(settings, thresholds)
        logger.info("verdict model %s: p_hallucination for every call a detector it weighs checked", verdict.version)
        if settings.policies:
            logger.info("application policies: %s", "; ".join(
                f"{name} ({policy.match.describe()})" for name, policy in settings.policies.items()))  # fmt: skip
        # The silences the alert router reads and the applications' maps: none without ClickHouse (a test's sink).
        self._silence_store: SilenceStore | None = None
        self._map_store: MapStore | None = None
        self.app_maps = AppMaps()
        if sink is None:
            client = open_migrated(settings)
            sink = ClickHouseSink(client, settings.clickhouse_database)
            self._silence_store = SilenceStore(client, settings.clickhouse_database)
            self._map_store = MapStore(client, settings.clickhouse_database)
            self._take_maps(self._map_store.applied())
        self.sink = sink
        self.processor = SpanBatchProcessor(
            self.suite,
            thresholds.version,
            None if settings.kafka_input_encoding == "auto" else Encoding(settings.kafka_input_encoding),
            settings.max_message_bytes,
            settings.content_limits(),
            self.policies,
            verdict,
            self.app_maps,
        )
        self._detector_pool = ThreadPoolExecutor(settings.detector_threads, thread_name_prefix="detect")
        # One writer thread: chDB and the sink buffers are not for concurrent use.
        self._sink_pool = ThreadPoolExecutor(1, thread_name_prefix="sink")
        self.finding_sinks = FindingSinks.from_settings(settings)  # side channels: the OTLP export when set
        self.app = self._build_app()

    def _build_app(self) -> faust.App:
        s = self.settings
        writable_dir(s.data_dir / "faust", "worker state")  # a fresh directory has none yet
        app = faust.App(
            s.kafka_group_id,
            # faust reads unprefixed variables (BROKER_URL, WEB_PORT, PRODUCER_ACKS...) over what it is
            # given; halluwatch is configured by HALLUWATCH_* alone, so a stray BROKER_URL changes nothing.
            env={},
            broker=faust_broker_url(s.kafka_bootstrap),
            broker_credentials=faust_credentials(s.kafka_security),
            store="memory://",
            # faust's check that a table is not past its changelog's end guards RocksDB files
            # against topics rebuilt underneath them; memory stores have none. The embedded Tansu
            # reports a partition's end as the offset after the first record of its last batch, so
            # with the check a worker that gets back a table partition it wrote last crashed
            # (ConsistencyError). A table already past that end needs no recovery anyway.
            recovery_consistency_check=False,
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
            # A message of any accepted size must fit back out: re-keyed traces, dead letters
            # (aiokafka's default is 1 MiB, so a 2 MiB trace could be consumed but not re-produced).
            producer_max_request_size=s.max_produce_bytes,
        )
        stream = s.stream()  # what every stage's loop shares; each also gets its own section
        partitions = stream.topic_partitions
        findings_topic = raw_topic(app, partitions, s.kafka_findings_topic)
        self.dlq_topic = raw_topic(app, partitions, s.kafka_dlq_topic)
        consistency_topic = raw_topic(app, partitions, s.consistency.topic)
        judge_budget = self._judge_budget(app) if s.escalation.enabled else None
        self.consistency = ConsistencyStage(
            app,
            stream,
            s.consistency,
            s.detectors,
            self.thresholds,
            self.policies,
            consistency_topic,
            findings_topic,
            self.store,
            self.dead_letter,
            self.finding_sinks,
            judge_budget,
        )
        alerts_topic = raw_topic(app, partitions, s.kafka_alerts_topic)
        self.agreement = AgreementStage(
            app, stream, s.alerting, self.policies, findings_topic, alerts_topic, self.dead_letter, self.app_maps,
            s.escalation.release_check_seconds,
        )  # fmt: skip
        judge = self.consistency.escalation_judge
        self.escalator: Escalator | None = None
        if judge_budget is not None and judge is not None:  # the judge's band is the agreement stage's own rules
            self.escalator = Escalator(s.escalation, self.agreement.rule, self.policies, judge_budget, judge,
                                       self.thresholds.version, s.review.seed)  # fmt: skip
        outputs = SpansOutputs(
            findings=findings_topic,
            rekeyed=raw_topic(app, partitions, s.kafka_rekeyed_topic),
            sampled=consistency_topic,
        )
        self.spans = SpansStage(
            app,
            stream,
            s.log_join(),
            self.policies,
            self.processor,
            self._detector_pool,
            outputs,
            self.store,
            self.consistency.sample,
            self.dead_letter,
            self.finding_sinks,
            self.escalator.escalate if self.escalator is not None else None,
        )
        self.log_join = self.spans.log_join
        source = raw_topic(app, partitions, s.kafka_input_topic, s.kafka_rekeyed_topic)
        app.agent(source, name="halluwatch.spans")(self.spans.consume)
        alert_topics = (
            alerts_topic,
            raw_topic(app, partitions, s.kafka_alerts_retry_topic),
            raw_topic(app, partitions, s.kafka_alerts_dlq_topic),
        )
        self.incidents = IncidentStore(open_clickhouse(s), s.clickhouse_database) if s.monitors else None
        self.monitors = None
        if self.incidents is not None:  # the sink migrated the database: the incidents table is there
            self._rates = RateStore(open_clickhouse(s), s.clickhouse_database, Strata.configured(s.review))
            destinations = self._route_destinations
            self.monitors = MonitorStage(
                app, s.monitors, s.alerting, self.incidents, self._in_sink_thread, self.store, destinations,
                self._false_alarms,
            )  # fmt: skip
        grouping = self.monitors.open_incidents.group if self.monitors else None
        self.router = AlertRouter(
            app, stream, s.alerting, alert_topics, self.store, self.dead_letter, self.read_silences, grouping
        )
        app.timer(s.review.map_refresh_seconds)(self._refresh_maps)
        commit_only_contiguous(app)
        seek_on_consumer_thread(app)  # the seeks above among them
        SkippedRecordsWatchdog(app, LOOK_SECONDS)  # registers its timer on the app
        app.on_before_shutdown.connect(self._on_shutdown)
        return app

    def _judge_budget(self, app: faust.App) -> JudgeBudget:
        """Each application's judge budget, this worker's share of it: the input partitions it owns of all.

        Calls spread over the partitions by trace id, so the shares of a fleet add up to the whole
        budget without the workers asking each other (pipeline/judge/budget.py).
        """
        s = self.settings
        budget = JudgeBudget(s.escalation.apps, LocalCounter(), default=s.escalation.budget, share=0.0)

        async def reshare(sender: Any, /, *args: Any, signal: Any, **kwargs: Any) -> None:
            assigned = args[0] if args else kwargs.get("assigned", ())
            owned = sum(1 for tp in assigned if tp.topic == s.kafka_input_topic)
            budget.reshare(min(owned / s.kafka_topic_partitions, 1.0))
            logger.info("judge budget: this worker's share is %d of %d input partitions", owned,
                        s.kafka_topic_partitions)  # fmt: skip

        app.on_partitions_assigned.connect(reshare)
        return budget

    @property
    def messages_done(self) -> int:
        """Input messages this process processed durably."""
        return self.spans.messages_done

    @property
    def findings_published(self) -> int:
        """Findings records this process published (and the broker acknowledged): the detectors' and the judges'."""
        return self.spans.findings_published + self.consistency.findings_published

    @property
    def escalations_sent(self) -> int:
        """Calls this process sent to the judge."""
        return self.escalator.sent if self.escalator is not None else 0

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

    async def _in_sink_thread(self, call: Callable[[], T]) -> T:
        """Run a blocking ClickHouse call in the sink's thread: chDB clients are not for concurrent use."""
        return await asyncio.get_running_loop().run_in_executor(self._sink_pool, call)

    def _route_destinations(self, route: str) -> list[Destination]:
        """A route's destinations, shared with the alert router (one HTTP session, one PagerDuty key)."""
        return self.router.dispatcher.destinations(route)

    def _false_alarms(self, now: datetime) -> list[tuple[str, RouteFalseAlarms]]:
        """Each application's routes' false alarms from its review verdicts of the review window (blocking)."""
        s, rates = self.settings, self._rates
        routes = AlertRoutes.configured(s.alerting, s.policies)
        since = now - timedelta(days=s.review.window_days)
        return [(app, route) for app in rates.apps()
                for route in route_false_alarms(rates, Scope(since, now, app=app), routes)]  # fmt: skip

    async def _refresh_maps(self) -> None:
        """Re-read the applied maps of p_hallucination (a map applied reaches the next calls without a restart)."""
        if self._map_store is None:
            return
        try:
            self._take_maps(await self._in_sink_thread(self._map_store.applied))
        except Exception as exc:  # driver errors are many types; the maps known stay in use
            logger.error("reading the applications' maps of p_hallucination failed; the known ones stay: %s", exc)

    def _take_maps(self, maps: dict[str, AppMap]) -> None:
        for app in self.app_maps.update(maps):
            applied = maps.get(app)
            if applied is None:
                logger.info("application %s: p_hallucination through the shipped calibration", app)
                continue
            gates = ", ".join(f"{route} {value:.3f}" for route, value in sorted(applied.minimums.items()))
            logger.info("application %s: p_hallucination through map %s (%d verdicts); route minimums %s",
                        app, applied.version, applied.verdicts, gates or "of the thresholds file")  # fmt: skip

    async def read_silences(self, now: datetime) -> list[Silence]:
        """The silences in force at ``now``, read on the sink's thread (the one ClickHouse session's user)."""
        if self._silence_store is None:
            return []
        return await asyncio.get_running_loop().run_in_executor(self._sink_pool, self._silence_store.listed, now)

    async def dead_letter(self, message: InputRecord, reason_kind: str, reason: str) -> None:
        """Send a message that cannot be handled to the dead-letter topic, with the reason in headers.

        The letter always fits the producer's limit (a message too large is cut to its head), and
        a broker that will not take it is given ``dead_letter_timeout_seconds``: then the
        message's coordinates go to the error log and a metric, and its partition moves on.
        """
        source = InboundMessage(message.key, message.value or b"", message.topic, message.partition, message.offset)
        letter = DeadLetter(source, reason_kind, reason)
        value, headers = letter.fitted(self.settings.max_produce_bytes - LETTER_HEADERS_BYTES)
        s = self.settings
        where = f"{message.topic}/{message.partition}/{message.offset}"
        if not await publish(
            self.dlq_topic, letter.key, value, s.write_retry_max_seconds, headers, s.dead_letter_timeout_seconds
        ):
            metrics.DEAD_LETTERS_LOST.labels(reason_kind).inc()
            logger.error("dead letter of %s not taken by the broker in %gs, given up (%s): %s",
                         where, s.dead_letter_timeout_seconds, reason_kind, reason)  # fmt: skip
            return
        metrics.DEAD_LETTERS.labels(reason_kind).inc()
        logger.warning("dead-lettered %s: %s", where, reason)

    async def _on_shutdown(self, sender: Any, /, *args: Any, signal: Any, **kwargs: Any) -> None:
        """Release pools and the ClickHouse client once the consumer has stopped."""
        await self.router.close()
        await self.consistency.close()
        self._detector_pool.shutdown(wait=True)
        self._sink_pool.shutdown(wait=True)
        if self.incidents is not None:
            self.incidents.close()
        self.sink.close()
        self.suite.close()
        await asyncio.to_thread(self.finding_sinks.shutdown)
