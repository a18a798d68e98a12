"""Source passages quoted in evidence: whole sentences, word boundaries, an ellipsis where cut."""

from __future__ import annotations

import re

import pytest

from detectors.text.passages import ELLIPSIS, clip, passage
from tests.calls import whole_words

EIFFEL = (
    "The Eiffel Tower was built between 1887 and 1889 as the entrance arch to the 1889 World's Fair in Paris. "
    "The tower is 330 m tall including its antennas and was the tallest man-made structure in the world until 1930."
)
LONG = " ".join(f"word{n}" for n in range(200)) + "."


def at(text: str, part: str) -> tuple[int, int]:
    start = text.index(part)
    return start, start + len(part)


def test_the_whole_sentence_holding_the_match_is_quoted():
    assert passage(EIFFEL, *at(EIFFEL, "1930")) == EIFFEL.split(". ", 1)[1]
    assert passage(EIFFEL, *at(EIFFEL, "1887")) == EIFFEL.split(" The tower", 1)[0]


def test_a_match_across_sentences_quotes_both():
    assert passage(EIFFEL, *at(EIFFEL, "Paris. The tower")) == EIFFEL


def test_a_long_sentence_is_cut_around_the_match_on_word_boundaries_with_ellipses():
    quoted = passage(LONG, *at(LONG, "word100"), limit=60)
    assert quoted.startswith(ELLIPSIS) and quoted.endswith(ELLIPSIS) and "word100" in quoted
    assert len(quoted) <= 60 and whole_words(quoted, LONG)
    start = passage(LONG, *at(LONG, "word1 "), limit=60)
    assert start.startswith("word0 word1") and start.endswith(ELLIPSIS) and whole_words(start, LONG)
    end = passage(LONG, *at(LONG, "word199"), limit=60)
    assert end.startswith(ELLIPSIS) and end.endswith("word199.") and whole_words(end, LONG)


def test_the_sentence_is_found_in_a_long_source_without_reading_all_of_it():
    source = LONG * 200 + " " + EIFFEL + " " + LONG * 200
    assert passage(source, *at(source, "1930")) == EIFFEL.split(". ", 1)[1]


@pytest.mark.parametrize("limit", [20, 45, 80])
def test_every_cut_keeps_whole_words(limit: int):
    for match in re.finditer(r"\w+", EIFFEL):
        quoted = passage(EIFFEL, match.start(), match.end(), limit=limit)
        assert match.group() in quoted and len(quoted) <= max(limit, len(match.group()))
        assert whole_words(quoted, EIFFEL), quoted


def test_clip_cuts_at_a_space_with_an_ellipsis():
    assert clip("short", 10) == "short"
    assert clip("The tower is 330 m tall", 15) == "The tower is" + ELLIPSIS
    assert clip("x" * 50, 10) == "x" * 9 + ELLIPSIS  # no space to cut at
