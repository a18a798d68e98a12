"""Human verdicts into the ``labels`` table, from label files and the triage page alike (docs/operations.md)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from clickhouse_connect.driver.client import Client

LABEL_COLUMNS = [
    "trace_id", "span_id", "label", "detector", "labeller", "labelled_at", "note", "source", "withdrawn",
    "inclusion_probability", "stratum", "blind", "elsewhere",
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
    verdict is about the call either way.  ``inclusion_probability`` and ``stratum``: for a verdict
    on a call drawn into the audit sample (the review queue, a review digest), how it was drawn (0
    and "" otherwise: the verdict was given :attr:`elsewhere`).  A person's newest verdict of each
    kind replaces their earlier one of that kind: a verdict given elsewhere never replaces the
    audit sample's.  ``withdrawn``: the person took this verdict back (an undo); the call counts as
    not labelled by them, in that kind.  ``blind``: given in the review queue before its page showed
    what the detectors found.
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

    @property
    def elsewhere(self) -> bool:
        """Given outside the audit sample (a trace page, an alert's Slack buttons, a label file): not drawn."""
        return not self.stratum


def to_utc_ms(moment: datetime) -> datetime:
    """``moment`` in UTC at the column's millisecond precision, so a label reads back equal."""
    moment = moment.astimezone(UTC)
    return moment.replace(microsecond=moment.microsecond // 1000 * 1000)


def insert_labels(client: Client, database: str, labels: Sequence[Label], source: str) -> int:
    """Store ``labels`` (``source`` says where from: ``import:FILE``, ``ui``, ``review``, ``slack``); the count.

    Idempotent: the table keeps one row per span, labeller and kind (in the audit sample or
    :attr:`Label.elsewhere`), the newest ``labelled_at``.
    """
    rows = [
        [getattr(label, name) for name in _FIELDS]
        + [source, label.withdrawn, label.inclusion_probability, label.stratum, label.blind, label.elsewhere]
        for label in labels
    ]
    if rows:
        client.insert(f"{database}.labels", rows, column_names=LABEL_COLUMNS)
    return len(rows)
