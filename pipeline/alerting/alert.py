"""The alert record: what the agreement stage publishes and every destination renders.

It travels as JSON on ``halluwatch.alerts`` (key = trace id) and its retry topic, so it
carries everything a message needs; no destination reads ClickHouse to render one.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from pipeline.config.content_policy import ContentPolicy
from pipeline.config.policy import DEFAULT_POLICY
from pipeline.untrusted import MalformedRecord, decoded, field_of, json_document, valid_severity, valid_trace_id


class DeliveryStatus(StrEnum):
    """Where one alert stands with one destination."""

    DELIVERED = "delivered"
    DIGESTED = "digested"  # sent inside a digest message because the route hit its rate limit
    GROUPED = "grouped"  # delivered into an open rate-monitor incident instead of paging on its own
    RETRYING = "retrying"
    FAILED = "failed"  # out of attempts or refused for good: in the alerts dead-letter topic
    SILENCED = "silenced"  # matched an operator's silence: not sent, never sent later

    @property
    def final(self) -> bool:
        """Whether nothing more will be tried."""
        return self is not DeliveryStatus.RETRYING


@dataclass(frozen=True, slots=True)
class DetectorEvidence:
    """One agreeing detector's verdict, as it reached the agreement stage."""

    detector: str
    score: float
    threshold: float
    severity: int
    summary: str
    span_id: str = ""
    evidence: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {
            "detector": self.detector,
            "score": self.score,
            "threshold": self.threshold,
            "severity": self.severity,
            "summary": self.summary,
            "span_id": self.span_id,
            "evidence": dict(self.evidence),
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> DetectorEvidence:
        """Parse the JSON form."""
        return cls(
            detector=str(raw["detector"]),
            score=float(raw["score"]),
            threshold=float(raw["threshold"]),
            severity=valid_severity(raw["severity"]),
            summary=str(raw.get("summary", "")),
            span_id=str(raw.get("span_id", "")),
            evidence=dict(raw.get("evidence") or {}),
        )


@dataclass(frozen=True, slots=True)
class IncidentRef:
    """The open rate-monitor incident an alert is grouped into: its PagerDuty dedup key and Slack thread."""

    incident_id: str
    slack_channel: str = ""
    slack_ts: str = ""

    def to_dict(self) -> dict[str, str]:
        """JSON form."""
        return {"incident_id": self.incident_id, "slack_channel": self.slack_channel, "slack_ts": self.slack_ts}

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> IncidentRef:
        """Parse the JSON form."""
        return cls(str(raw["incident_id"]), str(raw.get("slack_channel", "")), str(raw.get("slack_ts", "")))


@dataclass(frozen=True, slots=True)
class Alert:
    """Two or more detectors agreed on one trace, and a rule chose the route."""

    trace_id: str
    rule: str
    route: str
    severity: int
    service: str
    model: str
    operation: str
    detectors: tuple[DetectorEvidence, ...]
    created_at: datetime
    policy: str = DEFAULT_POLICY  # the application policy whose rules fired it and chose its route
    p_hallucination: float | None = None  # the highest calibrated probability of the trace's calls
    # Set by the router when a rate monitor has an incident open for the alert's group.
    incident: IncidentRef | None = None

    @property
    def alert_id(self) -> str:
        """Identity of the alert: one per trace per rule."""
        return f"{self.trace_id}:{self.rule}"

    @property
    def dedup_key(self) -> str:
        """The PagerDuty dedup key: the alert's own, or its incident's when it is grouped into one."""
        return self.incident.incident_id if self.incident else self.alert_id

    @property
    def detector_names(self) -> list[str]:
        """Names of the agreeing detectors, in the order they are listed."""
        return [d.detector for d in self.detectors]

    @property
    def headline(self) -> str:
        """What was wrong, in one line."""
        where = " ".join(part for part in (self.service, self.operation) if part) or "unknown service"
        first = self.detectors[0].summary if self.detectors else ""
        agreeing = " + ".join(self.detector_names)
        return f"{agreeing} agree on {where}: {first}" if first else f"{agreeing} agree on {where}"

    def with_content(self, policy: ContentPolicy) -> Alert:
        """The alert with its agreeing detectors' summaries and evidence as ``policy``'s sink may hold them."""
        detectors = tuple(
            dataclasses.replace(d, summary=policy.summary(d.summary), evidence=policy.evidence(d.evidence))
            for d in self.detectors
        )
        return dataclasses.replace(self, detectors=detectors)

    def to_dict(self) -> dict[str, Any]:
        """JSON form (also nested inside retry records)."""
        return {
            "alert_id": self.alert_id,
            "trace_id": self.trace_id,
            "rule": self.rule,
            "route": self.route,
            "severity": self.severity,
            "service": self.service,
            "model": self.model,
            "operation": self.operation,
            "policy": self.policy,
            "p_hallucination": self.p_hallucination,
            "detectors": [d.to_dict() for d in self.detectors],
            "created_at": self.created_at.isoformat(),
            "incident": self.incident.to_dict() if self.incident else None,
        }

    @classmethod
    def from_dict(cls, raw: Any) -> Alert:
        """Parse the JSON form; raises :class:`~pipeline.untrusted.MalformedRecord` on a malformed one."""
        return decoded(lambda: cls._from_object(raw), "an alert record")

    @classmethod
    def _from_object(cls, raw: Any) -> Alert:
        return cls(
            trace_id=valid_trace_id(str(field_of(raw, "trace_id"))),
            rule=str(raw["rule"]),
            route=str(raw["route"]),
            severity=valid_severity(raw["severity"]),
            service=str(raw.get("service", "")),
            model=str(raw.get("model", "")),
            operation=str(raw.get("operation", "")),
            detectors=tuple(DetectorEvidence.from_dict(d) for d in raw["detectors"]),
            created_at=datetime.fromisoformat(raw["created_at"]),
            policy=str(raw.get("policy", DEFAULT_POLICY)),
            p_hallucination=None if raw.get("p_hallucination") is None else float(raw["p_hallucination"]),
            incident=IncidentRef.from_dict(raw["incident"]) if raw.get("incident") else None,
        )

    def to_json(self) -> bytes:
        """The Kafka value."""
        return json.dumps(self.to_dict(), ensure_ascii=False, default=str).encode()

    @classmethod
    def from_json(cls, value: bytes | str) -> Alert:
        """Parse a Kafka value; raises :class:`~pipeline.untrusted.MalformedRecord` on a malformed one."""
        return cls.from_dict(json_document(value))


WHAT_RETRY = "a retry record"
# A retry asked for further ahead than this is not one the router wrote (its longest back-off is minutes).
MAX_RETRY_AHEAD_SECONDS = 7 * 24 * 3600.0


@dataclass(frozen=True, slots=True)
class AlertRetry:
    """A record of the alerts retry topic: this attempt of the alert at the destination, not before ``not_before``."""

    alert: Alert
    destination: str
    attempt: int
    not_before: float  # time.time()
    error: str = ""  # what the last attempt met

    def to_json(self) -> bytes:
        """The Kafka value."""
        record = {"alert": self.alert.to_dict(), "destination": self.destination, "attempt": self.attempt,
                  "not_before": self.not_before, "error": self.error}  # fmt: skip
        return json.dumps(record, ensure_ascii=False, default=str).encode()

    @classmethod
    def from_json(cls, value: bytes, now: float) -> AlertRetry:
        """Parse a Kafka value; raises :class:`~pipeline.untrusted.MalformedRecord` on a malformed one.

        A retry due more than :data:`MAX_RETRY_AHEAD_SECONDS` after ``now`` is malformed: the
        retry agent holds its topic until the earliest retry is due.
        """
        record = json_document(value)
        alert = Alert.from_dict(field_of(record, "alert"))
        destination, attempt, not_before = (field_of(record, name) for name in ("destination", "attempt", "not_before"))
        error = record.get("error", "")
        retry = decoded(lambda: cls(alert, str(destination), int(attempt), float(not_before), str(error)), WHAT_RETRY)
        if retry.not_before > now + MAX_RETRY_AHEAD_SECONDS:
            raise MalformedRecord(f"not {WHAT_RETRY}: due {retry.not_before - now:.0f}s from now")
        return retry
