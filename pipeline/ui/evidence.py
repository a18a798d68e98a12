"""A finding's evidence as text and tables: scalar fields as name/value lines, lists of records as tables.

Character offsets are left out (the answer's highlights show where they point); the raw JSON,
offsets included, stays one click away on the page.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

_OFFSETS = frozenset({"start", "end", "context_start", "context_end"})


@dataclass(frozen=True, slots=True)
class EvidenceTable:
    """One list of records of the evidence (claims, sentences, spans...) as rows of text."""

    name: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


@dataclass(frozen=True, slots=True)
class EvidenceView:
    """The evidence as the page shows it: named values, then tables."""

    facts: tuple[tuple[str, str], ...]
    tables: tuple[EvidenceTable, ...]


def evidence_view(evidence: Mapping[str, Any]) -> EvidenceView:
    """``evidence`` (a finding's JSON object) as named values and tables."""
    facts: list[tuple[str, str]] = []
    tables: list[EvidenceTable] = []
    for key, value in evidence.items():
        records = [item for item in value if isinstance(item, Mapping)] if isinstance(value, list) else []
        if records and len(records) == len(value):
            tables.append(_table(_words(key), records))
        elif key not in _OFFSETS:
            facts.append((_words(key), _text(value)))
    return EvidenceView(tuple(facts), tuple(tables))


def _table(name: str, records: list[Mapping[str, Any]]) -> EvidenceTable:
    columns = [key for key in dict.fromkeys(key for record in records for key in record) if key not in _OFFSETS]
    rows = tuple(
        tuple(_text(record.get(column)) if column in record else "" for column in columns) for record in records
    )
    return EvidenceTable(name, tuple(_words(column) for column in columns), rows)


def _words(key: str) -> str:
    return key.replace("_", " ")


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.3f}".rstrip("0").rstrip(".") if value % 1 else str(int(value))
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    if isinstance(value, list) and not value:
        return "none"
    if isinstance(value, list) and all(isinstance(item, str | int | float) for item in value):
        return ", ".join(_text(item) for item in value)
    return json.dumps(value, ensure_ascii=False, sort_keys=True)
