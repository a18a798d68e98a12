"""The trace page's words for a finding: one sentence per detector, evidence as values and tables."""

from __future__ import annotations

from detectors.registry import DETECTORS
from pipeline.ui.evidence import EvidenceTable, evidence_view
from pipeline.ui.explain import sentence
from pipeline.ui.queries import FindingView


def _finding(detector: str, status: str = "ok", flagged: bool = False, summary: str = "") -> FindingView:
    return FindingView(detector, status, 0.5, 0.5, flagged, 0, summary, {})


def test_each_row_says_what_was_checked_found_and_cannot_be_judged():
    flagged = sentence(_finding("contradiction", flagged=True, summary="answer says 1950"))
    assert flagged == (
        "Checked the numbers, dates, quantities and names of the answer against the context; "
        "flagged (answer says 1950); cannot judge claims without a value or a name."
    )
    assert "; did not run (no tool calls); " in sentence(_finding("tool_outcome", "skipped", summary="no tool calls"))
    assert "; failed; " in sentence(_finding("grounding", "error"))
    assert "let the content detectors run" in sentence(_finding("sentinel"))
    assert sentence(_finding("someone_elses")).startswith("Checked what its documentation says; did not flag")
    # Below its threshold with something found: the page says the call was not flagged, never "found nothing".
    below = sentence(_finding("unsupported_spans", summary='2 unsupported span(s): "30 hours", "5-year"'))
    assert "found nothing" not in below
    assert '; did not flag the call: its score stayed below its threshold (2 unsupported span(s): "30 hours"' in below


def test_evidence_becomes_named_values_and_tables_without_offsets():
    view = evidence_view(
        {
            "checked": 2,
            "similarity": 0.80642,
            "truncated": False,
            "missing": [],
            "ids": ["a", "b"],
            "start": 3,
            "claims": [
                {"start": 0, "end": 4, "text": "1950", "context_text": "1887", "context_start": 9},
                {"start": 5, "end": 9, "text": "Europe", "weight": 2.0},
            ],
            "mixed": [{"a": 1}, 2],
            "nested": {"k": [1]},
        }
    )
    assert view.facts == (
        ("checked", "2"),
        ("similarity", "0.806"),
        ("truncated", "no"),
        ("missing", "none"),
        ("ids", "a, b"),
        ("mixed", '[{"a": 1}, 2]'),
        ("nested", '{"k": [1]}'),
    )
    assert view.tables == (
        EvidenceTable("claims", ("text", "context text", "weight"), (("1950", "1887", ""), ("Europe", "", "2"))),
    )


def test_a_clean_result_says_its_outcome_once_and_each_detector_describes_itself():
    clean = sentence(_finding("coverage", summary="the detectors could read the whole call"))
    assert clean.count("whole call") == 1, clean
    described = {spec.name: spec.description for spec in DETECTORS}
    assert sentence(_finding("tool_facts")).startswith(f"Checked {described['tool_facts'].checks};")
