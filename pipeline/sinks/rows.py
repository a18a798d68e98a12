"""Turning LLM calls and detector results into ClickHouse rows and Kafka records.

Row identity is the record's natural key (trace, span, detector), never a random id or
the ingest time, so a replayed message produces the very same key again.  Content goes
through the table's :class:`~pipeline.config.content_policy.ContentPolicy` here, before any sink sees it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterable
from datetime import UTC, datetime
from typing import Any

from detectors.base import DetectorResult
from detectors.llm_call import LLMCall, TokenLogprob
from detectors.verdict import CallJudgement, CallVerdict
from pipeline.config.content_policy import ContentPolicy
from pipeline.config.policy import DEFAULT_POLICY
from pipeline.ingest.trace_facts import MAX_TOOL_VALUE_CHARS, Fact, ToolExecution
from pipeline.sinks.finding import Finding
from pipeline.sinks.transcript import transcript_json

LLM_CALL_COLUMNS = [
    "trace_id", "span_id", "parent_span_id", "service", "span_name", "convention", "provider",
    "model", "operation", "start_time", "end_time", "duration_ms", "input_tokens", "output_tokens",
    "finish_reason", "input_messages", "output_messages", "tool_calls", "tool_definitions", "sources",
    "sources_from", "logprob_tokens", "content_mode", "content_source", "prompt", "answer", "grounding",
    "transcript", "logprobs_json", "attributes", "erasable", "p_hallucination", "verdict_version", "flagged",
    "ingested_at", "calibration_version",
]  # fmt: skip

FINDING_COLUMNS = [
    "trace_id", "span_id", "service", "model", "operation", "policy", "detector", "detector_version",
    "thresholds_version", "status", "score", "threshold", "flagged", "severity", "summary",
    "evidence", "span_start_time", "created_at",
]  # fmt: skip

ALERT_COLUMNS = [
    "alert_id", "trace_id", "rule", "route", "destination", "service", "model", "operation", "policy", "severity",
    "detectors", "summary", "evidence", "status", "attempts", "error", "state_version", "created_at", "updated_at",
]  # fmt: skip

TOOL_RUN_COLUMNS = [
    "trace_id", "span_id", "name", "call_id", "arguments", "result", "failed", "error", "end_time", "content_mode",
    "ingested_at",
]  # fmt: skip

INCIDENT_COLUMNS = [
    "incident_id", "monitor", "route", "group_by", "group_values", "status", "opened_at", "updated_at",
    "resolved_at", "rate", "baseline_rate", "calls", "flagged", "slack_channel", "slack_ts",
    "pagerduty_dedup_key", "delivered", "version",
]  # fmt: skip

TABLE_COLUMNS = {
    "llm_calls": LLM_CALL_COLUMNS,
    "findings": FINDING_COLUMNS,
    "alerts": ALERT_COLUMNS,
    "tool_runs": TOOL_RUN_COLUMNS,
    "incidents": INCIDENT_COLUMNS,  # rows built by pipeline.monitors.store.incident_row
}


# Columns before ``evidence`` are the record's fields of the same name, as they are.
_COLUMNS_COPIED_FROM_RECORD = FINDING_COLUMNS[: FINDING_COLUMNS.index("evidence")]


def from_unix_nano(nanos: int) -> datetime:
    """A UTC datetime from OTLP's nanoseconds since the epoch."""
    return datetime.fromtimestamp(nanos / 1e9, tz=UTC)


def llm_call_row(
    call: LLMCall,
    content: ContentPolicy,
    now: datetime,
    judgement: CallJudgement | None = None,
    erasable_keys: Collection[str] = (),
) -> list[Any]:
    """One ``llm_calls`` row, in ``LLM_CALL_COLUMNS`` order, its content as ``content`` allows.

    ``judgement`` is the call's as a whole (None: not judged yet, e.g. no detector ran).  The
    attributes named in ``erasable_keys`` are kept as given in ``erasable``, for erasure to find.
    """
    verdict = judgement.verdict if judgement else None
    return [
        call.trace_id,
        call.span_id,
        call.parent_span_id or "",
        call.service,
        call.span_name,
        call.convention,
        call.provider,
        call.model,
        call.operation,
        from_unix_nano(call.start_time_unix_nano),
        from_unix_nano(call.end_time_unix_nano),
        max(call.end_time_unix_nano - call.start_time_unix_nano, 0) / 1e6,
        call.usage.input_tokens,
        call.usage.output_tokens,
        call.finish_reason or "",
        len(call.input_messages),
        len(call.output_messages),
        len(call.output_tool_calls),
        len(call.tool_definitions),
        len(call.sources),
        call.sources_from,
        len(call.logprobs),
        content.mode,
        str(call.content_source),
        content.text(call.prompt),
        content.text(call.answer),
        content.text(call.grounding_text),
        transcript_json(call, content),
        _logprobs_json(call, with_tokens=content.mode == "store"),
        {key: content.attribute(str(value)) for key, value in call.attributes.items()},
        {key: str(call.attributes[key]) for key in erasable_keys if key in call.attributes},
        verdict.probability if verdict else None,
        verdict.model_version if verdict else "",
        bool(judgement and judgement.flagged),
        now,
        verdict.map_version if verdict else "",
    ]


def tool_run_rows(facts: Iterable[Fact], content: ContentPolicy, now: datetime) -> list[list[Any]]:
    """The ``tool_runs`` rows of ``facts``' tool executions, their arguments, result and error as ``content`` allows.

    Tool runs belong to no one call, so to no application's policy: the configured content mode applies.
    """
    return [
        [
            run.trace_id, run.tool.span_id, run.tool.name, run.tool.call_id or "", content.text(run.arguments),
            content.text(run.result[:MAX_TOOL_VALUE_CHARS]), run.tool.failed, content.text(run.tool.error),
            from_unix_nano(run.tool.end_time_unix_nano), content.mode, now,
        ]
        for run in facts
        if isinstance(run, ToolExecution)
    ]  # fmt: skip


def finding_record(
    call: LLMCall,
    result: DetectorResult,
    thresholds_version: str,
    content: ContentPolicy,
    policy: str = DEFAULT_POLICY,
    verdict: CallVerdict | None = None,
) -> Finding:
    """The finding as written to ClickHouse and published on ``halluwatch.findings`` (JSON, key = trace id).

    Its summary and evidence are as ``content`` allows; a call cut to the content cap
    says which fields were cut in ``evidence["truncated"]``.  It carries its call's
    ``p_hallucination`` (None: nothing checked the call) for the agreement stage and the trace UI.
    """
    evidence = {**result.evidence, "truncated": list(call.truncated)} if call.truncated else result.evidence
    return Finding(
        trace_id=call.trace_id,
        span_id=call.span_id,
        service=call.service,
        model=call.model,
        operation=call.operation,
        policy=policy,
        detector=result.detector,
        detector_version=result.detector_version,
        thresholds_version=thresholds_version,
        status=str(result.status),
        score=result.score,
        threshold=result.threshold,
        flagged=result.flagged,
        severity=result.severity,
        summary=content.summary(result.summary),
        evidence=content.evidence(evidence),
        span_start_time_unix_nano=call.start_time_unix_nano,
        p_hallucination=verdict.probability if verdict else None,
        verdict_version=verdict.model_version if verdict else "",
    )


def finding_row(finding: Finding, now: datetime) -> list[Any]:
    """One ``findings`` row, in ``FINDING_COLUMNS`` order."""
    return [
        *(getattr(finding, column) for column in _COLUMNS_COPIED_FROM_RECORD),
        json.dumps(finding.evidence, ensure_ascii=False, default=str),
        from_unix_nano(finding.span_start_time_unix_nano),
        now,
    ]


def _logprobs_json(call: LLMCall, *, with_tokens: bool) -> str:
    """Logprobs in the seed's ``tokens_json`` shape.

    Tokens are content, kept only in ``store`` mode; the numbers are not, and baselines
    (``halluwatch baseline --from-clickhouse``) need nothing else.
    """
    if not call.logprobs:
        return ""
    positions = []
    for t in call.logprobs:
        name = _as_is if with_tokens else _placeholders(t)
        top = [{"token": name(a.token), "logprob": a.logprob} for a in t.top]
        positions.append({"token": name(t.token), "logprob": t.logprob, "top_logprobs": top})
    return json.dumps(positions, ensure_ascii=False)


def _as_is(token: str) -> str:
    return token


def _placeholders(position: TokenLogprob) -> Callable[[str], str]:
    """Stand-ins for a position's tokens: equal tokens stay equal and different ones apart, as the entropy needs."""
    names: dict[str, str] = {}
    for alternative in position.top:
        names.setdefault(alternative.token, f"#{len(names)}")
    return lambda token: names.get(token, "#sampled")
