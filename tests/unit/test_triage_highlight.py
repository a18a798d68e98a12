"""Which answer words the triage page marks, and the source text shown beside each."""

from __future__ import annotations

import pytest
from pydantic import SecretStr, ValidationError

from pipeline.config.ui import UISettings
from pipeline.ui.access import Access
from pipeline.ui.highlight import Mark, marks, segments
from pipeline.ui.queries import FindingView

ANSWER = "Built in 1950, it is 500 m tall."


def finding(detector: str, evidence: dict, flagged: bool = True) -> FindingView:
    return FindingView(detector, "ok", 0.9, 0.5, flagged, 2, "", evidence)


def span(text: str, **extra: object) -> dict[str, object]:
    start = ANSWER.index(text)
    return {"start": start, "end": start + len(text), "text": text, **extra}


def test_each_detector_layout_gives_its_compared_source_text():
    found = marks(
        ANSWER,
        [
            finding("unsupported_spans", {"spans": [span("500 m", source_text="330 m tall")]}),
            finding("contradiction", {"spans": [span("1950")], "claims": [{**span("1950"), "context_text": "1889"}]}),
            finding("grounding", {"spans": [span(ANSWER)], "sentences": [{**span(ANSWER), "best_window": "Opened."}]}),
        ],
    )
    assert [(ANSWER[m.start : m.end], m.detector, m.compared_with) for m in found] == [
        (ANSWER, "grounding", "Opened."),
        ("1950", "contradiction", "1889"),
        ("500 m", "unsupported_spans", "330 m tall"),
    ]
    claim = {**span("1950"), "context_text": "1889", "context_passage": "Built 1887 to 1889."}
    (passage,) = marks(ANSWER, [finding("contradiction", {"spans": [span("1950")], "claims": [claim]})])
    assert passage.compared_with == "Built 1887 to 1889."  # the sentence stating the value, over the value alone


def test_unflagged_findings_and_offsets_outside_the_stored_answer_mark_nothing():
    spans = [{"start": 5, "end": 500}, {"start": 9, "end": 3}, {"start": "0", "end": 4}, "not a span"]
    assert marks(ANSWER, [finding("contradiction", {"spans": spans})]) == []
    assert marks(ANSWER, [finding("contradiction", {"spans": [span("1950")]}, flagged=False)]) == []


def test_segments_cover_the_answer_once_with_the_marks_over_each_piece():
    outer, inner = Mark(0, 13, "grounding"), Mark(9, 13, "contradiction")
    pieces = segments(ANSWER, [outer, inner])
    assert "".join(piece.text for piece in pieces) == ANSWER
    assert [(piece.text, piece.detectors) for piece in pieces] == [
        ("Built in ", ["grounding"]),
        ("1950", ["contradiction", "grounding"]),
        (", it is 500 m tall.", []),
    ]
    assert segments("", []) == []


def test_trusted_proxies_are_networks_and_only_they_are_trusted():
    settings = UISettings(trusted_proxies=["10.0.0.0/8", "::1/128"])
    assert settings.trusts("10.20.30.40") and settings.trusts("::1")
    assert not settings.trusts("192.0.2.1") and not settings.trusts("not-an-address")
    with pytest.raises(ValidationError, match="does not appear to be an IPv4 or IPv6 network"):
        UISettings(trusted_proxies=["10.0.0.0/33"])


def test_a_token_is_made_up_only_when_no_way_in_is_configured():
    made_up = Access(UISettings())
    assert made_up.generated and len(made_up.token) >= 32 and made_up.accepts(made_up.token)
    assert made_up.token != Access(UISettings()).token
    token = "s3cret-token-0123456789"
    configured = Access(UISettings(token=SecretStr(token), token_user="ops"))
    assert not configured.generated and configured.accepts(token) and not configured.accepts(token[:6])
    assert configured.token_user == "ops"
    proxied = Access(UISettings(identity_header="X-Forwarded-Email"))
    assert not proxied.generated and not proxied.accepts("")
