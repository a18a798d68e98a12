"""Dates a text gives only in part: the year of the document's own date, and the months it names without a year.

A page dated December 2018 that says "in June" means a June, most likely of 2018; an answer
that writes "June 2018" restates it.  The document's date is read only where a text marks it
as one, so an event's date is never taken for it:

* a labelled date leading its line: ``Published: 3 December 2018``, ``Updated Monday, Dec 3,
  2018``, ``Retrieved 2018-12-03``, ``(meta data) PUBLISHED DATETIME: 2018-12-03 14:49``;
* a dateline: a date (after a place in capitals) opening its line, then a dash:
  ``December 3, 2018 — The council…``, ``LONDON, Dec 3, 2018 (Reuters) -``;
* a line near the top of the text holding a date and nothing else (but a weekday or a time).

Its year is known only when every such date agrees on one; several documents with different
dates, or none, give none.  The year is inferred, never read: it may support a value, and
never contradicts one ("next June" is another year).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

from detectors.text.quantities import Kind, Mention

_TOP_CHARS: Final = 600  # a line holding a date alone is the page's date only this near the top
_WEEKDAY = r"(?:(?:mon|tue|tues|wed|wednes|thu|thur|thurs|fri|sat|satur|sun)(?:day)?\.?,?\s+)"
# Before the date on its line: an optional bracketed tag, then a label that dates the document.
_LABEL_BEFORE: Final = re.compile(
    rf"""(?ix)^[\W_]*(?:\([^)\n]{{0,30}}\)\s*)?
    (?:last\s+)?(?:published|posted|updated|dated|retrieved|modified|edited|publication\s+date)
    (?:\s+(?:date|datetime|time|on))?\s*[:\-\u2013\u2014]?\s*(?:on\s+)?{_WEEKDAY}?\Z"""
)
_DATELINE_BEFORE: Final = re.compile(r"^\s*(?:[A-Z][A-Z .'-]{1,30},\s*)?\Z")
_DATELINE_AFTER: Final = re.compile(r"\s*(?:\(\w[\w ]{0,20}\)\s*)?[-\u2013\u2014]")
_ALONE_BEFORE: Final = re.compile(rf"(?i)^[\W_]*{_WEEKDAY}?\Z")
_ALONE_AFTER: Final = re.compile(r"(?i)[,\s]*(?:\d\d?:\d\d(?::\d\d)?\s*(?:[ap]\.?m\.?)?)?[\W_]*\Z")

_MONTH_NAMES: Final = ("January", "February", "March", "April", "May", "June", "July", "August", "September",
                       "October", "November", "December")  # fmt: skip
# A month named alone, in full and capitalised, not followed by a day or year (those are dates) nor a possessive.
_BARE_MONTH: Final = re.compile(rf"\b(?P<month>{'|'.join(_MONTH_NAMES)})\b(?!['\u2019]s)(?!\s*,?\s*\d)")
# What makes a bare month a time and not a name or a verb ("May Smith", "March on"): a word of time before it.
# "next June" and "last June" are left out: they name another year than the document's.
_MONTH_CUE: Final = re.compile(
    r"(?i:\b(?:in|since|by|until|till|from|during|through|throughout|before|after|early|late|mid"
    r"|(?:end|beginning|start|middle)\s+of)[\s-]+(?:the\s+)?(?:(?:early|late|mid)[\s-]+)?)\Z"
)
_CUE_CHARS: Final = 30


def document_year(text: str, mentions: Iterable[Mention]) -> int | None:
    """The year of the date the text marks as its own (see the module docstring); None unless exactly one."""
    years = {int(found.low) // 10000 for found in mentions if _dates_the_document(text, found)}
    return years.pop() if len(years) == 1 else None


def _dates_the_document(text: str, found: Mention) -> bool:
    if found.kind is not Kind.DATE or found.low != found.high or not found.family.startswith("date:ym"):
        return False
    line_start = text.rfind("\n", 0, found.start) + 1
    line_end = len(text) if (end := text.find("\n", found.end)) < 0 else end
    before, after = text[line_start : found.start], text[found.end : line_end]
    if _LABEL_BEFORE.search(before):
        return True
    if _DATELINE_BEFORE.match(before) and _DATELINE_AFTER.match(after):
        return True
    return found.start < _TOP_CHARS and bool(_ALONE_BEFORE.match(before) and _ALONE_AFTER.match(after))


def months_without_year(text: str, mentions: Iterable[Mention]) -> frozenset[int]:
    """The months the text names without a year: in a day and month ("14 June") or alone after a word of time."""
    months = {
        int(found.low) // 100 % 100 for found in mentions if found.family == "date:md" and found.low == found.high
    }
    for match in _BARE_MONTH.finditer(text):
        if _MONTH_CUE.search(text, max(0, match.start() - _CUE_CHARS), match.start()):
            months.add(_MONTH_NAMES.index(match["month"]) + 1)
    return frozenset(months)
