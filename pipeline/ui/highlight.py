"""Where on the answer each flagged detector points, and what source text it compared those words with.

Detectors put answer spans (character offsets) in their evidence under ``spans``; the text
they were held against sits beside them: ``source_text`` on the span itself
(unsupported_spans), or on the evidence row that starts where the span starts, as
``best_window`` (grounding's sentence rows) or ``context_passage`` (contradiction's claims: the
sentence stating the conflicting value; ``context_text``, the value alone, in findings from before it).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pipeline.ui.queries import FindingView

# Evidence lists whose rows may hold the source text a span was compared with.
_ROW_LISTS = ("sentences", "claims")
_COMPARED_KEYS = ("source_text", "best_window", "context_passage", "context_text")


@dataclass(frozen=True, slots=True)
class Mark:
    """One flagged answer span: offsets, the detector, and the source text it was compared with."""

    start: int
    end: int
    detector: str
    compared_with: str = ""


@dataclass(frozen=True, slots=True)
class Segment:
    """A run of answer text and the marks that cover all of it (none: plain text)."""

    text: str
    marks: tuple[Mark, ...] = ()

    @property
    def detectors(self) -> list[str]:
        """The detectors pointing at this text, each once."""
        return sorted({mark.detector for mark in self.marks})


def marks(answer: str, findings: Iterable[FindingView]) -> list[Mark]:
    """Every in-range span that a flagged finding points at, in answer order."""
    found = []
    for finding in findings:
        if not finding.flagged:
            continue
        for span in finding.evidence.get("spans") or ():
            mark = _mark(span, finding.detector, finding.evidence, len(answer))
            if mark is not None:
                found.append(mark)
    return sorted(found, key=lambda mark: (mark.start, mark.end, mark.detector))


def segments(answer: str, answer_marks: Sequence[Mark]) -> list[Segment]:
    """``answer`` cut at every mark boundary; each piece carries the marks covering it."""
    cuts = sorted({0, len(answer), *(m.start for m in answer_marks), *(m.end for m in answer_marks)})
    pieces = []
    for start, end in itertools.pairwise(cuts):
        covering = tuple(m for m in answer_marks if m.start <= start and end <= m.end)
        pieces.append(Segment(answer[start:end], covering))
    return pieces


def _mark(span: Any, detector: str, evidence: Mapping[str, Any], length: int) -> Mark | None:
    if not isinstance(span, Mapping):
        return None
    start, end = span.get("start"), span.get("end")
    if not (isinstance(start, int) and isinstance(end, int) and 0 <= start < end <= length):
        return None  # offsets into text this page does not hold (redacted, cut, or a malformed finding)
    return Mark(start, end, detector, _compared_with(span, start, evidence))


def _compared_with(span: Mapping[str, Any], start: int, evidence: Mapping[str, Any]) -> str:
    rows = [span, *(row for name in _ROW_LISTS for row in evidence.get(name) or () if isinstance(row, Mapping))]
    for row in rows:
        if row is span or row.get("start") == start:
            for key in _COMPARED_KEYS:
                if isinstance(row.get(key), str) and row[key]:
                    return str(row[key])
    return ""
