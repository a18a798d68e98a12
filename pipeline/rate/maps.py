"""Applications' own maps of ``p_hallucination`` in ClickHouse: proposals, which one is applied, and since when.

``halluwatch calibrate --app`` stores a proposal (a Platt map over the shipped probability, the
route minimums, what both were measured to do); applying it (the command's ``--apply``, the
review page's button) stores an ``applied`` copy naming who applied it.  The newest applied row
of an application is its map; the worker re-reads them every ``review.map_refresh_seconds``
and stamps each call with the version its probability went through.  Reverting is applying an
earlier version, or ``shipped``: the shipped calibration alone.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from clickhouse_connect.driver.client import Client

from detectors.verdict import PlattScaling
from pipeline.judge.weight import SHIPPED_PRIOR, JudgeWeight
from pipeline.sinks.timestamps import as_utc

SHIPPED = "shipped"
PROPOSED, APPLIED = "proposed", "applied"
JUDGE_REPORT_KEY = "judge"  # a proposal's report keeps the judge's weight fitted on the same verdicts
_COLUMNS = ["app", "version", "event", "at", "by", "slope", "intercept", "minimums", "verdicts", "report"]


@dataclass(frozen=True, slots=True)
class AppMap:
    """One version of an application's map: the Platt map over the shipped p and each gated route's minimum."""

    app: str
    version: str
    calibration: PlattScaling = field(default_factory=PlattScaling)
    minimums: dict[str, float] = field(default_factory=dict)
    verdicts: int = 0
    report: dict[str, Any] = field(default_factory=dict)  # what it was measured to do when proposed
    at: datetime | None = None
    by: str = ""

    @property
    def judge(self) -> JudgeWeight:
        """The judge's weight fitted with this map (the shipped prior where it was fitted on no judged verdicts)."""
        fitted = self.report.get(JUDGE_REPORT_KEY)
        if not isinstance(fitted, dict):
            return SHIPPED_PRIOR
        return JudgeWeight(float(fitted["sensitivity"]), float(fitted["specificity"]), int(fitted.get("verdicts", 0)),
                           str(fitted.get("note", "")))  # fmt: skip


class UnknownVersion(LookupError):
    """No proposal of that version for that application."""


class MapStore:
    """The ``calibration_maps`` table of one database."""

    def __init__(self, client: Client, database: str) -> None:
        self._client = client
        self._table = f"{database}.calibration_maps"

    def propose(self, proposal: AppMap, at: datetime, by: str) -> None:
        """Store a proposal (nothing changes for the application until it is applied)."""
        self._insert(proposal, PROPOSED, at, by)

    def proposal(self, app: str, version: str = "") -> AppMap | None:
        """The proposal ``version`` of ``app`` (the newest when empty); ``shipped`` is the shipped calibration."""
        if version == SHIPPED:
            return AppMap(app, SHIPPED)
        rows = self._select("app = {app:String} AND event = {event:String}"
                            + (" AND version = {version:String}" if version else "") + " ORDER BY at DESC LIMIT 1",
                            {"app": app, "event": PROPOSED, "version": version})  # fmt: skip
        return rows[0] if rows else None

    def apply(self, app: str, version: str, at: datetime, by: str) -> AppMap:
        """Make ``version`` (a stored proposal, or ``shipped``) the map of ``app``'s calls from now on."""
        chosen = self.proposal(app, version)
        if chosen is None:
            raise UnknownVersion(
                f"no proposal {version!r} for application {app!r}: run `halluwatch calibrate --app {app}`"
            )
        self._insert(chosen, APPLIED, at, by)
        return chosen

    def applied(self) -> dict[str, AppMap]:
        """Each application's applied map (those whose newest applied version is ``shipped`` have none)."""
        rows = self._select(
            "(app, at) IN (SELECT app, max(at) FROM {table} WHERE event = {event:String} GROUP BY app)"
            " AND event = {event:String}",
            {"event": APPLIED},
        )
        return {row.app: row for row in rows if row.version != SHIPPED}

    def history(self, app: str) -> list[tuple[str, AppMap]]:
        """Every event of ``app``, newest first: (``proposed`` or ``applied``, the map)."""
        rows = self._client.query(
            f"SELECT event, {', '.join(_COLUMNS)} FROM {self._table} WHERE app = {{app:String}} ORDER BY at DESC",  # noqa: S608 - identifiers validated, values bound
            parameters={"app": app},
        ).result_rows
        return [(str(row[0]), _app_map(row[1:])) for row in rows]

    def _insert(self, chosen: AppMap, event: str, at: datetime, by: str) -> None:
        c = chosen.calibration
        row = [chosen.app, chosen.version, event, at, by, c.slope, c.intercept, dict(chosen.minimums),
               chosen.verdicts, json.dumps(chosen.report)]  # fmt: skip
        self._client.insert(self._table, [row], column_names=_COLUMNS)

    def _select(self, where: str, params: dict[str, Any]) -> list[AppMap]:
        sql = f"SELECT {', '.join(_COLUMNS)} FROM {self._table} WHERE " + where.replace("{table}", self._table)  # noqa: S608 - identifiers validated, values bound
        return [_app_map(row) for row in self._client.query(sql, parameters=params).result_rows]


def _app_map(row: Any) -> AppMap:
    app, version, _, at, by, slope, intercept, minimums, verdicts, report = row
    return AppMap(str(app), str(version), PlattScaling(float(slope), float(intercept)),
                  {str(k): float(v) for k, v in dict(minimums).items()}, int(verdicts),
                  json.loads(report) if report else {}, as_utc(at), str(by))  # fmt: skip


class AppMaps:
    """The applied maps a worker scores with, replaced whole by each re-read while detector threads read them."""

    def __init__(self, maps: dict[str, AppMap] | None = None) -> None:
        self._maps = dict(maps or {})

    def update(self, maps: dict[str, AppMap]) -> list[str]:
        """Take a fresh read; returns the applications whose map version changed."""
        changed = sorted(app for app in {*maps, *self._maps}
                         if (maps.get(app) or AppMap(app, SHIPPED)).version
                         != (self._maps.get(app) or AppMap(app, SHIPPED)).version)  # fmt: skip
        self._maps = dict(maps)  # one reference swap: a reader sees the old set or the new one
        return changed

    def of(self, app: str) -> AppMap | None:
        """The applied map of ``app``; None: the shipped calibration (and the thresholds file's map)."""
        return self._maps.get(app)
