"""One call as the pages show it: what the model did, its findings in sentences, the answer's flagged words."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from detectors.registry import FACT_DETECTORS
from pipeline.ui.call_terms import NO_CONTRACTS, Contracts
from pipeline.ui.escalated import escalation_view
from pipeline.ui.evidence import EvidenceView, evidence_view
from pipeline.ui.explain import sentence
from pipeline.ui.highlight import marks, segments
from pipeline.ui.queries import CallView, FindingView, LabelView, ToolRunView
from pipeline.ui.story import call_story
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


def call_context(
    call: CallView,
    labels: Sequence[LabelView],
    tool_runs: Sequence[ToolRunView] = (),
    contracts: Contracts = NO_CONTRACTS,
) -> dict[str, Any]:
    """What the templates render of ``call``, with the verdicts standing on it among ``labels``.

    ``tool_runs``: the trace's tool execution spans, where the results of the call's tool calls are;
    ``contracts``: the settings its end user and output schema are read by.
    """
    answer_marks = marks(call.answer, call.findings)
    rows = [FindingRow(f, sentence(f), evidence_view(f.evidence)) for f in call.findings]
    return {
        "call": call,
        "story": call_story(call, tool_runs, contracts.of(call)),
        "findings": rows,
        "flagging": [row for row in rows if row.finding.flagged],
        "quiet": [row for row in rows if not row.finding.flagged],
        "flagged_by": [f.detector for f in call.findings if f.flagged],
        "escalation": escalation_view(call.findings),
        "why": why_flagged(call),
        "verdicts": standing_by_row(labels, call.span_id),
        "marks": answer_marks,
        "segments": segments(call.answer, answer_marks),
        "withheld": _WITHHELD.get(call.content_mode, ""),
        "redacted": _REDACTED if call.content_mode == "redact" else "",
    }


def why_flagged(call: CallView) -> str:
    """Why the call is flagged or not, in words: a fact a detector checked, or its probability."""
    facts = [f for f in call.findings if f.flagged and f.detector in FACT_DETECTORS]
    p = "no p_hallucination" if call.p_hallucination is None else f"p_hallucination {call.p_hallucination:.3f}"
    if facts:
        named = ", ".join(f.detector for f in facts)
        return (
            f"Flagged by a fact: {named} checked the call against its definitions, registries or tool results "
            f"and found it wrong, which needs no probability. The {p} is the learned verdict's estimate from "
            "every detector's score; a fact flags the call whatever it says."
        )
    if call.flagged:
        return f"Flagged by its probability: {p} reached the application's list threshold."
    return f"Not flagged: {p} stayed below the application's list threshold, and no detector reported a fact."
