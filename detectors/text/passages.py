"""Source text as evidence quotes it: whole sentences, cut only on word boundaries, "…" where cut.

A reader judges a flagged word by the passage beside it.  A window of raw characters around
the match starts and ends mid-word and straddles sentences ("rch to the 1889 World's Fair …
man-made st"); the sentence that holds the match reads as the source wrote it.  Only a
sentence longer than the cap is cut, around the match, at spaces.  Text without spaces
(CJK) is cut where the cap falls.
"""

from __future__ import annotations

import re

from detectors.text.prose import split_sentences

ELLIPSIS = "…"
PASSAGE_CHARS = 300  # a long sentence, or most of one around its match
_SPACE = re.compile(r"\s")


def clip(text: str, limit: int) -> str:
    """``text``, cut to at most ``limit`` characters at the last space that keeps half, with an ellipsis."""
    if len(text) <= limit:
        return text
    head = text[: limit - 1]
    space = head.rfind(" ", limit // 2)
    return (head[:space] if space > 0 else head).rstrip() + ELLIPSIS


def passage(text: str, start: int, end: int, limit: int = PASSAGE_CHARS, language: str = "en") -> str:
    """The sentence(s) of ``text`` holding ``text[start:end]``, cut around it to ``limit`` characters.

    Only the neighbourhood of the match is split into sentences (a source may be 40,000
    characters): a sentence reaching past it is longer than ``limit`` and cut anyway.
    """
    start, end = max(0, min(start, len(text))), max(0, min(end, len(text)))
    lo, hi = max(0, start - limit - 1), min(len(text), end + limit + 1)
    holding = [s for s in split_sentences(text[lo:hi], language) if s.start < end - lo and s.end > start - lo]
    first, last = (holding[0].start + lo, holding[-1].end + lo) if holding else (start, end)
    if last - first <= limit:
        return text[first:last]
    # Share the room left beside the match between its two sides; a side that needs less gives the rest away.
    room = max(0, limit - 2 - (end - start))
    left = min(start - first, max(room // 2, room - (last - end)))
    right = min(last - end, room - left)
    cut_start, cut_end = _word_start(text, start - left, start), _word_end(text, end + right, end)
    if cut_end - cut_start > limit:  # the match alone is longer than the cap
        return clip(text[cut_start:cut_end], limit)
    before = ELLIPSIS if cut_start > first else ""
    after = ELLIPSIS if cut_end < last else ""
    return before + text[cut_start:cut_end].strip() + after


def _word_start(text: str, at: int, limit: int) -> int:
    """``at``, or the start of the next word when ``at`` falls inside one (never past ``limit``)."""
    if at == 0 or _SPACE.match(text, at - 1):
        return at
    space = _SPACE.search(text, at, limit)
    return space.end() if space else at


def _word_end(text: str, at: int, limit: int) -> int:
    """``at``, or the end of the previous word when ``at`` falls inside one (never before ``limit``)."""
    if at == len(text) or _SPACE.match(text, at):
        return at
    space = max((m.start() for m in _SPACE.finditer(text, limit, at)), default=-1)
    return space if space >= 0 else at
