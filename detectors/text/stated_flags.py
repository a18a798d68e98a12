"""Yes/no fields of structured sources, and what an answer says about them.

Tool results and database rows hold facts as true/false fields: ``"OutdoorSeating": false``,
``"in_stock": true``, ``"refundable": "no"``.  An answer that retells the record states
them in words ("offers outdoor seating", "is not refundable"), and one that gets a field
backwards contradicts its source as plainly as a wrong number does.  Sentence embeddings
barely see this: the words all occur in the source, only the polarity is wrong.

* **Fields** are read from the text, not parsed, so JSON inside prose and Python-style
  dicts count too: a quoted key, a colon, then ``true``/``false`` or a quoted
  ``yes``/``no``.  ``null`` means unknown and is skipped.
* A field's **words** come from its key (``OutdoorSeating``, ``outdoor_seating``: *outdoor
  seating*), without function words and without a prefix that several keys share
  (``RestaurantsReservations``, ``RestaurantsTakeOut``: *reservations*, *take out*).  A
  one-word key nested in an object takes that object's last word too (``"BusinessParking":
  {"valet": false}``: *valet parking*).
* The answer **mentions** a field where its words occur within a few words of each other
  (forms of a word match: *reservation* / *reservations*, *park* / *parking*).  It **denies** the field when a
  negation cue (*not*, *no*, *without*, ...) comes shortly before without a clause break
  (*but*, *while*, *;*) in between, or right after and a verb of being: "does not take
  reservations", "valet parking is not available", "no WiFi, but outdoor seating" (seating
  is affirmed).
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Final

from detectors.text.prose import MIN_STEM_CHARS, RECORD_KEY, key_words, same_word

_FIELD = re.compile(RECORD_KEY + r"""(?P<value>true|false|True|False|["'](?:yes|no|true|false|Yes|No|YES|NO)["'])""")
_ANY_KEY = re.compile(RECORD_KEY)
_OBJECT_KEY = re.compile(RECORD_KEY + r"\{")
_ANSWER_WORD = re.compile(r"[^\W\d_]+(?:-[^\W\d_]+)*(?:['\u2019]t)?|[.,;!?]")  # "Wi-Fi", "doesn't" are one word
_FUNCTION_WORDS: Final = frozenset("a an the of for to in on at by with is are has have can does do and or".split())  # noqa: SIM905
_NEGATIONS: Final = frozenset(
    """not no never without lacks lack lacking neither nor none cannot isn't aren't doesn't don't didn't wasn't
    won't can't unavailable""".split()  # noqa: SIM905 - reads as text
)
_BREAKS: Final = frozenset(". ; ! ? but however while although though whereas yet".split())  # noqa: SIM905
_SPREAD = 4  # a field's words must lie within this many answer words of each other
_CUE_BEFORE = 6  # words a negation may sit before the field's words
_SUBJECTS: Final = frozenset("the it they there its their this these which who we you he she".split())  # noqa: SIM905
_AVAILABILITY: Final = frozenset(
    "available offered provided allowed accepted included permitted supported possible present an option".split()  # noqa: SIM905
)
_BEING: Final = frozenset("is are was were be been currently also still".split())  # noqa: SIM905
_MAX_FLAGS = 200  # per source text, so a huge record costs a bounded scan of the answer
_OBJECTS_LOOKED_AT = 8  # enclosing-object candidates checked per field (the nearest ones)


@dataclass(frozen=True, slots=True)
class Flag:
    """A yes/no field of a source text: its words, value, and where it is written."""

    words: tuple[str, ...]
    value: bool
    start: int
    end: int
    text: str


@dataclass(frozen=True, slots=True)
class FlagStatement:
    """Where an answer speaks of a flag's field (a denial's negation included), and whether it affirms it."""

    flag: Flag
    start: int
    end: int
    affirmed: bool

    @property
    def agrees(self) -> bool:
        """Whether the answer keeps the field's value."""
        return self.affirmed == self.flag.value


def source_flags(text: str) -> tuple[Flag, ...]:
    """The yes/no fields written in ``text`` (JSON or Python-style key/value pairs)."""
    fields = list(itertools.islice(_FIELD.finditer(text), _MAX_FLAGS))
    if not fields:
        return ()
    shared = _shared_prefixes(text)
    objects = [(match.end(), key_words(match["key"])) for match in _OBJECT_KEY.finditer(text)]
    flags = []
    for match in fields:
        parts = key_words(match["key"])
        words = _field_words(parts)
        if len(words) > 1 and words[0] in shared:
            words = words[1:]
        words = [word for word in words if word not in _FUNCTION_WORDS]
        if len(parts) == 1:  # "valet" alone is vague: {"BusinessParking": {"valet": ...}}
            parent = _enclosing(objects, text, match.start())
            if not parent:
                continue
            words.append(parent[-1])
        if words:
            value = match["value"].strip("\"'").lower() in ("true", "yes")
            flags.append(Flag(tuple(words), value, match.start(), match.end(), match.group()))
    return tuple(flags)


def flag_statements(answer: str, flags: Sequence[Flag]) -> list[FlagStatement]:
    """Each place the answer speaks of a flag's field (the first per field and clause)."""
    if not flags:
        return []
    tokens = [(_token(m.group()), m.start(), m.end()) for m in _ANSWER_WORD.finditer(answer)]
    words = [token for token, _, _ in tokens]
    clauses = _clauses(words)
    where: dict[str, list[int]] = {}
    for at, word in enumerate(words):
        where.setdefault(_stem_key(word), []).append(at)
    found = []
    for flag in flags:
        for first, last in _mentions(words, clauses, where.get(_stem_key(flag.words[0]), []), flag.words):
            cue = _negation_at(words, clauses, first, last)
            first, last = (first, last) if cue is None else (min(first, cue), max(last, cue))
            found.append(FlagStatement(flag, tokens[first][1], tokens[last][2], affirmed=cue is None))
    return found


def _token(word: str) -> str:
    """An answer word as field words are written: lower case, "Wi-Fi" as "wifi", a typographic apostrophe straight."""
    return word.lower().replace("-", "").replace("\u2019", "'")


def _clauses(words: list[str]) -> list[int]:
    """Each word's clause number.

    Clauses end at sentence ends, at *but*/*while*/..., and at a comma that a new subject
    follows ("no WiFi, and the ambience is casual").
    """
    numbers, clause = [], 0
    for at, word in enumerate(words):
        following = words[at + 1 : at + 3]
        if following[:1] in (["and"], ["or"]):
            following = following[1:]
        if word in _BREAKS or (word == "," and following[:1] and following[0] in _SUBJECTS):
            clause += 1
        numbers.append(clause)
    return numbers


def _stem_key(word: str) -> str:
    """What two forms of one word (:func:`same_word`) always share: the first letters of the stem."""
    return word[:MIN_STEM_CHARS]


def _mentions(
    words: list[str], clauses: list[int], candidates: list[int], wanted: tuple[str, ...]
) -> Iterator[tuple[int, int]]:
    """(first, last) word index of each clause's first place where all ``wanted`` words lie close.

    ``candidates``: where words that may be a form of the first wanted word are (same stem key).
    """
    done = -1  # the last clause that had one
    for at in candidates:
        if clauses[at] == done or not same_word(words[at], wanted[0]):
            continue
        near = range(max(0, at - _SPREAD), min(len(words), at + _SPREAD + 1))
        window = [i for i in near if clauses[i] == clauses[at]]
        places = [at] + [next((i for i in window if same_word(words[i], w)), -1) for w in wanted[1:]]
        if -1 not in places:
            done = clauses[at]
            yield min(places), max(places)


def _negation_at(words: list[str], clauses: list[int], first: int, last: int) -> int | None:
    """Where the negation of the words ``first..last`` is; None when they are affirmed.

    A negation counts shortly before them in their clause ("does not take reservations"),
    or right after them and a verb of being when it denies availability ("valet parking is
    not available", but not "the parking lot is not scenic").
    """
    clause = clauses[first]
    at, distance = first - 1, 0
    while at >= 0 and distance < _CUE_BEFORE and clauses[at] == clause:
        if _negation(words[at]):
            if _governs(words, clauses, at, last):
                return at
            break
        distance += words[at] != ","
        at -= 1
    at = last + 1
    while at < len(words) and words[at] in _BEING:
        at += 1
    if at < len(words) and _negation(words[at]):
        after = next(
            (w for w, c in zip(words[at + 1 :], clauses[at + 1 :], strict=True) if w not in _BEING and c == clause), "."
        )
        if after in _AVAILABILITY or after in (".", ","):
            return at
    return None


def _governs(words: list[str], clauses: list[int], cue: int, last: int) -> bool:
    """Whether a negation reaches past the commas between it and ``last``.

    Only into a list joined by *or*/*nor* ("no WiFi, parking, or reservations"), not into
    the next predicate ("does not accept reservations, offers outdoor seating").
    """
    if "," not in words[cue:last]:
        return True
    reach = range(cue, min(len(words), last + 4))
    return any(words[i] in ("or", "nor") and clauses[i] == clauses[cue] for i in reach)


def _negation(word: str) -> bool:
    return word in _NEGATIONS or word.endswith("n't")


def _field_words(parts: list[str]) -> list[str]:
    """A key's words as an answer writes them: "WiFi" (wi, fi) is one word."""
    return ["".join(parts)] if len(parts) > 1 and all(len(part) <= 2 for part in parts) else parts


def _shared_prefixes(text: str) -> frozenset[str]:
    """First words that two or more distinct keys of the text begin with: a namespace, not content."""
    keys = {match["key"] for match in _ANY_KEY.finditer(text)}
    firsts = Counter(words[0] for words in map(key_words, keys) if len(words) > 1)
    return frozenset(word for word, count in firsts.items() if count >= 2)


def _enclosing(objects: list[tuple[int, list[str]]], text: str, at: int) -> list[str]:
    """The words of the key whose object holds position ``at`` (the innermost still open), if any."""
    nearest = bisect.bisect_right([opened for opened, _ in objects], at)
    for opened, words in reversed(objects[max(0, nearest - _OBJECTS_LOOKED_AT) : nearest]):
        if text.count("{", opened, at) >= text.count("}", opened, at):
            return words
    return []
