"""What the rate estimate and the review queue read from ClickHouse, and the skips they write.

Every query starts from the calls in a :class:`Scope` (an application, service, operation, model
or attribute values, over a window), one row per call: its application (the policy its findings
name), its ``p_hallucination``, whether an alert was raised on its trace, its stratum, and why
the detectors could not check it, if they could not (``UNVERIFIED_REASONS``, which the rate panel
shares: :mod:`dashboards.fragments`).  An unverified call is counted apart: never in a stratum,
never judged in the queue, never taken as faithful.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from clickhouse_connect.driver.client import Client

from dashboards.fragments import UNVERIFIED_REASONS
from detectors.verdict import NOT_HALLUCINATION_EVIDENCE
from pipeline.config.alerting import JUDGE
from pipeline.judge.records import JUDGMENT_KEY
from pipeline.rate.sampler import ALERTED, NO_PROBABILITY, Strata


@dataclass(frozen=True, slots=True)
class Scope:
    """The calls an estimate is about: those matching every non-empty selector, started in [since, until)."""

    since: datetime
    until: datetime
    app: str = ""  # an application policy's name
    service: str = ""
    operation: str = ""
    model: str = ""
    attributes: tuple[tuple[str, str], ...] = ()  # span or resource attribute values (service.version...)

    def describe(self) -> str:
        """The selector as people read it: ``app hr, service.version=v42`` (``every call`` for none)."""
        parts = [f"{name} {value}" for name, value in
                 (("app", self.app), ("service", self.service), ("operation", self.operation), ("model", self.model))
                 if value]  # fmt: skip
        parts += [f"{key}={value}" for key, value in self.attributes]
        return ", ".join(parts) or "every call"

    def window(self) -> str:
        """``2025-06-01 09:00 to 2025-06-08 09:00 UTC``."""
        return f"{self.since:%Y-%m-%d %H:%M} to {self.until:%Y-%m-%d %H:%M} UTC"


@dataclass(frozen=True, slots=True)
class AuditVerdict:
    """The standing audit verdict on one call of the scope, with the frame and stratum its call is in now."""

    frame: str  # application / stratum
    hallucinated: bool
    alerted: bool
    routes: frozenset[str] = frozenset()  # the routes alerts on its trace took


@dataclass(frozen=True, slots=True)
class JudgedRow:
    """An audit verdict with what the worker stored of its call: the probability, the map it went through, flags."""

    trace_id: str
    span_id: str
    frame: str
    probability: float
    hallucinated: bool
    inclusion_probability: float
    map_version: str  # '' for the shipped calibration alone
    flags: dict[str, int]  # hallucination detectors that flagged the call -> severity
    judgment: str = ""  # what the judge answered on the call ('' when it was not asked, or has not answered)


@dataclass(frozen=True, slots=True)
class TrafficRow:
    """What the worker stored of one call: its probability, the map it went through, its flags, the judge's answer."""

    probability: float
    map_version: str  # '' for the shipped calibration alone
    flags: dict[str, int]
    judgment: str = ""  # '' when the judge was not asked, or has not answered


@dataclass(frozen=True, slots=True)
class ScopeCounts:
    """The scope's calls: per frame (application / stratum), unverified by reason, the model's mean probability."""

    population: dict[str, int] = field(default_factory=dict)
    unverified: dict[str, int] = field(default_factory=dict)  # reason -> calls (a call may give several)
    unverified_calls: int = 0
    calls: int = 0  # every call of the scope, unverified ones included
    mean_probability: float | None = None  # over the verified calls with a probability
    with_probability: int = 0
    skipped: int = 0  # calls a reviewer skipped that nobody judged since
    drawable: dict[str, int] = field(default_factory=dict)  # per frame: verified calls nobody judged or skipped


@dataclass(frozen=True, slots=True)
class Drawn:
    """The call the queue serves next, with how it was drawn."""

    trace_id: str
    span_id: str
    stratum: str
    inclusion_probability: float


# The parameters of :meth:`RateStore._signals_joined`'s joins.
_SIGNAL_PARAMETERS = {"evidence_only": sorted(NOT_HALLUCINATION_EVIDENCE), "judge": JUDGE, "judgment_key": JUDGMENT_KEY}


def frame_name(app: str, stratum: str) -> str:
    """A sampling frame: the queue draws each application's strata on their own."""
    return f"{app} / {stratum}"


class RateStore:
    """Queries of one ClickHouse database for the rate estimate and the review queue."""

    def __init__(self, client: Client, database: str, strata: Strata) -> None:
        self._client = client
        self._db = database
        self._strata = strata

    def counts(self, scope: Scope) -> ScopeCounts:
        """How many calls of ``scope`` each frame holds, which are unverified and why, the model's mean."""
        calls_sql, params = self._calls(scope)
        groups = self._rows(
            f"""
            SELECT app, stratum, notEmpty(reasons) AS unverified, count(), countIf(p IS NOT NULL),
                   sumIf(p, p IS NOT NULL), countIf(skipped AND NOT judged), countIf(NOT judged AND NOT skipped)
            FROM ({calls_sql}) GROUP BY app, stratum, unverified
            """,  # noqa: S608 - identifiers validated, values bound
            params,
        )
        reasons = self._rows(
            f"SELECT reason, count() FROM ({calls_sql}) ARRAY JOIN reasons AS reason GROUP BY reason ORDER BY 2 DESC",  # noqa: S608
            params,
        )
        checked = [row for row in groups if not row[2]]
        with_p = sum(int(row[4]) for row in checked)
        return ScopeCounts(
            population={frame_name(app, stratum): int(count) for app, stratum, _, count, *_ in checked},
            unverified={reason: int(count) for reason, count in reasons},
            unverified_calls=sum(int(row[3]) for row in groups if row[2]),
            calls=sum(int(row[3]) for row in groups),
            mean_probability=sum(float(row[5]) for row in checked) / with_p if with_p else None,
            with_probability=with_p,
            skipped=sum(int(row[6]) for row in groups),
            drawable={frame_name(row[0], row[1]): int(row[7]) for row in checked},
        )

    def verdicts(self, scope: Scope) -> list[AuditVerdict]:
        """The audit verdicts standing on verified calls of ``scope`` (the newest per call)."""
        calls_sql, params = self._calls(scope)
        rows = self._rows(
            f"SELECT app, stratum, hallucinated, alerted, routes FROM ({calls_sql}) WHERE judged AND empty(reasons)",  # noqa: S608
            params,
        )
        return [AuditVerdict(frame_name(app, stratum), bool(h), bool(a), frozenset(map(str, routes)))
                for app, stratum, h, a, routes in rows]  # fmt: skip

    def app_of(self, trace_id: str, span_id: str) -> str | None:
        """The application policy a call's findings name; None for a call without findings."""
        rows = self._rows(
            f"SELECT any(policy) FROM {self._db}.findings WHERE trace_id = {{t:String}} AND span_id = {{s:String}}"  # noqa: S608
            " HAVING count() > 0",
            {"t": trace_id, "s": span_id},
        )
        return str(rows[0][0]) if rows else None

    def apps(self) -> list[str]:
        """The application policies findings name."""
        return [row[0] for row in self._rows(f"SELECT DISTINCT policy FROM {self._db}.findings ORDER BY 1")]  # noqa: S608

    def queue_state(self, scope: Scope, reviewer: str) -> tuple[dict[str, int], dict[str, int], dict[str, int]]:
        """Per stratum of ``scope``: its verified calls, those judged, those left to serve ``reviewer``."""
        calls_sql, params = self._calls(scope)
        rows = self._rows(
            f"""
            SELECT stratum, count(), countIf(judged),
                   countIf(NOT judged AND (trace_id, span_id) NOT IN
                           (SELECT trace_id, span_id FROM {self._db}.review_skips WHERE reviewer = {{reviewer:String}}))
            FROM ({calls_sql}) WHERE empty(reasons) GROUP BY stratum
            """,  # noqa: S608 - identifiers validated, values bound
            {**params, "reviewer": reviewer},
        )
        order = {name: rank for rank, name in enumerate(self._strata.names)}
        rows.sort(key=lambda row: order[row[0]])
        return (
            {stratum: int(size) for stratum, size, *_ in rows},
            {stratum: int(judged) for stratum, _, judged, _ in rows},
            {stratum: int(left) for stratum, _, _, left in rows},
        )

    def first_unjudged(
        self, scope: Scope, stratum: str, reviewer: str, seed: int, drawn: Sequence[tuple[str, str]] = ()
    ) -> tuple[str, str] | None:
        """The stratum's unjudged, unskipped verified call with the lowest seeded hash (a random draw, repeatable).

        ``drawn``: calls already handed out in this draw (a digest's), not served twice.
        """
        calls_sql, params = self._calls(scope)
        rows = self._rows(
            f"""
            SELECT trace_id, span_id FROM ({calls_sql})
            WHERE empty(reasons) AND NOT judged AND stratum = {{stratum:String}}
              AND (trace_id, span_id) NOT IN
                  (SELECT trace_id, span_id FROM {self._db}.review_skips WHERE reviewer = {{reviewer:String}})
              AND (trace_id, span_id) NOT IN {{drawn:Array(Tuple(String, String))}}
            ORDER BY sipHash64(concat(toString({{seed:Int64}}), ':', trace_id, ':', span_id)), trace_id, span_id
            LIMIT 1
            """,  # noqa: S608 - identifiers validated, values bound
            {**params, "stratum": stratum, "reviewer": reviewer, "seed": seed, "drawn": list(drawn)},
        )
        return (rows[0][0], rows[0][1]) if rows else None

    def skip(self, trace_id: str, span_id: str, reviewer: str, at: datetime) -> None:
        """Record that ``reviewer`` skipped a call: the queue serves them another."""
        self._client.insert(
            f"{self._db}.review_skips",
            [[trace_id, span_id, reviewer, at]],
            column_names=["trace_id", "span_id", "reviewer", "skipped_at"],
        )

    def judged_calls(self, scope: Scope) -> list[JudgedRow]:
        """The audit verdicts on verified calls of ``scope``, with each call's probability, map and flags."""
        calls_sql, params = self._calls(scope)
        rows = self._rows(
            f"""
            SELECT trace_id, span_id, app, stratum, p, hallucinated, drawn_with, version, flags, judgment
            FROM ({calls_sql}) AS c
            INNER JOIN
            (
                SELECT trace_id, span_id, argMax(inclusion_probability, labelled_at) AS drawn_with
                FROM {self._db}.labels FINAL WHERE inclusion_probability > 0 AND NOT withdrawn
                GROUP BY trace_id, span_id
            ) AS drawn USING (trace_id, span_id)
            {self._signals_joined()}
            WHERE judged AND empty(reasons) AND p IS NOT NULL
            """,  # noqa: S608 - identifiers validated, values bound
            {**params, **_SIGNAL_PARAMETERS},
        )
        return [
            JudgedRow(str(t), str(s), frame_name(app, stratum), float(p), bool(h), float(inclusion), str(version),
                      {str(name): int(severity) for name, severity in flags}, str(judgment))
            for t, s, app, stratum, p, h, inclusion, version, flags, judgment in rows
        ]  # fmt: skip

    def traffic(self, scope: Scope, limit: int) -> tuple[list[TrafficRow], int]:
        """The verified calls of ``scope`` with a probability, at most ``limit`` of them drawn at random, and how many.

        What the route minimums are measured on: each call's probability, map, flags and judgment.
        """
        calls_sql, params = self._calls(scope)
        ((total,),) = self._rows(
            f"SELECT count() FROM ({calls_sql}) WHERE empty(reasons) AND p IS NOT NULL",  # noqa: S608
            params,
        )
        rows = self._rows(
            f"""
            SELECT p, version, flags, judgment FROM ({calls_sql}) AS c
            {self._signals_joined()}
            WHERE empty(reasons) AND p IS NOT NULL
            ORDER BY sipHash64(trace_id, span_id) LIMIT {{limit:UInt64}}
            """,  # noqa: S608 - identifiers validated, values bound
            {**params, **_SIGNAL_PARAMETERS, "limit": limit},
        )
        return [TrafficRow(float(p), str(version), {str(name): int(severity) for name, severity in flags},
                           str(judgment)) for p, version, flags, judgment in rows], int(total)  # fmt: skip

    def _signals_joined(self) -> str:
        """The joins that give each call the map its probability went through, its flags and the judge's answer."""
        return f"""
            LEFT JOIN
            (
                SELECT trace_id, span_id, argMax(calibration_version, ingested_at) AS version
                FROM {self._db}.llm_calls GROUP BY trace_id, span_id
            ) AS mapped USING (trace_id, span_id)
            LEFT JOIN
            (
                SELECT trace_id, span_id,
                       groupArrayIf((detector, severity), flagged AND status = 'ok'
                                    AND detector NOT IN {{evidence_only:Array(String)}}) AS flags,
                       anyIf(JSONExtractString(evidence, {{judgment_key:String}}), detector = {{judge:String}})
                           AS judgment
                FROM {self._db}.findings FINAL GROUP BY trace_id, span_id
            ) AS found_flags USING (trace_id, span_id)
        """  # noqa: S608 - identifiers validated

    def _calls(self, scope: Scope) -> tuple[str, dict[str, Any]]:
        """One row per call of ``scope``: app, p, alerted, stratum, unverified reasons, the audit verdict, skipped."""
        where = ["start_time >= {since:DateTime64(6, 'UTC')}", "start_time < {until:DateTime64(6, 'UTC')}"]
        params: dict[str, Any] = {"since": scope.since, "until": scope.until}
        for column in ("service", "operation", "model"):
            if value := getattr(scope, column):
                where.append(f"{column} = {{{column}:String}}")
                params[column] = value
        for index, (key, value) in enumerate(scope.attributes):
            where.append(f"attributes[{{key{index}:String}}] = {{value{index}:String}}")
            params |= {f"key{index}": key, f"value{index}": value}
        app = "WHERE app = {app:String}" if scope.app else ""
        params |= {"app": scope.app, "names": list(self._strata.names[:-2]), "edges": list(self._strata.edges)}
        sql = f"""
            SELECT trace_id, span_id, app, p, alerted, routes, reasons, judged, hallucinated, skipped,
                   multiIf(alerted, '{ALERTED}', p IS NULL, '{NO_PROBABILITY}',
                           arrayElement({{names:Array(String)}}, 1 + arrayCount(e -> p >= e, {{edges:Array(Float64)}})))
                       AS stratum
            FROM
            (
                SELECT trace_id, span_id, max(p_hallucination) AS p
                FROM {self._db}.llm_calls WHERE {" AND ".join(where)} GROUP BY trace_id, span_id
            ) AS calls
            INNER JOIN
            (
                SELECT trace_id, span_id, any(policy) AS app, {UNVERIFIED_REASONS} AS reasons
                FROM {self._db}.findings FINAL
                WHERE span_start_time >= {{since:DateTime64(6, 'UTC')}}
                  AND span_start_time < {{until:DateTime64(6, 'UTC')}}
                GROUP BY trace_id, span_id
            ) AS found USING (trace_id, span_id)
            LEFT JOIN
            (
                SELECT trace_id, span_id, true AS judged, argMax(label, labelled_at) AS hallucinated
                FROM {self._db}.labels FINAL
                WHERE inclusion_probability > 0 AND NOT withdrawn GROUP BY trace_id, span_id
            ) AS audit USING (trace_id, span_id)
            LEFT JOIN
            (
                SELECT trace_id, true AS alerted, groupUniqArray(route) AS routes
                FROM {self._db}.alerts GROUP BY trace_id
            ) AS raised USING (trace_id)
            LEFT JOIN
            (
                SELECT DISTINCT trace_id, span_id, true AS skipped FROM {self._db}.review_skips
            ) AS passed USING (trace_id, span_id)
            {app}
        """  # noqa: S608 - identifiers validated, values bound
        return sql, params

    def _rows(self, sql: str, params: dict[str, Any] | None = None) -> list[tuple[Any, ...]]:
        return [tuple(row) for row in self._client.query(sql, parameters=params or {}).result_rows]
