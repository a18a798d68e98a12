"""What the triage pages read from ClickHouse, and what they write: verdicts, and PagerDuty's word on alerts.

Reads need only read-only credentials.  The list is of flagged *calls*: ``llm_calls.flagged``
(the call's p_hallucination reached its policy's list threshold, or a detector reporting a
fact flagged it), with the detectors that flagged it read for the listed page only.  Lists
group raw rows by call rather than reading ``FINAL``: a replayed row is a duplicate until a
merge, and grouping folds it away at a fraction of FINAL's cost on a large table.  The trace
page reads its few rows with ``FINAL`` (exact, and cheap with the trace-id skip indexes).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from clickhouse_connect.driver.client import Client

from pipeline.sinks.alert_lifecycle import IncidentChange, Recorded, record_incident_change
from pipeline.sinks.labels import Label, insert_labels

# A column of each table the pages read that only its latest migration adds.
_NEEDED = {
    "llm_calls": "transcript", "findings": "evidence", "alerts": "resolved_by", "labels": "elsewhere",
    "review_skips": "reviewer", "tool_runs": "result",
}  # fmt: skip
ORDERS = ("newest", "probability")


@dataclass(frozen=True, slots=True)
class ListFilters:
    """The list page's filters; empty ones do not filter."""

    service: str = ""
    operation: str = ""
    detector: str = ""
    rule: str = ""
    since: datetime | None = None
    until: datetime | None = None
    alerted_only: bool = False
    min_probability: float | None = None
    order: str = "newest"  # or "probability": most likely hallucinated first
    trace: str = ""  # a trace id or its first characters (lower-case hex)


@dataclass(frozen=True, slots=True)
class VerdictCount:
    """The standing verdicts on one call: how many people said hallucination, how many false alarm."""

    hallucination: int = 0
    false_alarm: int = 0


@dataclass(frozen=True, slots=True)
class FlaggedCall:
    """One flagged call, for the list: its probability and the detectors that moved it."""

    trace_id: str
    span_id: str
    service: str
    operation: str
    model: str
    started: datetime
    p_hallucination: float | None
    detectors: tuple[str, ...]  # those that flagged it
    summary: str  # the most severe flag's
    rules: tuple[str, ...]  # alerts of its trace (one per rule)
    verdicts: VerdictCount


@dataclass(frozen=True, slots=True)
class FindingView:
    """One detector's result on one call."""

    detector: str
    status: str
    score: float
    threshold: float
    flagged: bool
    severity: int
    summary: str
    evidence: dict[str, Any]


@dataclass(frozen=True, slots=True)
class CallView:
    """One LLM call of a trace with its stored text and every detector's finding."""

    trace_id: str
    span_id: str
    service: str
    operation: str
    model: str
    started: datetime
    content_mode: str
    sources_from: str
    prompt: str
    grounding: str
    answer: str
    findings: tuple[FindingView, ...] = ()
    p_hallucination: float | None = None
    flagged: bool = False  # as a call: its probability reached its policy's list threshold, or a fact
    transcript: str = ""  # what it was given and did, as JSON (pipeline/sinks/transcript.py); "" when not stored
    span_name: str = ""
    attributes: Mapping[str, str] = field(default_factory=dict)  # its span attributes, as its content mode stores them


@dataclass(frozen=True, slots=True)
class ToolRunView:
    """A tool execution span of the trace: the run of a tool call, with what it returned or its error."""

    span_id: str
    name: str
    call_id: str
    arguments: str
    result: str
    failed: bool
    error: str
    ended: datetime


@dataclass(frozen=True, slots=True)
class AlertView:
    """One alert of the trace to one destination, as it stands now."""

    rule: str
    route: str
    destination: str
    severity: int
    detectors: tuple[str, ...]
    summary: str
    status: str
    attempts: int
    error: str
    created: datetime
    updated: datetime
    incident_status: str = ""  # PagerDuty's: triggered, acknowledged, resolved ("" when it said nothing)
    incident_url: str = ""
    incident_by: str = ""  # who acknowledged or resolved it
    incident_changed: datetime | None = None


@dataclass(frozen=True, slots=True)
class LabelView:
    """One person's current verdict of one kind on one call, or the verdict they withdrew."""

    span_id: str
    hallucinated: bool
    detector: str  # the finding it was given on ("": the whole call)
    labeller: str
    labelled_at: datetime
    note: str
    source: str
    withdrawn: bool = False
    elsewhere: bool = True  # given outside the audit sample (false: the review queue's or a digest's verdict)


@dataclass(frozen=True, slots=True)
class TraceView:
    """Everything the trace page shows."""

    trace_id: str
    calls: tuple[CallView, ...]
    alerts: tuple[AlertView, ...] = ()
    labels: tuple[LabelView, ...] = ()
    tool_runs: tuple[ToolRunView, ...] = ()

    @property
    def found(self) -> bool:
        """Whether ClickHouse holds anything of this trace."""
        return bool(self.calls or self.alerts or self.labels)


class TriageStore:
    """Queries of one ClickHouse database for the triage pages."""

    def __init__(self, client: Client, database: str) -> None:
        self._client = client
        self._db = database

    @property
    def client(self) -> Client:
        """The ClickHouse session the pages share (the review queue reads through it too)."""
        return self._client

    @property
    def database(self) -> str:
        """The database the pages read."""
        return self._db

    def flagged_calls(self, filters: ListFilters, limit: int, offset: int = 0) -> list[FlaggedCall]:
        """Flagged calls matching ``filters`` in ``filters.order``: ``limit`` of them from ``offset``."""
        where, having, params = self._conditions(filters)
        order = "p DESC, started DESC" if filters.order == "probability" else "started DESC"
        calls = self._rows(
            f"""
            SELECT trace_id, span_id, any(service), any(operation), any(model), max(start_time) AS started,
                   max(p_hallucination) AS p
            FROM {self._db}.llm_calls
            WHERE {" AND ".join(where)}
            GROUP BY trace_id, span_id
            HAVING {" AND ".join(having)}
            ORDER BY {order}, trace_id, span_id
            LIMIT {{limit:UInt32}} OFFSET {{offset:UInt32}}
            """,  # noqa: S608 - identifiers validated, values bound, order from ORDERS
            {**params, "limit": limit, "offset": offset},
        )
        flags = self._flags_of(calls)
        traces = sorted({row[0] for row in calls})
        rules = self._rules_of(traces)
        verdicts = self._verdicts_of(traces)
        return [
            _flagged_call(row, flags.get((row[0], row[1]), ((), "")), rules.get(row[0], ()),
                          verdicts.get((row[0], row[1]), VerdictCount()))
            for row in calls
        ]  # fmt: skip

    def _flags_of(self, calls: Sequence[Sequence[Any]]) -> dict[tuple[str, str], tuple[tuple[str, ...], str]]:
        """The listed calls' flagging detectors and most severe summary (read for the page only)."""
        if not calls:
            return {}
        rows = self._rows(
            f"""
            SELECT trace_id, span_id, arraySort(groupUniqArray(detector)), argMax(summary, severity)
            FROM {self._db}.findings
            WHERE flagged AND trace_id IN {{traces:Array(String)}} AND span_id IN {{spans:Array(String)}}
            GROUP BY trace_id, span_id
            """,  # noqa: S608 - identifiers validated, values bound
            {"traces": sorted({c[0] for c in calls}), "spans": sorted({c[1] for c in calls})},
        )
        return {(trace, span): (tuple(detectors), summary) for trace, span, detectors, summary in rows}

    def choices(self) -> dict[str, list[str]]:
        """The values each filter can take: services, operations, detectors, rules seen (empty ones filter nothing)."""
        columns = {"service": "findings", "operation": "findings", "detector": "findings", "rule": "alerts"}
        return {column: self._distinct(column, table) for column, table in columns.items()}

    def trace(self, trace_id: str) -> TraceView:
        """The calls, findings, alerts and labels of one trace."""
        params = {"trace": trace_id}
        findings: dict[str, list[FindingView]] = {}
        for span, *values in self._rows(
            f"""
            SELECT span_id, detector, status, score, threshold, flagged, severity, summary, evidence
            FROM {self._db}.findings FINAL WHERE trace_id = {{trace:String}}
            ORDER BY flagged DESC, severity DESC, detector
            """,  # noqa: S608 - identifiers validated, values bound
            params,
        ):
            detector, status, score, threshold, flagged, severity, summary, evidence = values
            finding = FindingView(
                detector, status, float(score), float(threshold), bool(flagged), int(severity), summary,
                _json_object(evidence),
            )  # fmt: skip
            findings.setdefault(span, []).append(finding)
        calls = [
            _stored_call(trace_id, span, values, findings.pop(span, ()))
            for span, *values in self._rows(
                f"""
                SELECT span_id, service, operation, model, start_time, content_mode, sources_from,
                       prompt, grounding, answer, p_hallucination, flagged, transcript, span_name, attributes
                FROM {self._db}.llm_calls FINAL WHERE trace_id = {{trace:String}}
                ORDER BY start_time, span_id
                """,  # noqa: S608 - identifiers validated, values bound
                params,
            )
        ]
        # Findings whose call row is not (yet) stored still show, without text.
        calls += [_textless_call(trace_id, span, found) for span, found in findings.items()]
        alerts = [
            AlertView(rule, route, destination, int(severity), tuple(detectors), *rest)
            for rule, route, destination, severity, detectors, *rest in self._rows(
                f"""
                SELECT rule, route, destination, severity, detectors, summary, status, attempts, error,
                       created_at, updated_at, incident_status, incident_url,
                       if(incident_status = 'resolved', resolved_by, acknowledged_by), incident_changed_at
                FROM {self._db}.alerts FINAL WHERE trace_id = {{trace:String}}
                ORDER BY created_at, rule, destination
                """,  # noqa: S608 - identifiers validated, values bound
                params,
            )
        ]
        labels = [
            LabelView(span, bool(label), *rest)
            for span, label, *rest in self._rows(
                f"""
                SELECT span_id, label, detector, labeller, labelled_at, note, source, withdrawn, elsewhere
                FROM {self._db}.labels FINAL WHERE trace_id = {{trace:String}}
                ORDER BY labelled_at DESC
                """,  # noqa: S608 - identifiers validated, values bound
                params,
            )
        ]
        tool_runs = [
            ToolRunView(span, name, call_id, arguments, result, bool(failed), error, ended)
            for span, name, call_id, arguments, result, failed, error, ended in self._rows(
                f"""
                SELECT span_id, name, call_id, arguments, result, failed, error, end_time
                FROM {self._db}.tool_runs FINAL WHERE trace_id = {{trace:String}}
                ORDER BY end_time, span_id
                """,  # noqa: S608 - identifiers validated, values bound
                params,
            )
        ]
        return TraceView(trace_id, tuple(calls), tuple(alerts), tuple(labels), tuple(tool_runs))

    def schema_gaps(self) -> list[str]:
        """What the pages need that the database lacks (tables, or the labels' detector column)."""
        rows = self._rows(
            "SELECT table, name FROM system.columns WHERE database = {db:String} AND table IN {tables:Array(String)}",
            {"db": self._db, "tables": list(_NEEDED)},
        )
        present = {(table, column) for table, column in rows}
        return [f"{table}.{column}" for table, column in _NEEDED.items() if (table, column) not in present]

    def current_label(self, trace_id: str, span_id: str, labeller: str, *, elsewhere: bool) -> Label | None:
        """``labeller``'s standing verdict of one kind on one call (``elsewhere``, or the audit sample's).

        None when they gave none of that kind or withdrew it.
        """
        rows = self._rows(
            f"""
            SELECT label, labelled_at, note, detector, inclusion_probability, stratum, blind
            FROM {self._db}.labels FINAL
            WHERE trace_id = {{trace:String}} AND span_id = {{span:String}} AND labeller = {{labeller:String}}
              AND elsewhere = {{elsewhere:Bool}} AND NOT withdrawn
            """,  # noqa: S608 - identifiers validated, values bound
            {"trace": trace_id, "span": span_id, "labeller": labeller, "elsewhere": elsewhere},
        )
        return next(
            (
                Label(trace_id, span_id, bool(label), labeller, at, note, detector,
                      inclusion_probability=float(p), stratum=stratum, blind=bool(blind))
                for label, at, note, detector, p, stratum, blind in rows
            ),
            None,
        )  # fmt: skip

    def add_label(self, label: Label, source: str) -> None:
        """Store one verdict (``source``: ``ui``, ``review`` or ``slack``)."""
        insert_labels(self._client, self._db, [label], source)

    def record_incident_change(self, change: IncidentChange) -> Recorded:
        """Store PagerDuty's word that an alert's incident was acknowledged, resolved or re-opened."""
        return record_incident_change(self._client, self._db, change)

    def _conditions(self, filters: ListFilters) -> tuple[list[str], list[str], dict[str, Any]]:
        """WHERE and HAVING conditions of the list query over ``llm_calls``, and their parameters."""
        if filters.order not in ORDERS:
            raise ValueError(f"order must be one of {', '.join(ORDERS)}, not {filters.order!r}")
        where = ["1"]
        having = ["max(flagged)"]
        params: dict[str, Any] = {}
        for column in ("service", "operation"):
            if value := getattr(filters, column):
                where.append(f"{column} = {{{column}:String}}")
                params[column] = value
        if filters.trace:
            where.append("startsWith(trace_id, {trace:String})")
            params["trace"] = filters.trace
        if filters.since is not None:
            where.append("start_time >= {since:DateTime64(6, 'UTC')}")
            params["since"] = filters.since
        if filters.until is not None:
            where.append("start_time < {until:DateTime64(6, 'UTC')}")
            params["until"] = filters.until
        if filters.rule or filters.alerted_only:
            rule = "WHERE rule = {rule:String}" if filters.rule else ""
            where.append(f"trace_id IN (SELECT trace_id FROM {self._db}.alerts {rule})")  # noqa: S608 - identifiers validated, values bound
            params |= {"rule": filters.rule} if filters.rule else {}
        if filters.detector:
            where.append(
                f"(trace_id, span_id) IN (SELECT trace_id, span_id FROM {self._db}.findings "  # noqa: S608 - identifiers validated, values bound
                "WHERE flagged AND detector = {detector:String})"
            )
            params["detector"] = filters.detector
        if filters.min_probability is not None:
            having.append("p >= {min_probability:Float64}")
            params["min_probability"] = filters.min_probability
        return where, having, params

    def _rules_of(self, trace_ids: Sequence[str]) -> dict[str, tuple[str, ...]]:
        if not trace_ids:
            return {}
        rows = self._rows(
            f"""
            SELECT trace_id, arraySort(groupUniqArray(rule)) FROM {self._db}.alerts
            WHERE trace_id IN {{traces:Array(String)}} GROUP BY trace_id
            """,  # noqa: S608 - identifiers validated, values bound
            {"traces": list(trace_ids)},
        )
        return {trace: tuple(rules) for trace, rules in rows}

    def _verdicts_of(self, trace_ids: Sequence[str]) -> dict[tuple[str, str], VerdictCount]:
        if not trace_ids:
            return {}
        rows = self._rows(
            f"""
            SELECT trace_id, span_id, countIf(verdict), countIf(NOT verdict)
            FROM
            (
                -- each person once: their newest verdict, given in the review queue or elsewhere
                SELECT trace_id, span_id, labeller, argMax(label, labelled_at) AS verdict FROM {self._db}.labels FINAL
                WHERE trace_id IN {{traces:Array(String)}} AND NOT withdrawn GROUP BY trace_id, span_id, labeller
            )
            GROUP BY trace_id, span_id
            """,  # noqa: S608 - identifiers validated, values bound
            {"traces": list(trace_ids)},
        )
        return {(trace, span): VerdictCount(int(yes), int(no)) for trace, span, yes, no in rows}

    def _distinct(self, column: str, table: str) -> list[str]:
        sql = f"SELECT DISTINCT {column} FROM {self._db}.{table} WHERE {column} != '' ORDER BY 1"  # noqa: S608 - identifiers fixed
        return [row[0] for row in self._rows(sql)]

    def _rows(self, sql: str, params: dict[str, Any] | None = None) -> list[tuple[Any, ...]]:
        return [tuple(row) for row in self._client.query(sql, parameters=params or {}).result_rows]


def _json_object(text: str) -> dict[str, Any]:
    """Stored evidence as a dict (empty when it is not a JSON object: e.g. withheld)."""
    try:
        value = json.loads(text) if text else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _flagged_call(
    row: Sequence[Any], flags: tuple[tuple[str, ...], str], rules: tuple[str, ...], verdicts: VerdictCount
) -> FlaggedCall:
    trace_id, span_id, service, operation, model, started, p = row
    detectors, summary = flags
    probability = None if p is None else float(p)
    return FlaggedCall(
        trace_id, span_id, service, operation, model, started, probability, detectors, summary, rules, verdicts
    )


def _stored_call(trace_id: str, span_id: str, values: Sequence[Any], findings: Sequence[FindingView]) -> CallView:
    (service, operation, model, started, content_mode, sources_from, prompt, grounding, answer, p, flagged, said,
     span_name, attributes) = values  # fmt: skip
    return CallView(
        trace_id, span_id, service, operation, model, started, content_mode, sources_from, prompt, grounding, answer,
        tuple(findings), None if p is None else float(p), bool(flagged), said, span_name, dict(attributes),
    )  # fmt: skip


def _textless_call(trace_id: str, span_id: str, findings: Sequence[FindingView]) -> CallView:
    return CallView(trace_id, span_id, "", "", "", datetime.min, "missing", "", "", "", "", tuple(findings))
