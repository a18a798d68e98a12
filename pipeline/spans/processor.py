"""The synchronous heart of the spans stage: Kafka messages in, rows and records out.

Pure CPU work with no I/O, so the worker runs it in its detector pool, off the event
loop.  Bad input never raises from here: each failure becomes a :class:`DeadLetter`
carrying the original bytes and the reason, and the rest of the batch goes on.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from detectors.base import DetectorResult
from detectors.config import DEFAULT_FLAG_PROBABILITY
from detectors.llm_call import LLMCall
from detectors.suite import DetectorSuite
from detectors.verdict import CallJudgement, VerdictModel, judge_call
from pipeline import metrics
from pipeline.config.content_policy import DEFAULT_LIMITS, STORE_ALL, ContentLimits
from pipeline.config.policy import DEFAULT_POLICY
from pipeline.config.policy_book import EffectivePolicy, PolicyBook
from pipeline.ingest.nested_calls import without_shadows
from pipeline.ingest.normalize import MalformedLLMSpan, normalize_span
from pipeline.ingest.otlp_traces import Encoding, UndecodableMessage, decode_traces, iter_spans, split_by_trace
from pipeline.ingest.trace_facts import Fact, attach_trace_facts, span_fact
from pipeline.rate.maps import AppMaps
from pipeline.sinks.finding import Finding
from pipeline.sinks.rows import finding_record
from pipeline.untrusted import valid_id_bytes

logger = logging.getLogger(__name__)

# A dead letter's headers stay small whatever the message: the produce headroom above
# max_message_bytes (pipeline/config/settings.py) must hold them.
MAX_REASON_BYTES = 2000
MAX_KEY_BYTES = 1024
LETTER_HEAD_BYTES = 64 * 1024  # what a letter keeps of a message too large to copy whole
# Room a letter's headers and record-batch framing take at most (the reason and key above, the
# source, sizes and digest): a value up to the produce limit less this is copied whole.
LETTER_HEADERS_BYTES = 16 * 1024


@dataclass(frozen=True, slots=True)
class InboundMessage:
    """A Kafka record as the processor needs it (the worker adapts faust events to this)."""

    key: bytes | None
    value: bytes
    topic: str = ""
    partition: int = -1
    offset: int = -1


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """An input message that could not be (fully) processed, and why."""

    message: InboundMessage
    reason_kind: str
    reason: str

    @property
    def key(self) -> bytes:
        """The letter's identity, ``topic/partition/offset`` of the message it carries.

        Delivery is at least once, so a message may be dead-lettered twice (a redelivery after
        a crash or rebalance); readers of the dead-letter topic deduplicate on this key.
        """
        return f"{self.message.topic}/{self.message.partition}/{self.message.offset}".encode()

    def headers(self) -> list[tuple[str, bytes]]:
        """Kafka headers telling an operator where the message came from, its own key, and what went wrong."""
        headers = [
            ("halluwatch.reason", self.reason.encode()[:MAX_REASON_BYTES]),
            ("halluwatch.reason_kind", self.reason_kind.encode()),
            ("halluwatch.source", self.key),
        ]
        if self.message.key:
            headers.append(("halluwatch.original_key", self.message.key[:MAX_KEY_BYTES]))
        return headers

    def fitted(self, max_value_bytes: int) -> tuple[bytes, list[tuple[str, bytes]]]:
        """The letter's value and headers, the value cut to its head when the whole would exceed ``max_value_bytes``.

        A message too large to take may be too large to produce again (a compressed batch
        under the broker's cap can decompress past it): its letter keeps the first
        :data:`LETTER_HEAD_BYTES`, with the size and SHA-256 of the whole, so the letter is
        always accepted and an operator can still find and match the original.
        """
        value, headers = self.message.value, self.headers()
        if len(value) <= max_value_bytes:
            return value, headers
        headers += [
            ("halluwatch.truncated", b"head"),
            ("halluwatch.original_size", str(len(value)).encode()),
            ("halluwatch.original_sha256", hashlib.sha256(value).hexdigest().encode()),
        ]
        return value[: min(LETTER_HEAD_BYTES, max_value_bytes)], headers


@dataclass(slots=True)
class BatchResult:
    """Everything one batch produced; nothing of it is durable yet."""

    spans: int = 0
    llm_calls: list[LLMCall] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    judgements: dict[tuple[str, str], CallJudgement] = field(default_factory=dict)  # by (trace id, span id)
    rekeyed: list[tuple[bytes, bytes]] = field(default_factory=list)
    dead_letters: list[DeadLetter] = field(default_factory=list)
    # Trace-level facts of the batch (pipeline/ingest/trace_facts.py), for calls in other messages,
    # and the traces whose root span was not in their message (more of them may come later).
    facts: list[Fact] = field(default_factory=list)
    incomplete_traces: set[str] = field(default_factory=set)

    def judgement_of(self, call: LLMCall) -> CallJudgement | None:
        """The call's judgement as a whole (None: not detected in this batch)."""
        return self.judgements.get((call.trace_id, call.span_id))


class SpanBatchProcessor:
    """Decode, select LLM spans, normalize, and run the span-level detectors on a batch."""

    def __init__(
        self,
        suite: DetectorSuite,
        thresholds_version: str,
        encoding: Encoding | None = None,
        max_message_bytes: int = 16 * 1024 * 1024,
        limits: ContentLimits = DEFAULT_LIMITS,
        policies: PolicyBook | None = None,
        verdict: VerdictModel | None = None,
        app_maps: AppMaps | None = None,
    ) -> None:
        if max_message_bytes < 1:
            raise ValueError(f"max_message_bytes must be positive, got {max_message_bytes}")
        self._suite = suite
        self._thresholds_version = thresholds_version
        self._encoding = encoding
        self._max_message_bytes = max_message_bytes
        self._limits = limits  # bounds the detectors' work per call, so per message
        self._policies = policies  # None: every call judged and stored as the suite and STORE_ALL say
        self._verdict = verdict  # None: no p_hallucination, a call is flagged by any detector
        self._app_maps = app_maps or AppMaps()  # applications' own maps of p, from their verdicts

    def process(self, messages: Sequence[InboundMessage]) -> BatchResult:
        """Normalize and detect a batch; never raises on input, whatever the bytes are."""
        result = self.normalize(messages)
        self.detect(result)
        return result

    def normalize(self, messages: Sequence[InboundMessage]) -> BatchResult:
        """Decode and normalize a batch, without detection (content may still be on its way in logs)."""
        result = BatchResult()
        metrics.BATCH_MESSAGES.observe(len(messages))
        for message in messages:
            try:
                self._process_message(message, result)
            except Exception as exc:  # a bug must not stop the stream; keep the evidence
                logger.exception("unexpected error processing %s/%s", message.topic, message.offset)
                self._dead_letter(result, message, "internal_error", f"{type(exc).__name__}: {exc}")
        return result

    def _process_message(self, message: InboundMessage, result: BatchResult) -> None:
        if len(message.value) > self._max_message_bytes:
            reason = f"message of {len(message.value)} bytes exceeds max_message_bytes={self._max_message_bytes}"
            self._dead_letter(result, message, "too_large", reason)
            return
        try:
            traces = decode_traces(message.value, self._encoding)
        except UndecodableMessage as exc:
            self._dead_letter(result, message, "undecodable", exc.reason)
            return
        if not message.key:  # null, or empty as Rotel's kafka exporter sends it: unkeyed either way
            per_trace = split_by_trace(traces)
            if len(per_trace) > 1:
                # Mixed traces: re-key before anything per-trace sees them (docs/architecture.md).
                result.rekeyed.extend(
                    (trace_id.encode(), payload.SerializeToString()) for trace_id, payload in per_trace.items()
                )
                metrics.REKEYED.inc(len(per_trace))
                return
        malformed = []
        invalid_ids = []
        spans = 0
        calls: list[LLMCall] = []
        facts: list[Fact] = []  # what retriever and tool spans beside the calls say
        traces_seen: set[str] = set()
        rooted: set[str] = set()
        for span_context in iter_spans(traces):
            spans += 1
            span = span_context.span
            if not valid_id_bytes(span.trace_id, span.span_id):
                # An all-zero id is shared by every producer that has none: it would merge unrelated traces.
                invalid_ids.append(f"span {span.span_id.hex()!r} of trace {span.trace_id.hex()!r}")
                continue
            traces_seen.add(span_context.trace_id)
            if not span.parent_span_id:
                rooted.add(span_context.trace_id)
            try:
                call = normalize_span(span_context)
            except MalformedLLMSpan as exc:
                malformed.append(f"span {span.span_id.hex()}: {exc}")
                continue
            if call is not None:
                calls.append(call)
            elif (fact := span_fact(span_context)) is not None:
                facts.append(fact)
        calls = without_shadows(calls)
        for call in calls:
            metrics.LLM_CALLS.labels(call.convention).inc()
        result.llm_calls += [self._limits.apply(call) for call in attach_trace_facts(calls, facts)]
        result.facts += facts
        result.incomplete_traces |= traces_seen - rooted
        result.spans += spans
        metrics.SPANS.inc(spans)
        if invalid_ids or malformed:
            # The good spans of the message were kept; the message goes to the DLQ for the rest.
            reasons = list(malformed)
            if invalid_ids:
                reasons.insert(0, f"invalid trace/span ids (empty, all zero or wrong length): {', '.join(invalid_ids)}")
            kind = "invalid_id" if invalid_ids else "malformed_span"
            self._dead_letter(result, message, kind, "; ".join(reasons))

    def detect_joined(self, calls: Sequence[LLMCall]) -> BatchResult:
        """Detect calls whose content the log join merged in (bounded like span content)."""
        result = BatchResult(llm_calls=[self._limits.apply(call) for call in calls])
        self.detect(result)
        return result

    def detect(self, result: BatchResult) -> None:
        """Run the detectors on the batch's LLM calls, adding their finding records.

        Each call is judged under its application's policy: the detectors it turns off do not
        run, its thresholds decide the flags, its list threshold whether the call is flagged,
        its content mode shapes the records.  The verdict model reads the detectors' scores
        against its own training thresholds, so a policy's thresholds never move the probability.
        """
        calls = result.llm_calls
        policies = [self._policies.for_call(call) for call in calls] if self._policies else []
        disabled = [policy.disabled_detectors for policy in policies] if policies else ()
        runs = self._suite.run(calls, disabled)
        for index, call in enumerate(calls):
            outcomes = [run.results[index] for run in runs]
            if policies:
                policy = policies[index]
                outcomes = [o.with_threshold(policy.thresholds.get(o.detector, o.threshold)) for o in outcomes]
                name, content = policy.name, policy.content.findings
                judgement = self._judge(outcomes, policy)
            else:
                name, content = DEFAULT_POLICY, STORE_ALL.findings
                judgement = judge_call(outcomes, self._verdict, DEFAULT_FLAG_PROBABILITY)
            result.judgements[(call.trace_id, call.span_id)] = judgement
            for outcome in outcomes:
                record = finding_record(call, outcome, self._thresholds_version, content, name, judgement.verdict)
                result.findings.append(record)
                metrics.count_finding(outcome)

    def _judge(self, outcomes: Sequence[DetectorResult], policy: EffectivePolicy) -> CallJudgement:
        """The call's judgement under its application's applied map, else its policy's map from the thresholds file."""
        applied = self._app_maps.of(policy.name)
        if applied is None:
            return judge_call(outcomes, self._verdict, policy.flag_probability, policy.recalibration)
        return judge_call(outcomes, self._verdict, policy.flag_probability, applied.calibration, applied.version)

    @staticmethod
    def _dead_letter(result: BatchResult, message: InboundMessage, kind: str, reason: str) -> None:
        result.dead_letters.append(DeadLetter(message, kind, reason))
