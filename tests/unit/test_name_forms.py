from __future__ import annotations

from detectors.text.name_forms import initials, name_forms, region_codes, region_names


def test_acronyms_are_words_in_capitals_only() -> None:
    forms = name_forms("The EU and UNHCR met in Goleta, CA; in the US, not in the us.")
    assert {"eu", "unhcr", "ca", "us"} <= forms.acronyms
    assert "the" not in forms.acronyms and "in" not in forms.acronyms


def test_initials_of_capitalised_runs_with_and_without_joiners() -> None:
    forms = name_forms("Staff of the Los Angeles International Airport and the Bank of America agreed.")
    assert {"laia", "ba", "boa"} <= forms.initials
    # Lowercase words other than joiners end a run.
    assert "ba" not in name_forms("Bank staff went to America.").initials


def test_initials_of_a_name() -> None:
    assert initials(["United", "Nations"]) == {"un"}
    assert initials(["Bank", "of", "America"]) == {"ba", "boa"}
    assert initials(["Paris"]) == frozenset()


def test_region_codes_both_ways_and_shared_codes() -> None:
    assert region_names("CA") == {"california"}
    assert region_codes("New York") == {"ny"}
    assert region_names("wa") == {"washington", "western australia"}
    assert region_codes("Atlantis") == frozenset()
    assert region_names("ON") == {"ontario"}  # quoted in the YAML: a bare ON would read as true
