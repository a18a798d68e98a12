"""Each detector's finding as one plain sentence: what it checked, what it found, what it cannot judge.

Two detectors can disagree on the same answer because they look at different things (grounding
compares a sentence's meaning with the sources, contradiction compares its values); the page
says so on every row rather than leaving the reader to reconcile the scores.  The words come
from each detector's descriptor (``DetectorSpec.description``), so a new detector brings its own.
"""

from __future__ import annotations

from detectors.registry import DETECTORS
from detectors.spec import Description
from pipeline.ui.queries import FindingView

_DESCRIPTIONS = {spec.name: spec.description for spec in DETECTORS}
# A finding of a detector this release does not know (written by a newer worker, or since removed).
_UNKNOWN = Description("what its documentation says", "(not described here)")
_OUTCOMES = {"skipped": "did not run", "error": "failed"}


def sentence(finding: FindingView) -> str:
    """One plain sentence for ``finding``: checked, found, cannot judge."""
    described = _DESCRIPTIONS.get(finding.detector, _UNKNOWN)
    if finding.flagged:
        outcome = "flagged"
    elif finding.status == "ok" and described.ok is not None:
        return f"Checked {described.checks}; {described.ok}; cannot judge {described.blind_to}."
    elif finding.status == "ok":
        # Not "found nothing": a score below the threshold may still come with what was found ("2 unsupported spans").
        outcome = "did not flag the call: its score stayed below its threshold"
    else:
        outcome = _OUTCOMES.get(finding.status, finding.status)
    found = f"{outcome} ({finding.summary})" if finding.summary else outcome
    return f"Checked {described.checks}; {found}; cannot judge {described.blind_to}."
