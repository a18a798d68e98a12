"""Rate monitors' ClickHouse side: flag rates per group from ``findings``, incidents in ``incidents``.

Rates are counted by the span's start time (``span_start_time``), not by when the finding
was written: event time is what the traffic did, a replay or a backlog writes old calls
late without moving them into the current window, and ``findings`` is partitioned by it.
The price: a call's late findings (sampled detectors report seconds to minutes later) are
missing from the newest minutes of the window until they arrive.

A call counts once however many detectors reported on it, and as flagged when its
``llm_calls`` row says so: its p_hallucination reached its policy's list threshold, or a
detector reporting a fact flagged it (one meaning of "flagged" with the triage list).
Duplicate finding rows of a replay collapse in that per-call step, so no ``FINAL`` is needed.
Methods block (clickhouse-connect is synchronous): the worker runs them in its sink thread.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from clickhouse_connect.driver.client import Client

from pipeline.config.monitors import MonitorConfig
from pipeline.monitors.evaluate import Counts, GroupKey, GroupRates, Incident, IncidentStatus
from pipeline.sinks.rows import INCIDENT_COLUMNS

DAY_SECONDS = 24 * 3600
SAME_HOUR_SECONDS = 3600  # the band on each past day that ends at the window's time of day

_INCIDENT_SELECT = ", ".join(column for column in INCIDENT_COLUMNS if column != "pagerduty_dedup_key")


def incident_row(incident: Incident) -> list[Any]:
    """One ``incidents`` row, in ``INCIDENT_COLUMNS`` order."""
    return [
        incident.incident_id,
        incident.monitor,
        incident.route,
        list(incident.group_by),
        list(incident.key),
        str(incident.status),
        incident.opened_at,
        incident.updated_at,
        incident.resolved_at,
        incident.rate,
        incident.baseline_rate,
        incident.calls,
        incident.flagged,
        incident.slack_channel,
        incident.slack_ts,
        incident.incident_id,  # the PagerDuty dedup key, spelled out for whoever searches PagerDuty
        incident.delivered,
        incident.version,
    ]


def _incident(row: Sequence[Any]) -> Incident:
    (incident_id, monitor, route, group_by, values, status, opened_at, updated_at, resolved_at,
     rate, baseline_rate, calls, flagged, slack_channel, slack_ts, delivered, version) = row  # fmt: skip
    return Incident(
        incident_id=incident_id,
        monitor=monitor,
        route=route,
        group_by=tuple(group_by),
        key=tuple(values),
        status=IncidentStatus(status),
        opened_at=_utc(opened_at),
        updated_at=_utc(updated_at),
        resolved_at=_utc(resolved_at) if resolved_at is not None else None,
        rate=rate,
        baseline_rate=baseline_rate,
        calls=calls,
        flagged=flagged,
        slack_channel=slack_channel,
        slack_ts=slack_ts,
        delivered=bool(delivered),
        version=version,
    )


def _utc(moment: datetime) -> datetime:
    """The driver returns the UTC columns' values naive (its client timezone setting decides)."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


class IncidentStore:
    """Reads rates and incidents, writes incidents, in one database."""

    def __init__(self, client: Client, database: str) -> None:
        self._client = client
        self._database = database  # an identifier validated by the settings

    def rates(self, config: MonitorConfig, now: datetime) -> list[GroupRates]:
        """Each group's window, same-hour and whole-period counts as of ``now``."""
        groups = ", ".join(config.group_by)  # names from a closed list (GroupField)
        window = timedelta(minutes=config.window_minutes)
        band = max(SAME_HOUR_SECONDS, int(window.total_seconds()))
        # Calls older than a day whose time of day falls in the band that ends at the window's end.
        same_hour = f"age >= {DAY_SECONDS} AND age % {DAY_SECONDS} < {{band:UInt32}}"
        query = f"""
            SELECT {groups},
                   countIf(start >= {{window_start:DateTime64(6, 'UTC')}}) AS window_calls,
                   countIf(start >= {{window_start:DateTime64(6, 'UTC')}} AND is_flagged) AS window_flagged,
                   countIf({same_hour}) AS hour_calls,
                   countIf({same_hour} AND is_flagged) AS hour_flagged,
                   countIf(start >= {{period_start:DateTime64(6, 'UTC')}}
                           AND start < {{window_start:DateTime64(6, 'UTC')}}) AS period_calls,
                   countIf(start >= {{period_start:DateTime64(6, 'UTC')}}
                           AND start < {{window_start:DateTime64(6, 'UTC')}} AND is_flagged) AS period_flagged
            FROM
            (
                SELECT {groups}, trace_id, span_id, min(span_start_time) AS start,
                       dateDiff('second', start, {{now:DateTime64(6, 'UTC')}}) AS age,
                       (trace_id, span_id) IN (
                           SELECT trace_id, span_id FROM {self._database}.llm_calls
                           WHERE flagged AND start_time >= {{scan_start:DateTime64(6, 'UTC')}}
                       ) AS is_flagged
                FROM {self._database}.findings
                WHERE span_start_time >= {{scan_start:DateTime64(6, 'UTC')}}
                  AND span_start_time < {{now:DateTime64(6, 'UTC')}}
                GROUP BY {groups}, trace_id, span_id
            )
            GROUP BY {groups}
        """  # noqa: S608 - identifiers validated, values bound
        period_start = now - timedelta(days=config.baseline_days)
        parameters = {
            "now": now,
            "window_start": now - window,
            "period_start": period_start,
            "scan_start": period_start - timedelta(seconds=band),
            "band": band,
        }
        width = len(config.group_by)
        return [
            GroupRates(
                key=tuple(str(value) for value in row[:width]),
                window=Counts(row[width], row[width + 1]),
                same_hour=Counts(row[width + 2], row[width + 3]),
                period=Counts(row[width + 4], row[width + 5]),
            )
            for row in self._client.query(query, parameters=parameters).result_rows
        ]

    def latest(self, monitor: str) -> dict[GroupKey, Incident]:
        """Each group's most recent incident of ``monitor``, open or resolved."""
        query = f"""
            SELECT {_INCIDENT_SELECT} FROM {self._database}.incidents FINAL
            WHERE monitor = {{monitor:String}}
            ORDER BY opened_at DESC
            LIMIT 1 BY group_by, group_values
        """  # noqa: S608 - identifiers validated, values bound
        rows = self._client.query(query, parameters={"monitor": monitor}).result_rows
        return {incident.key: incident for incident in map(_incident, rows)}

    def open_incidents(self) -> list[Incident]:
        """Every monitor's open incidents, oldest first."""
        query = f"""
            SELECT {_INCIDENT_SELECT} FROM {self._database}.incidents FINAL
            WHERE status = {{open:String}}
            ORDER BY opened_at
        """  # noqa: S608 - identifiers validated, values bound
        rows = self._client.query(query, parameters={"open": str(IncidentStatus.OPEN)}).result_rows
        return [_incident(row) for row in rows]

    def insert(self, incidents: Sequence[Incident]) -> None:
        """Write incidents' rows (each a newer version of its incident)."""
        if incidents:
            rows = [incident_row(incident) for incident in incidents]
            self._client.insert(f"{self._database}.incidents", rows, column_names=INCIDENT_COLUMNS)

    def close(self) -> None:
        """Close the client."""
        self._client.close()
