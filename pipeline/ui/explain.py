"""Each detector's finding as one plain sentence: what it checked, what it found, what it cannot judge.

Two detectors can disagree on the same answer because they look at different things (grounding
compares a sentence's meaning with the sources, contradiction compares its values); the page
says so on every row rather than leaving the reader to reconcile the scores.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.ui.queries import FindingView


@dataclass(frozen=True, slots=True)
class Scope:
    """What a detector checks, what it cannot judge, and what its ``ok`` means."""

    checks: str
    blind_to: str
    ok: str = "found nothing to flag"


SCOPES: dict[str, Scope] = {
    "sentinel": Scope(
        "whether the prompt asks for facts (its score: how likely), which decides whether the content detectors apply",
        "whether the answer is right: it judges the prompt, and its flag means unverified, not hallucinated",
        ok="let the content detectors run",
    ),
    "coverage": Scope(
        "whether the content detectors could read the whole call: the answer's language, sources past max_source_chars",
        "whether the answer is right: its flag means unverified, not hallucinated",
        ok="the detectors could read the whole call",
    ),
    "grounding": Scope(
        "whether each answer sentence is about what some source passage says",
        "values: it compares meaning, so a wrong number, date or name in an on-topic sentence passes",
    ),
    "unsupported_spans": Scope(
        "which answer words no source supports",
        "claims the sources state in other words, and sources it was not given",
    ),
    "contradiction": Scope(
        "the numbers, dates, quantities and names of the answer against the context",
        "claims without a value or a name",
    ),
    "schema_violation": Scope(
        "tool calls and structured answers against their definitions",
        "meaning: a well-formed call or answer with a wrong value passes",
    ),
    "tool_facts": Scope(
        "tool call arguments against the registries declared for them",
        "anything no registry declares",
    ),
    "tool_outcome": Scope(
        "whether the answer claims a tool did what its result says failed",
        "claims without an action word, and tool results that do not say they failed",
    ),
    "confidence": Scope(
        "how unsure the model was (token entropy against its own baseline)",
        "whether the answer is true: a confident model can still be wrong",
    ),
    "self_consistency": Scope(
        "whether the model gives the same answer when asked again",
        "errors the model repeats every time",
    ),
    "claims": Scope(
        "each claim of the answer against the context, as an LLM judge sees it",
        "what the judge itself gets wrong",
    ),
    "span_model": Scope(
        "which answer tokens a token classifier marks as unsupported",
        "whatever its training data did not cover",
    ),
}
_UNKNOWN = Scope("what its documentation says", "(not described here)")
_OUTCOMES = {"skipped": "did not run", "error": "failed"}


def sentence(finding: FindingView) -> str:
    """One plain sentence for ``finding``: checked, found, cannot judge."""
    scope = SCOPES.get(finding.detector, _UNKNOWN)
    if finding.flagged:
        outcome = "flagged"
    else:
        outcome = scope.ok if finding.status == "ok" else _OUTCOMES.get(finding.status, finding.status)
    found = f"{outcome} ({finding.summary})" if finding.summary else outcome
    return f"Checked {scope.checks}; {found}; cannot judge {scope.blind_to}."
