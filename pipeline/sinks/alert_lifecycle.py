"""What happened to an alert's incident in PagerDuty, written onto its ``alerts`` row (schemas/015).

The ``alerts`` table keeps one row per (trace, rule, destination): the version with the
highest ``state_version``.  A lifecycle change is a new version of the alert's PagerDuty
row, copied from the current one inside ClickHouse (``INSERT ... SELECT * REPLACE``), so
it keeps every delivery fact (status, attempts, error, and columns added later), with the
lifecycle columns set.  Its version sits above every version the router writes, so a
delivery retry that lands later cannot undo an acknowledgement; among lifecycle changes
it grows with PagerDuty's ``occurred_at`` (seconds; milliseconds break ties through
``incident_changed_at``), so a webhook delivered late or replayed never moves the state
back.  Two workers applying two changes of one incident in the same instant may race;
PagerDuty's next change settles it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum

from clickhouse_connect.driver.client import Client

from pipeline.sinks.labels import to_utc_ms

# The router's versions stay below this: attempts (< 2**16) plus 2**16 once final (alerting.alert_row).
LIFECYCLE_VERSION_BASE = 1 << 17
_VERSION_EPOCH = datetime(2024, 1, 1, tzinfo=UTC)
_MAX_VERSION = 2**32 - 1  # state_version is a UInt32


class IncidentState(StrEnum):
    """Where the alert's incident stands in PagerDuty."""

    TRIGGERED = "triggered"  # open, nobody on it: un-acknowledged (timed out) or re-opened
    ACKNOWLEDGED = "acknowledged"
    RESOLVED = "resolved"


class Recorded(StrEnum):
    """What became of a lifecycle change."""

    APPLIED = "applied"
    UNKNOWN_ALERT = "no such alert"  # not ours, or its delivery row is not written (yet)
    STALE = "stale"  # the row already tells of a later change (a late or repeated webhook)


@dataclass(frozen=True, slots=True)
class IncidentChange:
    """PagerDuty's word that one alert's incident changed state, by whom, when."""

    trace_id: str
    rule: str
    state: IncidentState
    by: str
    at: datetime
    url: str = ""  # the incident's page in PagerDuty

    @property
    def state_version(self) -> int:
        """The row version of this change: above every delivery version, later changes higher."""
        seconds = int((self.at - _VERSION_EPOCH).total_seconds())
        return min(LIFECYCLE_VERSION_BASE + max(seconds, 0), _MAX_VERSION)


# Lifecycle columns each state sets; the others keep what the row said.  Going back to
# "triggered" clears the acknowledgement and resolution it undoes.
_SET = {
    IncidentState.ACKNOWLEDGED: {"acknowledged_at": "{at:DateTime64(3, 'UTC')}", "acknowledged_by": "{by:String}"},
    IncidentState.RESOLVED: {"resolved_at": "{at:DateTime64(3, 'UTC')}", "resolved_by": "{by:String}"},
    IncidentState.TRIGGERED: {"acknowledged_at": "NULL", "acknowledged_by": "''", "resolved_at": "NULL",
                              "resolved_by": "''"},
}  # fmt: skip
_ALWAYS = {
    "state_version": "{version:UInt32}",
    "incident_status": "{state:String}",
    "incident_changed_at": "{at:DateTime64(3, 'UTC')}",
    "incident_url": "if({url:String} != '', {url:String}, current.incident_url)",
    # PagerDuty telling of the incident proves the trigger arrived, whatever our last attempt heard.
    "status": "if(current.status = 'retrying', 'delivered', current.status)",
}
# The alert's PagerDuty row: PagerDutyDestination is "pagerduty", or "pagerduty:<route>" for a
# route with a service of its own; an alert takes one route, so it has one such row.
_THE_ROW = (
    "current.trace_id = {trace:String} AND current.rule = {rule:String}"
    " AND (current.destination = 'pagerduty' OR startsWith(current.destination, 'pagerduty:'))"
)
_EARLIER = (
    "(current.state_version, ifNull(current.incident_changed_at, toDateTime64(0, 3, 'UTC')))"
    " < ({version:UInt32}, {at:DateTime64(3, 'UTC')})"
)


def record_incident_change(client: Client, database: str, change: IncidentChange) -> Recorded:
    """Write ``change`` as the newest version of its alert's row, unless the row knows better."""
    params = {
        "trace": change.trace_id,
        "rule": change.rule,
        "version": change.state_version,
        "at": to_utc_ms(change.at),
        "state": str(change.state),
        "by": change.by,
        "url": change.url,
    }
    table = f"{database}.alerts"
    found = client.query(
        f"SELECT {_EARLIER} FROM {table} AS current FINAL WHERE {_THE_ROW}",  # noqa: S608 - identifiers validated, values bound
        parameters=params,
    ).result_rows
    if not found:
        return Recorded.UNKNOWN_ALERT
    if not found[0][0]:
        return Recorded.STALE
    replaced = ", ".join(f"{sql} AS {column}" for column, sql in {**_ALWAYS, **_SET[change.state]}.items())
    client.command(
        f"INSERT INTO {table} SELECT * REPLACE ({replaced}) FROM {table} AS current FINAL "  # noqa: S608 - identifiers validated, values bound
        f"WHERE {_THE_ROW} AND {_EARLIER}",
        parameters=params,
    )
    return Recorded.APPLIED
