"""The consistency stage: sampled LLM calls in, ``self_consistency`` and ``claims`` findings out.

The spans stage asks :meth:`ConsistencyStage.sample` which of its calls to publish on
the consistency topic (high-risk, in the trace-hash share, budget permitting); this
stage's agent re-asks them through an OpenAI-compatible endpoint, off the hot path.  Its
findings are ordinary findings records: written to ClickHouse and published to the
findings topic, where the agreement stage combines them with the span detectors' (the
agreement window waits for them: they come seconds later).

Bounded everywhere: at most ``max_concurrency`` calls are judged at once, and the next
batch is taken only when the last is durable; while the budget's minute window is full,
the agent waits and sampling pauses, and once the day's tokens are spent sampling stops
and calls already on the topic get ``skipped`` findings — nothing queues in memory.
Offsets are committed only after the findings are written and acknowledged
(:func:`~pipeline.stream.plumbing.durable_batches`), so a crash re-judges a call (at the cost of
its requests) rather than losing it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import faust
from faust.types import Message, StreamT

from detectors.base import DetectorResult, DetectorStatus, SampledDetector
from detectors.build import build_sampled
from detectors.claims import DETECTOR as CLAIMS
from detectors.claims.detector import ClaimsDetector
from detectors.llm_call import LLMCall
from detectors.models.chat import USAGE_KEY
from detectors.models.embeddings import Embedder, Vectors
from detectors.settings import DetectorSettings
from detectors.suite import TURNED_OFF
from detectors.thresholds import Thresholds
from pipeline import metrics
from pipeline.config.content_policy import ContentPolicy
from pipeline.config.policy_book import PolicyBook
from pipeline.config.sampled import ConsistencySettings
from pipeline.config.stream import StreamSettings
from pipeline.judge.asking import Judge
from pipeline.judge.budget import JudgeBudget
from pipeline.judge.records import ESCALATION
from pipeline.sampled.llm_client import Budget, Limit, LLMClient
from pipeline.sampled.sampled_call import SampledCall
from pipeline.sampled.sampling import Sampler
from pipeline.sinks.finding import Finding, findings_messages
from pipeline.sinks.finding_sinks import FindingSinks
from pipeline.sinks.rows import finding_record, finding_row
from pipeline.stream.plumbing import (
    DeadLetterSender,
    RowStore,
    durable_batches,
    isolating_failures,
    publish,
    withholding,
)
from pipeline.untrusted import MalformedRecord

logger = logging.getLogger(__name__)


class ConsistencyStage:
    """Samples calls for the sampled detectors and registers the agent that judges them on ``app``.

    With ``consistency.enabled`` off it samples nothing and registers nothing.
    """

    def __init__(
        self,
        app: faust.App,
        stream: StreamSettings,
        config: ConsistencySettings,
        detectors: DetectorSettings,
        thresholds: Thresholds,
        policies: PolicyBook,
        consistency_topic: faust.TopicT,
        findings_topic: faust.TopicT,
        store: RowStore,
        dead_letter: DeadLetterSender,
        finding_sinks: FindingSinks | None = None,
        judge_budget: JudgeBudget | None = None,
    ) -> None:
        self._stream = stream
        self._config = config
        self._findings_topic = findings_topic
        self._policies = policies  # each call is sampled, judged and stored as its application's policy says
        self._content = stream.content.findings  # of endpoint errors in the log
        self._store = store
        self._finding_sinks = finding_sinks or FindingSinks()
        self._dead_letter = withholding(dead_letter, stream.content.llm_calls)
        self.sampler = Sampler(config.sample_rate, config.high_risk)
        self.budget = Budget(config.llm.max_requests_per_minute, config.llm.max_tokens_per_day)
        self.calls_judged = 0  # sampled and escalated calls whose findings this process made durable
        self.findings_published = 0
        self.detectors: list[SampledDetector] = []
        self.escalation_judge: Judge | None = None  # the judge of escalated calls, with escalation on
        self._judge_budget = judge_budget
        self._client: LLMClient | None = None
        self._embedder: Embedder | None = None
        if not config.enabled and judge_budget is None:
            return
        self._thresholds_version = thresholds.version
        self._client = LLMClient(config.llm)
        if judge_budget is not None:
            claims = ClaimsDetector(CLAIMS.config_in(config), thresholds.for_detector(CLAIMS.name), self._client)
            self.escalation_judge = Judge(claims)
        if config.enabled:
            # The grounding detector's model; one thread keeps embedding off the event loop.
            self._embedder = Embedder(detectors.embeddings)
            self._embedder.load()
            self._embed_pool = ThreadPoolExecutor(1, thread_name_prefix="consistency-embed")
            self.detectors = build_sampled(detectors, config, thresholds, self._client, self._embed)
        app.agent(consistency_topic, name="halluwatch.consistency")(self._consume)

    def sample(self, calls: Sequence[LLMCall]) -> list[tuple[bytes, bytes]]:
        """Records (key = trace id) for the consistency topic: the sampled calls the budget has room for."""
        if not self.detectors:
            return []
        records = []
        for call in calls:
            policy = self._policies.for_call(call)
            rule = self.sampler.rule_for(call, policy.sample_rate)
            if rule is None:
                continue
            refused = self.budget.refusal(self._config.requests_per_call, self._estimated_tokens(call))
            _report_budget(refused)
            if refused is not None:
                metrics.CONSISTENCY_SKIPPED.labels(str(refused)).inc()
                continue
            value = SampledCall(consistency_call(call, policy.content.llm_calls), rule, policy.name).to_json()
            if len(value) > self._config.max_call_bytes:
                metrics.CONSISTENCY_SKIPPED.labels("too_large").inc()
                continue
            metrics.CONSISTENCY_SAMPLED.labels(rule).inc()
            records.append((call.trace_id.encode(), value))
        return records

    async def close(self) -> None:
        """Close the endpoint's connections and the embedding thread."""
        if self._client is not None:
            await self._client.close()
        if self._embedder is not None:
            self._embed_pool.shutdown(wait=True)
            self._embedder.close()

    async def _consume(self, stream: StreamT[bytes]) -> None:
        s = self._stream
        async for events in durable_batches(stream, self._config.max_concurrency, s.batch_max_wait_seconds):
            messages = [event.message for event in events]
            await isolating_failures(messages, self._judge_batch, self._dead_letter, "consistency")

    async def _judge_batch(self, messages: Sequence[Message]) -> None:
        judged = await asyncio.gather(*(self._findings(message) for message in messages))
        records = [record for records in judged for record in records]
        now = datetime.now(UTC)
        await self._store({"findings": [finding_row(record, now) for record in records]})
        max_delay = self._stream.write_retry_max_seconds
        await asyncio.gather(
            *(publish(self._findings_topic, key, value, max_delay) for key, value in findings_messages(records))
        )
        self._finding_sinks.emit(records)
        self.findings_published += len(records)
        self.calls_judged += len(messages)
        metrics.CONSISTENCY_DONE.inc(len(messages))

    async def _findings(self, message: Message) -> list[Finding]:
        """The findings records of one sampled call (none for a message that is not one)."""
        try:
            sampled = SampledCall.from_json(message.value or b"")
        except MalformedRecord as exc:
            await self._dead_letter(message, "malformed_sampled_call", f"not a sampled call: {exc}")
            return []
        call, policy = sampled.call, self._policies.named(sampled.policy)
        if sampled.rule == ESCALATION:
            return await self._judged(sampled)
        records = []
        for result in await self.judge(call, policy.disabled_detectors):
            judged = result.with_threshold(policy.thresholds.get(result.detector, result.threshold))
            records.append(finding_record(call, judged, self._thresholds_version, policy.content.findings, policy.name))
            metrics.count_finding(judged)
        return records

    async def _judged(self, sampled: SampledCall) -> list[Finding]:
        """The judge's finding on an escalated call (a late or unusable answer is a judgment of "unknown")."""
        call, app, judge = sampled.call, sampled.policy, self.escalation_judge
        if judge is None or self._judge_budget is None:  # escalation since turned off: the deadline decides it
            return []
        answer = await judge.answer(call, (sampled.deadline or 0.0) - time.time())
        self._judge_budget.settle(app, judge.estimated_tokens(call), answer.tokens)
        metrics.JUDGE_ANSWERS.labels(app, str(answer.judgment)).inc()
        metrics.JUDGE_TOKENS.labels(app).inc(answer.tokens)
        metrics.JUDGE_SECONDS.observe(answer.seconds)
        content = self._policies.named(app).content.findings
        return [finding_record(call, answer.result, self._thresholds_version, content, app)]

    async def judge(self, call: LLMCall, turned_off: Collection[str] = frozenset()) -> list[DetectorResult]:
        """Every sampled detector's result on ``call``, within the budget (waiting while the minute is full).

        Detectors in ``turned_off`` (the call's policy) are not asked and record a skipped result.
        """
        requests, estimate = self._config.requests_per_call, self._estimated_tokens(call)
        while (refused := self.budget.reserve(requests, estimate)) is Limit.REQUESTS_PER_MINUTE:
            _report_budget(refused)
            await asyncio.sleep(self.budget.seconds_until_room(requests))
        _report_budget(refused)
        if refused is Limit.TOKENS_PER_DAY:
            metrics.CONSISTENCY_SKIPPED.labels(str(refused)).inc()
            spent = "daily token budget spent (consistency.llm.max_tokens_per_day)"
            return [detector.skipped_result(spent) for detector in self.detectors]
        results = await asyncio.gather(*(self._guarded(detector, call, turned_off) for detector in self.detectors))
        used = sum(_tokens_used(d, r, call) for d, r in zip(self.detectors, results, strict=True))
        self.budget.settle(estimate, used)
        return list(results)

    async def _guarded(self, detector: SampledDetector, call: LLMCall, turned_off: Collection[str]) -> DetectorResult:
        if detector.name in turned_off:
            return detector.skipped_result(TURNED_OFF)
        try:
            return await detector.evaluate(call)
        except Exception as exc:  # an endpoint failing for good (after retries) is an error finding
            error = self._content.reason(type(exc).__name__, str(exc))  # an endpoint's reply may quote the prompt
            logger.warning(
                "%s failed on trace %s: %s", detector.name, call.trace_id, error, extra={"trace_id": call.trace_id}
            )
            return detector.error_result(f"{type(exc).__name__}: {exc}")

    def _estimated_tokens(self, call: LLMCall) -> int:
        return sum(detector.estimated_tokens(call) for detector in self.detectors)

    async def _embed(self, texts: Sequence[str]) -> Vectors:
        if self._embedder is None:  # built only for the sampled detectors, the only ones that embed
            raise RuntimeError("no embedding model: the sampled detectors are off")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._embed_pool, self._embedder.encode, list(texts))


def consistency_call(call: LLMCall, content: ContentPolicy) -> LLMCall:
    """What of a sampled call travels on the consistency topic, under the ``llm_calls`` content mode.

    The sampled detectors ask the model the call's conversation again and judge its answer
    against its sources, so those travel as they came, whatever the mode (a deliberate
    exception: ``infra/README.md``, "Content on internal topics"). Unless the mode is
    ``store``, nothing they do not read goes with them: no logprobs (the answer's tokens),
    no further answer choices, and the attributes masked as ``llm_calls`` rows hold them.
    """
    if content.mode == "store":
        return call
    return dataclasses.replace(
        call,
        output_messages=call.output_messages[:1],
        logprobs=(),
        attributes={key: content.attribute(str(value)) for key, value in call.attributes.items()},
    )


def _tokens_used(detector: SampledDetector, result: DetectorResult, call: LLMCall) -> int:
    """What a result cost: its reported usage; the estimate when it failed midway (unknown); else none."""
    usage = result.evidence.get(USAGE_KEY)
    if isinstance(usage, dict):
        return int(usage.get("tokens", 0))
    return detector.estimated_tokens(call) if result.status is DetectorStatus.ERROR else 0


def _report_budget(refused: Limit | None) -> None:
    """Set the paused gauge: 1 for the limit in the way, 0 for the others."""
    for limit in Limit:
        metrics.CONSISTENCY_PAUSED.labels(str(limit)).set(1 if limit is refused else 0)
