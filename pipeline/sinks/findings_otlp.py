"""Findings back to the trace UI: each finding as an OTLP ``gen_ai.evaluation.result`` event.

The OpenTelemetry GenAI semantic conventions define the evaluation result as a log record
(event) parented to the evaluated span, so a backend that joins logs to traces shows the
verdict beside the LLM call (gen_ai.evaluation.name / score.value / score.label /
explanation). halluwatch already has the evaluated span's trace and span id in every
finding record, so the record is built with that span as its parent context.

Sending is the SDK's job: a ``LoggerProvider`` with a ``BatchLogRecordProcessor`` and the
OTLP/HTTP ``OTLPLogExporter`` (protobuf, retries with backoff within the timeout). The
pipeline hands records over and returns at once; the processor's thread encodes and POSTs
them. This is best effort by design: findings are durable in ClickHouse and on
``halluwatch.findings`` already, so an endpoint that is down or slow costs exported events
(counted in ``halluwatch_findings_exported_total{outcome}``), never pipeline progress.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Final

from opentelemetry._logs import SeverityNumber
from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.sdk._logs import LoggerProvider, ReadableLogRecord
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor, LogRecordExporter, LogRecordExportResult
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai
from opentelemetry.semconv.attributes.error_attributes import ERROR_TYPE
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, set_span_in_context
from opentelemetry.util.types import AttributeValue

from detectors.base import DetectorStatus
from pipeline import metrics
from pipeline.config.settings import Settings
from pipeline.ingest.otlp_logs import EVALUATION_RESULT_EVENT
from pipeline.sinks.finding import Finding

logger = logging.getLogger(__name__)

# The SDK's defaults: a queue that holds a few batches while the endpoint is slow, and a batch
# sent at least every second, so events reach the trace UI about as soon as the findings table.
DEFAULT_MAX_QUEUE_SIZE: Final = 2048
DEFAULT_SCHEDULE_DELAY_MILLIS: Final = 1000
_MAX_EXPORT_BATCH_SIZE: Final = 512


def evaluation_attributes(finding: Finding) -> dict[str, AttributeValue]:
    """The event's attributes: the GenAI evaluation ones, then halluwatch's own.

    A score is only sent for findings whose detector ran (status ok): skipped and failed
    runs have none worth plotting. The label is the low-cardinality verdict the UI shows.
    """
    status = finding.status
    attributes: dict[str, AttributeValue] = {
        gen_ai.GEN_AI_EVALUATION_NAME: finding.detector,
        gen_ai.GEN_AI_EVALUATION_SCORE_LABEL: score_label(finding),
        gen_ai.GEN_AI_EVALUATION_EXPLANATION: finding.summary,
        "halluwatch.status": status,
        "halluwatch.flagged": bool(finding.flagged),
        "halluwatch.severity": int(finding.severity),
        "halluwatch.threshold": float(finding.threshold),
        "halluwatch.detector.version": finding.detector_version,
        "halluwatch.thresholds.version": finding.thresholds_version,
        # The evaluated call's; the resource's service.name is halluwatch, which made the event.
        "halluwatch.call.service": finding.service,
        "halluwatch.call.model": finding.model,
        "halluwatch.call.operation": finding.operation,
    }
    if finding.p_hallucination is not None:  # the call's, the same on each of its findings
        attributes["halluwatch.p_hallucination"] = float(finding.p_hallucination)
        attributes["halluwatch.verdict.version"] = finding.verdict_version
    if status == DetectorStatus.OK:
        attributes[gen_ai.GEN_AI_EVALUATION_SCORE_VALUE] = float(finding.score)  # an int score stays a double
    elif status == DetectorStatus.ERROR:
        attributes[ERROR_TYPE] = "detector_error"
    return attributes


def score_label(finding: Finding) -> str:
    """``flagged`` or ``ok`` for a detector that ran, else its status (``skipped``, ``error``)."""
    if finding.status != DetectorStatus.OK:
        return finding.status
    return "flagged" if finding.flagged else "ok"


def _severity(finding: Finding) -> SeverityNumber:
    """Log severity, so log views can filter: flagged warns, a detector error is an error."""
    if finding.status == DetectorStatus.ERROR:
        return SeverityNumber.ERROR
    return SeverityNumber.WARN if finding.flagged else SeverityNumber.INFO


def _parent(finding: Finding) -> Context:
    """A context whose current span is the evaluated one, which the SDK copies onto the record."""
    span = SpanContext(
        trace_id=int(finding.trace_id, 16),
        span_id=int(finding.span_id, 16),
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
    )
    return set_span_in_context(NonRecordingSpan(span))


class _CountingExporter(LogRecordExporter):
    """Counts each batch's outcome and releases its records from the exporter's bound."""

    def __init__(self, inner: LogRecordExporter, release: Callable[[int], None]) -> None:
        self._inner = inner
        self._release = release

    def export(self, batch: Sequence[ReadableLogRecord]) -> LogRecordExportResult:
        result = LogRecordExportResult.FAILURE
        try:
            result = self._inner.export(batch)
        finally:
            outcome = "sent" if result is LogRecordExportResult.SUCCESS else "failed"
            metrics.FINDINGS_EXPORTED.labels(outcome).inc(len(batch))
            self._release(len(batch))
        return result

    def shutdown(self) -> None:
        self._inner.shutdown()  # type: ignore[no-untyped-call]  # unannotated in the SDK

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self._inner.force_flush(timeout_millis)


class FindingExporter:
    """Emits finding records as ``gen_ai.evaluation.result`` OTLP log records; never blocks, never raises.

    At most ``max_queue_size`` records wait to be sent; beyond that new ones are dropped
    (outcome ``dropped``) rather than held, so a dead endpoint costs bounded memory.
    """

    def __init__(
        self,
        endpoint: str,
        headers: Mapping[str, str],
        timeout_seconds: float,
        *,
        only_flagged: bool = True,
        max_queue_size: int = DEFAULT_MAX_QUEUE_SIZE,
        schedule_delay_millis: float = DEFAULT_SCHEDULE_DELAY_MILLIS,
    ) -> None:
        if not endpoint:
            raise ValueError("endpoint: an OTLP/HTTP logs URL is required")
        if max_queue_size < 1:
            raise ValueError(f"max_queue_size must be at least 1, not {max_queue_size}")
        self._only_flagged = only_flagged
        self._timeout_seconds = timeout_seconds
        self._max_queue_size = max_queue_size
        self._pending = 0  # emitted, not yet through an export attempt
        self._lock = threading.Lock()
        exporter = OTLPLogExporter(endpoint=endpoint, headers=dict(headers), timeout=timeout_seconds)
        self._provider = LoggerProvider(resource=Resource.create({SERVICE_NAME: "halluwatch"}), shutdown_on_exit=False)
        self._provider.add_log_record_processor(
            BatchLogRecordProcessor(
                _CountingExporter(exporter, self._release),
                schedule_delay_millis=schedule_delay_millis,
                max_export_batch_size=min(_MAX_EXPORT_BATCH_SIZE, max_queue_size),
                max_queue_size=max_queue_size,
            )
        )
        self._logger = self._provider.get_logger("halluwatch")

    @classmethod
    def from_settings(cls, settings: Settings) -> FindingExporter | None:
        """The exporter the settings ask for, or None when ``findings_otlp_endpoint`` is empty (off)."""
        if not settings.findings_otlp_endpoint:
            return None
        return cls(
            settings.findings_otlp_endpoint,
            {name: value.get_secret_value() for name, value in settings.findings_otlp_headers.items()},
            settings.findings_otlp_timeout_seconds,
            only_flagged=settings.findings_otlp_only_flagged,
        )

    def emit(self, findings: Iterable[Finding]) -> None:
        """Queue the findings (only flagged ones if so configured) for sending; returns at once."""
        for finding in findings:
            if self._only_flagged and not finding.flagged:
                continue
            if not self._reserve():
                metrics.FINDINGS_EXPORTED.labels("dropped").inc()
                continue
            try:
                self._logger.emit(
                    timestamp=time.time_ns(),
                    context=_parent(finding),
                    severity_number=_severity(finding),
                    attributes=evaluation_attributes(finding),
                    event_name=EVALUATION_RESULT_EVENT,
                )
            except (TypeError, ValueError) as exc:  # a malformed id must not stop the batch
                self._release(1)
                metrics.FINDINGS_EXPORTED.labels("invalid").inc()
                trace_id = finding.trace_id
                logger.warning("finding of trace %s not exported: %r", trace_id, exc, extra={"trace_id": trace_id})

    def shutdown(self) -> None:
        """Send what is queued, waiting at most the export timeout; what is still unsent then is lost."""
        closer = threading.Thread(target=self._provider.shutdown, name="finding-export-shutdown", daemon=True)
        closer.start()
        closer.join(self._timeout_seconds)
        if closer.is_alive():
            logger.warning("findings export: %d findings not sent before shutdown", self._pending)

    def _reserve(self) -> bool:
        with self._lock:
            if self._pending >= self._max_queue_size:
                return False
            self._pending += 1
            return True

    def _release(self, count: int) -> None:
        with self._lock:
            self._pending -= count
