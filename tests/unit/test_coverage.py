"""Coverage detector: an answer in a language the embedding model does not cover, a source cut short."""

from __future__ import annotations

import pytest

from detectors.coverage import CoverageConfig
from detectors.coverage.detector import CoverageDetector
from detectors.llm_call import Source
from tests.calls import make_llm_call

SOURCE = "Employees accrue 25 paid vacation days per year; up to 5 unused days carry over."


@pytest.fixture
def detector() -> CoverageDetector:
    return CoverageDetector(CoverageConfig(), 0.5, max_source_chars=200)


def test_a_french_answer_is_unverified_with_its_language(detector: CoverageDetector):
    call = make_llm_call("Vous avez droit à vingt-cinq jours de congés payés par an, dont cinq reportables.",
                         "How many vacation days do I get?", [Source("s1", SOURCE)])  # fmt: skip
    (result,) = detector.detect_batch([call])
    assert result.flagged and result.severity == 1
    assert result.evidence["language"] == "fr"
    assert result.evidence["reasons"] == ["answer in language fr, which the embedding model does not cover"]
    assert result.summary.startswith("unverified: answer in language fr")


def test_an_english_answer_with_whole_sources_is_covered(detector: CoverageDetector):
    call = make_llm_call("You accrue 25 paid vacation days per year, and up to 5 unused days carry over.",
                         "How many vacation days do I get?", [Source("s1", SOURCE)])  # fmt: skip
    (result,) = detector.detect_batch([call])
    assert not result.flagged and result.evidence == {"language": "en", "reasons": []}


def test_a_source_longer_than_grounding_reads_is_named(detector: CoverageDetector):
    long_source = Source("handbook", SOURCE + " " + "Filler policy text about other topics. " * 20)
    call = make_llm_call("You accrue 25 paid vacation days per year.", "Vacation days?", [long_source])
    (result,) = detector.detect_batch([call])
    assert result.flagged and result.evidence["reasons"] == ["a source cut at max_source_chars (200)"]


def test_json_and_short_answers_are_not_language_checked(detector: CoverageDetector):
    extraction = make_llm_call('{"sku": "TON-HP-305", "quantity": "two", "currency": "GBX", "ship_to": "Lei', "Extract")
    short = make_llm_call("Oui, bien sûr.", "Can I?")
    assert [r.flagged for r in detector.detect_batch([extraction, short])] == [False, False]
    assert all("language" not in r.evidence for r in detector.detect_batch([extraction, short]))


def test_a_multilingual_model_covers_french():
    wide = CoverageDetector(CoverageConfig(languages=["en", "fr", "de"]), 0.5, max_source_chars=10_000)
    call = make_llm_call("Vous avez droit à vingt-cinq jours de congés payés par an, dont cinq reportables.")
    assert not wide.detect_batch([call])[0].flagged
