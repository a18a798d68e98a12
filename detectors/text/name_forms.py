"""Other ways a source writes a name: acronyms and postal codes.

The contradiction detector calls a name unsupported when one of its words is missing from
the sources.  Two common rewrites make that a false flag: an acronym on one side and its
expansion on the other ("European Union" / "EU", "UN" / "United Nations"), and an address's
postal code for its region ("Goleta, CA" / "Goleta, California").  This module finds both,
with the text's case kept, because only capitals make an acronym ("IN" is Indiana, "in" is
not).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Final

import yaml

_LETTERS = re.compile(r"[^\W\d_]+")
# Lowercase words that may sit inside a capitalised name ("Bank of America", "Île-de-France").
_JOINERS: Final = frozenset("of and for the de des du la le von van der del da".split())  # noqa: SIM905 - reads as text
_GAP = re.compile(r"[\s\-&]*")  # what may separate the words of one name
_MIN_ACRONYM, _MAX_ACRONYM = 2, 6
_MAX_STRETCHES = 4  # joiner-separated parts of a run that may make one name


@dataclass(frozen=True, slots=True)
class NameForms:
    """A text's acronyms and the acronyms its capitalised names make (all lowercase)."""

    acronyms: frozenset[str]  # words written in capitals: "EU", "UNHCR", "CA"
    initials: frozenset[str]  # initials of each run of capitalised words: "Los Angeles Police" -> "lap"


def name_forms(text: str) -> NameForms:
    """Index ``text``'s acronyms and the initials of its capitalised names."""
    acronyms: set[str] = set()
    run_initials: set[str] = set()
    run: list[str] = []  # the current run of capitalised words (joiners included)
    end = 0
    for match in _LETTERS.finditer(text):
        word = match.group()
        joined_on = run and _GAP.fullmatch(text, end, match.start()) is not None
        if word.isupper() and _MIN_ACRONYM <= len(word) <= _MAX_ACRONYM:
            acronyms.add(word.lower())
        if word[0].isupper() or (joined_on and word in _JOINERS):
            if not joined_on:
                run_initials.update(_initials_of(run))
                run = []
            run.append(word)
        else:
            run_initials.update(_initials_of(run))
            run = []
        end = match.end()
    run_initials.update(_initials_of(run))
    return NameForms(frozenset(acronyms), frozenset(run_initials))


def _initials_of(run: list[str]) -> Iterator[str]:
    """The initials of each stretch of a run between joiners, and of neighbouring stretches together.

    "Staff of the Los Angeles Airport" is one run, but "Department of the Interior" is one name
    too: every stretch of up to ``_MAX_STRETCHES`` parts is a candidate.
    """
    parts: list[list[str]] = [[]]
    for word in run:
        if word in _JOINERS:
            parts[-1].append(word)
        elif parts[-1] and parts[-1][-1] in _JOINERS:
            parts.append([word])
        else:
            parts[-1].append(word)
    for first in range(len(parts)):
        for last in range(first, min(first + _MAX_STRETCHES, len(parts))):
            words = [word for part in parts[first : last + 1] for word in part]
            while words and words[-1] in _JOINERS:
                words.pop()
            yield from initials(words)


def initials(words: Sequence[str]) -> frozenset[str]:
    """A name's initials (lowercase), with and without its joiners: "Bank of America" -> {"ba", "boa"}.

    Empty unless two or more capitalised words make them.
    """
    capitalised = "".join(word[0] for word in words if word.lower() not in _JOINERS)
    if len(capitalised) < _MIN_ACRONYM:
        return frozenset()
    return frozenset({capitalised.lower(), "".join(word[0] for word in words).lower()})


def region_names(code: str) -> frozenset[str]:
    """The regions (lowercase names) a postal code stands for: "ca" -> {"california"}."""
    return _regions()[0].get(code.lower(), frozenset())


def region_codes(name: str) -> frozenset[str]:
    """The postal codes (lowercase) of a region's name: "new york" -> {"ny"}."""
    return _regions()[1].get(name.lower(), frozenset())


@functools.cache
def _regions() -> tuple[dict[str, frozenset[str]], dict[str, frozenset[str]]]:
    document = yaml.safe_load(resources.files("detectors.data").joinpath("region_codes.yaml").read_text("utf-8"))
    names: dict[str, set[str]] = {}
    codes: dict[str, set[str]] = {}
    for regions in document.values():
        for code, name in regions.items():
            names.setdefault(code.lower(), set()).add(name.lower())
            codes.setdefault(name.lower(), set()).add(code.lower())
    return ({k: frozenset(v) for k, v in names.items()}, {k: frozenset(v) for k, v in codes.items()})
