"""Human verdicts into the ``labels`` table, from label files and the triage page alike (docs/operations.md)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from clickhouse_connect.driver.client import Client

LABEL_COLUMNS = [
    "trace_id", "span_id", "label", "detector", "labeller", "labelled_at", "note", "source", "withdrawn",
    "inclusion_probability", "stratum", "blind",
]  # fmt: skip
# Lower-case hex, as the worker writes ids (label files may use either case: lower them first).
TRACE_ID = re.compile(r"[0-9a-f]{32}")
SPAN_ID = re.compile(r"[0-9a-f]{16}")
# Label's field for each column up to source (given per batch), which the rest follow.
_FIELDS = ["trace_id", "span_id", "hallucinated", "detector", "labeller", "labelled_at", "note"]


@dataclass(frozen=True, slots=True)
class Label:
    """One person's verdict on one LLM span: hallucinated or not.

    ``detector`` names the finding the person judged from (empty: the call as a whole); the
    verdict is about the call either way, and a person's newest verdict on a call replaces
    their earlier one.  ``withdrawn``: the person took this verdict back (an undo); the call
    counts as not labelled by them.  ``inclusion_probability`` and ``stratum``: for a verdict given
    in the review queue, how its call was drawn into the audit sample (0 and "" otherwise).
    ``blind``: given in the review queue before its page showed what the detectors found.
    """

    trace_id: str
    span_id: str
    hallucinated: bool
    labeller: str
    labelled_at: datetime
    note: str = ""
    detector: str = ""
    withdrawn: bool = False
    inclusion_probability: float = 0.0
    stratum: str = ""
    blind: bool = False


def to_utc_ms(moment: datetime) -> datetime:
    """``moment`` in UTC at the column's millisecond precision, so a label reads back equal."""
    moment = moment.astimezone(UTC)
    return moment.replace(microsecond=moment.microsecond // 1000 * 1000)


def insert_labels(client: Client, database: str, labels: Sequence[Label], source: str) -> int:
    """Store ``labels`` (``source`` says where from: ``import:FILE``, ``ui``, ``slack``); returns the count.

    Idempotent: the table keeps one row per span and labeller, the newest ``labelled_at``.
    A verdict given outside the review queue on a call its labeller judged there keeps how the
    call was drawn: replacing that row with an undrawn one would take the call out of the audit
    sample, and not at random (people go back to the calls an alert flagged).
    """
    draws = _audit_draws(client, database, [label for label in labels if not label.stratum])
    rows = []
    for label in labels:
        probability, stratum = draws.get(_row_key(label), (label.inclusion_probability, label.stratum))
        rows.append(
            [getattr(label, name) for name in _FIELDS] + [source, label.withdrawn, probability, stratum, label.blind]
        )
    if rows:
        client.insert(f"{database}.labels", rows, column_names=LABEL_COLUMNS)
    return len(rows)


def _row_key(label: Label) -> tuple[str, str, str]:
    return label.trace_id, label.span_id, label.labeller


def _audit_draws(
    client: Client, database: str, labels: Sequence[Label]
) -> dict[tuple[str, str, str], tuple[float, str]]:
    """How each of ``labels``' calls was drawn into the audit sample, for those its labeller judged there."""
    if not labels:
        return {}
    query = f"""
        SELECT trace_id, span_id, labeller, inclusion_probability, stratum FROM {database}.labels FINAL
        WHERE (trace_id, span_id, labeller) IN {{keys:Array(Tuple(String, String, String))}} AND stratum != ''
    """  # noqa: S608 - the database name is a checked setting, values bound
    result = client.query(query, parameters={"keys": [_row_key(label) for label in labels]})
    return {(t, s, who): (float(p), str(stratum)) for t, s, who, p, stratum in result.result_rows}
