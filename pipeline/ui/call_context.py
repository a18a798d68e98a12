"""One call as the pages show it: its findings in sentences with their evidence, the answer's flagged words."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pipeline.ui.evidence import EvidenceView, evidence_view
from pipeline.ui.explain import sentence
from pipeline.ui.highlight import marks, segments
from pipeline.ui.queries import CallView, FindingView, LabelView
from pipeline.ui.verdicts import standing_by_row

# Stored text withheld by the worker's content policy, and what the page says about it.
_WITHHELD = {
    "hash": "stored as HMAC digests under content_mode=hash: the text cannot be shown",
    "drop": "not stored (content_mode=drop): only the findings' numbers remain",
    "missing": "this call's row is not stored (yet): only its findings are shown",
}
_REDACTED = "stored with personal data masked (content_mode=redact): highlights may sit a few characters off"


@dataclass(frozen=True, slots=True)
class FindingRow:
    """A finding as its row on a page shows it."""

    finding: FindingView
    sentence: str
    evidence: EvidenceView


def call_context(call: CallView, labels: Sequence[LabelView]) -> dict[str, Any]:
    """What the templates render of ``call``, with the verdicts standing on it among ``labels``."""
    answer_marks = marks(call.answer, call.findings)
    return {
        "call": call,
        "findings": [FindingRow(f, sentence(f), evidence_view(f.evidence)) for f in call.findings],
        "flagged_by": [f.detector for f in call.findings if f.flagged],
        "verdicts": standing_by_row(labels, call.span_id),
        "marks": answer_marks,
        "segments": segments(call.answer, answer_marks),
        "withheld": _WITHHELD.get(call.content_mode, ""),
        "redacted": _REDACTED if call.content_mode == "redact" else "",
    }
