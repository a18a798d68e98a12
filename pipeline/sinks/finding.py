"""The findings record: one detector's result on one LLM call, as the stages after the detectors pass it on.

Built once (:func:`pipeline.sinks.rows.finding_record`, content already shaped by the findings
mode), then turned into its forms only at the edges: a ClickHouse row
(:func:`pipeline.sinks.rows.finding_row`), a record of a ``halluwatch.findings`` message
(:func:`findings_messages`), an OTLP event (:mod:`pipeline.sinks.findings_otlp`).  The agreement
stage reads the topic back with :func:`findings_in_message`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from pipeline.config.policy import DEFAULT_POLICY
from pipeline.untrusted import decoded, field_of, json_document, valid_severity, valid_trace_id


@dataclass(frozen=True, slots=True)
class Finding:
    """One finding; its fields, in this order, are the keys of its JSON form."""

    trace_id: str
    span_id: str
    service: str
    model: str
    operation: str
    policy: str
    detector: str
    detector_version: str
    thresholds_version: str
    status: str  # a DetectorStatus value: ok, skipped, error
    score: float
    threshold: float
    flagged: bool
    severity: int
    summary: str
    evidence: Mapping[str, Any]
    span_start_time_unix_nano: int
    p_hallucination: float | None  # the call's, the same on each of its findings; None: nothing checked the call
    verdict_version: str

    def to_json(self) -> dict[str, Any]:
        """The record as the findings topic carries it (serialize with ``json.dumps``)."""
        return {name: getattr(self, name) for name in _FIELD_NAMES}

    @classmethod
    def from_json(cls, raw: Any) -> Finding:
        """A record read back from the findings topic.

        Untrusted: a record that is not an object, has no valid trace id, or has numbers that
        are not numbers (or out of range), or a field of another type raises
        :class:`~pipeline.untrusted.MalformedRecord`; other missing fields read as empty, and a
        probability outside [0, 1] as none.
        """
        return decoded(lambda: cls._from_object(raw), "a findings record")

    @classmethod
    def _from_object(cls, raw: Any) -> Finding:
        evidence = raw.get("evidence")
        return cls(
            trace_id=valid_trace_id(str(field_of(raw, "trace_id"))),
            span_id=str(raw.get("span_id", "")),
            service=str(raw.get("service", "")),
            model=str(raw.get("model", "")),
            operation=str(raw.get("operation", "")),
            policy=str(raw.get("policy", DEFAULT_POLICY)),
            detector=str(raw.get("detector", "")),
            detector_version=str(raw.get("detector_version", "")),
            thresholds_version=str(raw.get("thresholds_version", "")),
            status=str(raw.get("status", "")),
            score=float(raw.get("score") or 0.0),
            threshold=float(raw.get("threshold") or 0.0),
            flagged=raw.get("flagged") is True,
            severity=valid_severity(raw.get("severity") or 0),
            summary=str(raw.get("summary", "")),
            evidence=evidence if isinstance(evidence, Mapping) else {},
            span_start_time_unix_nano=int(raw.get("span_start_time_unix_nano") or 0),
            p_hallucination=as_probability(raw.get("p_hallucination")),
            verdict_version=str(raw.get("verdict_version", "")),
        )


_FIELD_NAMES = tuple(f.name for f in fields(Finding))

# A findings message holds the records of one trace from one batch, not one record: the
# worker's event loop spent more on each Kafka message (send, fetch, stream bookkeeping) than
# on its JSON, and a call has a record per detector.  A trace with many calls in one batch
# takes several messages, each far under the producer's request limit.
MAX_MESSAGE_BYTES = 256 * 1024


def findings_messages(findings: Iterable[Finding]) -> list[tuple[bytes, bytes]]:
    """``findings`` as findings-topic messages: key = trace id, value = a JSON array of its records, in order."""
    by_trace: dict[str, list[bytes]] = {}
    for finding in findings:
        record = json.dumps(finding.to_json(), ensure_ascii=False, default=str).encode()
        by_trace.setdefault(finding.trace_id, []).append(record)
    return [(trace_id.encode(), b"[" + b",".join(chunk) + b"]")
            for trace_id, records in by_trace.items() for chunk in _chunks(records)]  # fmt: skip


def _chunks(records: list[bytes]) -> Iterable[list[bytes]]:
    """``records`` in order, cut into runs of at most MAX_MESSAGE_BYTES (a bigger record alone)."""
    chunk: list[bytes] = []
    size = 1  # the message's length so far: "[", then each record and the "," or "]" after it
    for record in records:
        if chunk and size + len(record) + 1 > MAX_MESSAGE_BYTES:
            yield chunk
            chunk, size = [], 1
        chunk.append(record)
        size += len(record) + 1
    yield chunk


def findings_in_message(value: bytes) -> list[Finding]:
    """The records of one findings-topic message: a JSON array of records, or one record object.

    One object per message is what workers before the arrays wrote; both are read, so records
    still on the topic after an upgrade count.  Untrusted: a message that is not strict JSON,
    or any record :meth:`Finding.from_json` refuses, raises
    :class:`~pipeline.untrusted.MalformedRecord`, and none of its records is returned.
    """
    document = json_document(value)
    return [Finding.from_json(record) for record in (document if isinstance(document, list) else [document])]


def as_probability(value: Any) -> float | None:
    """A probability read from JSON, or None when there is none (or nothing usable)."""
    return float(value) if isinstance(value, int | float) and 0.0 <= value <= 1.0 else None
