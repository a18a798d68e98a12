"""Numeric & entity contradiction detector (docs/detectors.md).

HaluGate's example is the case this catches: the tool said the Eiffel Tower was built
1887-1889 and is 330 m tall, the answer says 1950 and 500 m.  Numbers, years, dates,
times, percentages, money, quantities with units (see :mod:`detectors.text.quantities`) and
capitalised names are pulled out of the answer and looked up in the grounding text.
No model: regexes and arithmetic, so it runs on every call and explains every verdict.

Each answer mention gets one verdict:

* **supported** — the grounding text, or the user's question (an answer may repeat the
  question's numbers), states the same value: equal within ``relative_tolerance`` or
  within the rounding of the answer's last significant digit, after unit conversion
  (``5 km`` = ``5,000 m``).  A range is supported when both ends are; a single value
  when it equals an end of, or lies inside, a context range.  A unitless number is also
  supported by the same number written with a unit or inside a date (``330`` by ``330
  meters``, ``1889`` by ``May 6, 1889``), and a number with a unit by the same bare
  number (JSON tool results often drop units).  Years, dates and times match exactly.
  A name is supported when each of its words occurs in the context or the question
  (compared without case or accents: ``Zurich`` is ``Zürich``, ``Strasse`` is ``Straße``),
  or the words it lacks are written there as an acronym, its expansion or a postal code
  (``EU`` for ``European Union``, ``CA`` for ``California``: :mod:`detectors.text.name_forms`).
  A match score is supported by the same score with its sides in the same order (``4-1`` by
  ``four goals to one``, not by ``1-4``), or, where the context writes no score, by both its
  sides written as numbers.
* **conflict** (severity 4) — not supported, and the grounding text has a value of the
  same family (kind plus dimension, currency or written date parts) whose surrounding
  words overlap the answer mention's: at least ``conflict_min_shared_words`` content
  words (function words dropped, words compared on their first five letters) within
  ``context_window_words`` words either side.  The best-overlapping one is reported as
  the conflicting context span, with the sentence that states it.  So "built in 1950"
  against "built: 1887-1889" is a conflict (shared: *built*, *eiffel*, *tower*); a year
  in an unrelated sentence is not.
  Names are never conflicts: which name another could replace is beyond a regex.
* **unsupported** (severity 2) — neither.

Yes/no fields of structured sources (``"OutdoorSeating": false``, ``"in_stock": true``;
:mod:`detectors.text.stated_flags`) are claims too: where the answer speaks of one, keeping its
value is supported and turning it round ("offers outdoor seating") a conflict with the field.
A record's number takes its unit or currency from its key (``"price_eur": 420``), so "380
euros" conflicts with it rather than finding nothing of its family to compare with.

Score (noisy-OR over distinct claims, so a value repeated in the answer counts once)::

    score = 1 - (1 - conflict_weight) ** conflicts
              * (1 - unsupported_weight) ** unsupported_values
              * (1 - name_weight) ** unsupported_names
              * (1 - count_weight) ** unsupported_counts

A *count* is a small whole number without a unit (up to ``max_count``: "two reviews",
"3 passages"): answers count what their sources list, so a count the sources never write
is weak evidence (on RAGTruth 2 of 15 such flags fell inside a labelled hallucination).

With the defaults one conflict alone crosses a 0.5 threshold, one unsupported number
does not, two do.  Answers longer than ``max_answer_chars`` are checked on their
prefix and contexts longer than ``max_context_chars`` on theirs (a value past the cut
reads as unsupported; the evidence says the context was truncated).
"""

from __future__ import annotations

import functools
import itertools
import re
import unicodedata
from bisect import bisect_left
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any, Final

from detectors.base import Detector, DetectorResult, checked_threshold
from detectors.contradiction import DETECTOR, ContradictionConfig
from detectors.llm_call import LLMCall
from detectors.spec import Ingredients
from detectors.text import evidence as shown
from detectors.text.name_forms import NameForms, initials, name_forms, region_codes, region_names
from detectors.text.passages import clip, passage
from detectors.text.prose import INFLECTION_CHARS, MIN_STEM_CHARS, same_word
from detectors.text.quantities import Kind, Mention, comparable, extract_claims, extract_names, extract_values
from detectors.text.stated_flags import Flag, FlagStatement, flag_statements, source_flags

MAX_CLAIMS_LISTED = 25  # per call, so evidence rows stay small
MAX_SPANS_LISTED = 20
_MAX_CLAIMS_CHECKED = 200
_MAX_RIVALS_COMPARED = 256  # same-family context values looked at per unsupported claim
_CONTEXT_CACHE_SIZE = 256  # the same documents recur across traces
_MAX_TEXT_CHARS = 120
_STEM_CHARS = 5
_APPROXIMATE: Final = frozenset({Kind.NUMBER, Kind.PERCENT, Kind.MONEY, Kind.QUANTITY})
_UNITLESS: Final = frozenset({Kind.NUMBER, Kind.YEAR})
_WORD = re.compile(r"[^\W\d_]+")
# Words an answer may write joined: "U.N." ("UN"), "Wi-Fi" ("WiFi"); the context knows both forms.
_COMPOUND: Final = re.compile(r"\b(?:[^\W\d_]\.){2,}|[^\W\d_]+(?:-[^\W\d_]+)+")
_ACCENTS: Final = dict.fromkeys(range(0x300, 0x370))  # combining diacritical marks, for str.translate to drop
_STOPWORDS: Final = frozenset(
    """a an the this that these those there their they it its in on at of for to from by with and or but as if is
    are was were be been being has have had do does did will would can could should may might must not no so than
    then also about over under into onto out up down off per each all any some more most less least very just only
    which who whom whose what when where why how he she his her him we our you your i me my us them around approximately
    nearly almost roughly about""".split()  # noqa: SIM905 - reads as text
)


class Verdict(StrEnum):
    """A claim's verdict; stored in evidence, so stable names."""

    SUPPORTED = "supported"
    CONFLICT = "conflict"
    UNSUPPORTED = "unsupported"


@dataclass(frozen=True)  # no slots: the cached properties below keep their values in __dict__
class _Context:
    """One text's checkable values, indexed for lookups."""

    text: str
    by_family: dict[str, list[Mention]]
    amounts: list[float]  # sorted: every number as written, whatever its kind
    plain_amounts: list[float]  # sorted: numbers written without a unit
    words: frozenset[str]
    sorted_words: tuple[str, ...]  # the same words in order, for prefix lookups
    # Surrounding words of context values, filled on first use (cached contexts recur across calls;
    # two threads racing on a key only compute the same value twice).
    stems: dict[tuple[int, int], frozenset[str]] = field(default_factory=dict)
    heads: dict[int, str] = field(default_factory=dict)
    comparables: dict[str, list[Mention]] = field(default_factory=dict)

    # Indexed on first use: unsupported_spans indexes every source for its values alone.
    @functools.cached_property
    def forms(self) -> NameForms:
        """The text's acronyms and the initials of its names (only an unsupported name needs them)."""
        return name_forms(self.text)

    @functools.cached_property
    def flags(self) -> tuple[Flag, ...]:
        """The yes/no fields of the structured records in the text."""
        return source_flags(self.text)

    def comparable_values(self, family: str) -> list[Mention]:
        """The text's values that a value of ``family`` may match or contradict (:func:`comparable`)."""
        if family not in self.comparables:
            self.comparables[family] = [
                mention for other, found in self.by_family.items() if comparable(family, other) for mention in found
            ]
        return self.comparables[family]

    def window_stems(self, mention: Mention, words: int) -> frozenset[str]:
        key = (mention.start, words)
        if key not in self.stems:
            self.stems[key] = _window_stems(self.text, mention, words)
        return self.stems[key]

    def head_stem(self, mention: Mention) -> str:
        if mention.start not in self.heads:
            self.heads[mention.start] = _head_stem(self.text, mention)
        return self.heads[mention.start]


ValueIndex = _Context  # what :func:`stated_values` looks values up in


@dataclass(frozen=True, slots=True)
class _Claim:
    mention: Mention
    verdict: Verdict
    rival: Mention | None = None

    def to_evidence(self, context: str) -> dict[str, Any]:
        """The claim as evidence; a conflict also quotes the sentence of ``context`` stating its rival value."""
        found = self.mention
        evidence: dict[str, Any] = {
            "kind": str(found.kind),
            "text": clip(found.text, _MAX_TEXT_CHARS),
            "start": found.start,
            "end": found.end,
            "verdict": str(self.verdict),
        }
        if self.rival is not None:
            evidence |= {
                "context_text": clip(self.rival.text, _MAX_TEXT_CHARS),
                "context_start": self.rival.start,
                "context_end": self.rival.end,
                "context_passage": passage(context, self.rival.start, self.rival.end),
            }
        return evidence


class ContradictionDetector(Detector):
    """Flags answers whose numbers, dates, quantities or names the context contradicts or lacks."""

    name = "contradiction"
    version = "1.8.0"

    def __init__(self, config: ContradictionConfig, threshold: float) -> None:
        self._config = config
        self._threshold = checked_threshold(threshold)
        # Context texts indexed once: the same documents and prompts recur across calls.
        self._index = functools.lru_cache(maxsize=_CONTEXT_CACHE_SIZE)(index_values)

    def close(self) -> None:
        """Drop the indexed contexts."""
        self._index.cache_clear()

    def detect_batch(self, calls: Sequence[LLMCall]) -> list[DetectorResult]:
        """Check each call; pure CPU work, so a batch is a loop (one bad call fails alone: run_detector)."""
        return [self._detect(call) for call in calls]

    def _detect(self, call: LLMCall) -> DetectorResult:
        config = self._config
        grounding = call.grounding_text
        if not grounding.strip():
            return self.skipped_result("no grounding context to check against", self._threshold)
        answer = call.answer[: config.max_answer_chars]
        mentions = list(extract_claims(answer))
        if config.check_names:
            names = extract_names(answer, mentions)
            mentions += [name for name in names if len(name.text.split()) >= config.min_name_words]
        context = self._index(grounding[: config.max_context_chars])
        statements = flag_statements(answer, context.flags)
        if not mentions and not statements:
            return self.skipped_result("nothing checkable in the answer", self._threshold)
        mentions = sorted(mentions, key=lambda mention: mention.start)[:_MAX_CLAIMS_CHECKED]
        question = self._index(call.prompt[: config.max_context_chars])
        claims = [self._verdict(mention, answer, context, question) for mention in mentions]
        claims += [_flag_claim(statement, answer) for statement in statements[:_MAX_CLAIMS_CHECKED]]
        evidence = _evidence(claims, context.text, truncated=len(grounding) > config.max_context_chars)
        return self.scored_result(
            self._score(claims),
            self._threshold,
            severity=4 if evidence["conflicts"] else 2,
            summary=_summary(claims),
            evidence=evidence,
        )

    def _verdict(self, mention: Mention, answer: str, context: _Context, question: _Context) -> _Claim:
        if mention.kind is Kind.NAME:
            known = _name_supported(mention.text, (context, question))
            return _Claim(mention, Verdict.SUPPORTED if known else Verdict.UNSUPPORTED)
        if _stated(mention, (context, question), self._config.relative_tolerance):
            return _Claim(mention, Verdict.SUPPORTED)
        rival = self._rival(mention, answer, context)
        return _Claim(mention, Verdict.UNSUPPORTED if rival is None else Verdict.CONFLICT, rival)

    def _rival(self, mention: Mention, answer: str, context: _Context) -> Mention | None:
        """The same-family context value whose surroundings best overlap the mention's, if any overlap enough.

        A date whose day and month the context states, but not its year, is compared with the context's
        years: "June 14, 1999" against "on 14 June. [...] That was in 1998" is a conflict.
        """
        window, min_shared = self._config.context_window_words, self._config.conflict_min_shared_words
        rival = None
        if _only_year_unstated(mention, context):
            rival = closest_value(replace(mention, family="year"), answer, context, window, min_shared)
        rival = rival or closest_value(mention, answer, context, window, min_shared)
        return rival.mention if rival else None

    def _score(self, claims: Iterable[_Claim]) -> float:
        config = self._config
        weights = {
            Verdict.CONFLICT: config.conflict_weight,
            Verdict.UNSUPPORTED: config.unsupported_weight,
            Verdict.SUPPORTED: 0.0,
        }
        distinct = {_claim_key(claim): claim for claim in claims}.values()
        keep = 1.0
        for claim in distinct:
            weight = weights[claim.verdict]
            if claim.verdict is Verdict.UNSUPPORTED and claim.mention.kind is Kind.NAME:
                weight = config.name_weight
            elif claim.verdict is Verdict.UNSUPPORTED and _is_count(claim.mention, config.max_count):
                weight = config.count_weight
            keep *= 1.0 - weight
        return 1.0 - keep


def index_values(text: str) -> ValueIndex:
    """Extract and index a text's values (uncached: callers keep their own cache)."""
    mentions = extract_values(text)
    words = frozenset(_words(text)) | {"".join(_words(found)) for found in _COMPOUND.findall(text)}
    by_family: dict[str, list[Mention]] = {}
    for mention in mentions:
        by_family.setdefault(mention.family, []).append(mention)
    return _Context(
        text=text,
        by_family=by_family,
        amounts=sorted(amount for mention in mentions for amount in mention.amounts),
        plain_amounts=sorted(amount for mention in mentions if mention.kind in _UNITLESS for amount in mention.amounts),
        words=words,
        sorted_words=tuple(sorted(words)),
    )


@dataclass(frozen=True, slots=True)
class Rival:
    """A context value of an answer value's family, and how many content words their surroundings share."""

    mention: Mention
    shared: int


def closest_value(mention: Mention, answer: str, context: ValueIndex, window: int, min_shared: int) -> Rival | None:
    """The same-family value of ``context`` whose surroundings best overlap the answer mention's.

    Surroundings are the content words within ``window`` words either side; None unless
    at least ``min_shared`` are shared.  A bare number also needs the same first word after
    it (what it counts: "94 *points*").
    """
    candidates = context.comparable_values(mention.family)[:_MAX_RIVALS_COMPARED]
    if not candidates:
        return None
    around = _window_stems(answer, mention, window)
    head = _head_stem(answer, mention) if mention.kind is Kind.NUMBER else None
    best, best_shared = None, min_shared - 1
    for candidate in candidates:
        if head is not None and context.head_stem(candidate) != head:
            continue
        shared = len(around & context.window_stems(candidate, window))
        if shared > best_shared:
            best, best_shared = candidate, shared
    return Rival(best, best_shared) if best is not None else None


@dataclass(frozen=True, slots=True)
class StatedValue:
    """A checkable value of an answer (number, date, time, quantity...) and whether a text states it."""

    start: int
    end: int
    stated: bool


def stated_values(answer: str, indexes: Sequence[ValueIndex], tolerance: float = 0.02) -> list[StatedValue]:
    """Each value of ``answer`` with whether one of the indexed texts (:func:`index_values`) states it."""
    return [
        StatedValue(m.start, m.end, _stated(m, indexes, tolerance))
        for m in extract_claims(answer)[:_MAX_CLAIMS_CHECKED]
    ]


def _stated(claim: Mention, indexes: Sequence[_Context], relative_tolerance: float) -> bool:
    """Whether one of the indexed texts states the claim's value; only approximate kinds get the tolerance."""
    tolerance = relative_tolerance if claim.kind in _APPROXIMATE else 0.0
    return any(_supported(claim, index, tolerance) for index in indexes)


def _supported(claim: Mention, context: _Context, tolerance: float) -> bool:
    """Whether ``context`` states the claim's value (see the module docstring for the rules)."""
    if claim.kind is Kind.DATE:
        return _date_supported(claim, context)
    if claim.kind is Kind.SCORE:
        return _score_stated(claim, context)
    values = context.comparable_values(claim.family)
    if all(
        any(_covers(found, value, claim.precision, tolerance) for found in values) for value in (claim.low, claim.high)
    ):
        return True
    written = context.amounts if claim.kind in _UNITLESS else context.plain_amounts
    return all(_in_sorted(written, amount, claim.precision, tolerance) for amount in claim.amounts)


def _score_stated(claim: Mention, context: _Context) -> bool:
    """Whether the context states a score: the same score, its sides in the same order ("4-1" is not "1-4").

    A text that writes no score states one by both its sides written as numbers (a record's "home": 4, "away": 1).
    """
    sides = (claim.low, claim.high)
    scores = context.by_family.get(claim.family)
    if scores:
        return any((found.low, found.high) == sides for found in scores)
    return all(_in_sorted(context.plain_amounts, side, 0.0, 0.0) for side in sides)


def _covers(found: Mention, value: float, precision: float, tolerance: float) -> bool:
    return found.low <= value <= found.high or any(
        _close(value, end, precision, tolerance) for end in (found.low, found.high)
    )


def _close(value: float, other: float, precision: float, tolerance: float) -> bool:
    return abs(value - other) <= max(tolerance * max(abs(value), abs(other)), precision)


def _in_sorted(values: list[float], value: float, precision: float, tolerance: float) -> bool:
    slack = max(tolerance * abs(value), precision)
    index = bisect_left(values, value - slack)
    return index < len(values) and values[index] <= value + slack


def _date_supported(claim: Mention, context: _Context) -> bool:
    """A date is supported by a context date stating at least its parts, with the same values.

    A full date is also supported by its month and day written without a year ("on Tuesday,
    November 2") when the context states its year elsewhere, in another sentence or in the
    page's own date: pages and articles date events within the year they were written in.  A
    month and year ("August 2019") is not: a day of that August and a year anywhere on a page
    full of dates say too little.
    """
    parts = claim.family.partition(":")[2]
    if _date_stated(claim, parts, context):
        return True
    return _only_year_unstated(claim, context) and _years_stated(claim, context)


def _date_stated(claim: Mention, parts: str, context: _Context) -> bool:
    """Whether a context date states at least ``parts`` of the claim, with the same values."""
    wanted = (_date_parts(claim.low, parts), _date_parts(claim.high, parts))
    for family, found in context.by_family.items():
        if family.startswith("date:") and set(parts) <= set(family[5:]):
            ends = [(_date_parts(mention.low, parts), _date_parts(mention.high, parts)) for mention in found]
            if all(any(low <= value <= high for low, high in ends) for value in wanted):
                return True
    return False


def _only_year_unstated(claim: Mention, context: _Context) -> bool:
    """Whether a full date's month and day are in a context date that writes no year."""
    return claim.family == "date:ymd" and _date_stated(claim, "md", context)


def _years_stated(claim: Mention, context: _Context) -> bool:
    """Whether the context states the claim's year(s), as a year or in a date."""
    years = {int(claim.low) // 10000, int(claim.high) // 10000}
    stated = {y for m in context.by_family.get("year", []) for y in range(int(m.low), int(m.high) + 1)}
    for family, found in context.by_family.items():
        if family.startswith("date:") and "y" in family[5:]:
            stated |= {int(m.low) // 10000 for m in found} | {int(m.high) // 10000 for m in found}
    return years <= stated


def _date_parts(value: float, parts: str) -> int:
    """Keep only the ``parts`` (y, m, d) of a ``yyyymmdd`` value."""
    whole = int(value)
    year, month, day = whole // 10000, whole // 100 % 100, whole % 100
    return (year if "y" in parts else 0) * 10000 + (month if "m" in parts else 0) * 100 + (day if "d" in parts else 0)


def _window_stems(text: str, mention: Mention, words: int) -> frozenset[str]:
    """Content words within ``words`` words either side of a mention, cut to their first letters."""
    reach = words * 15
    before = _words(text[max(0, mention.start - reach) : mention.start])[-words:]
    after = _words(text[mention.end : mention.end + reach])[:words]
    return frozenset(word[:_STEM_CHARS] for word in before + after if word not in _STOPWORDS and len(word) > 1)


def _known(word: str, context: _Context) -> bool:
    """A name word occurs in the context, or another form of it does (:func:`detectors.text.prose.same_word`)."""
    if word in context.words:
        return True
    stem = word[: max(MIN_STEM_CHARS, len(word) - INFLECTION_CHARS)]
    if len(stem) < MIN_STEM_CHARS:
        return False
    at = bisect_left(context.sorted_words, stem)
    for other in itertools.islice(context.sorted_words, at, None):
        if not other.startswith(stem):
            return False
        if same_word(word, other):
            return True
    return False


def _head_stem(text: str, mention: Mention) -> str:
    """The first content word after a mention: what a bare number counts ("94 *points*"); "" when none."""
    following = _words(text[mention.end : mention.end + 40])[:3]
    return next((word[:_STEM_CHARS] for word in following if word not in _STOPWORDS and len(word) > 1), "")


def _name_supported(name: str, texts: Sequence[_Context]) -> bool:
    """Whether the texts state a name: each word, or each run of missing words written another way."""
    words = [word for word in _WORD.findall(unicodedata.normalize("NFC", name)) if len(word) > 1]
    folded = ["".join(_words(word)) for word in words]
    missing = [not any(_known(word, text) for text in texts) for word in folded]
    if not any(missing) or any("".join(folded) in text.words for text in texts):  # "Wi-Fi" / "WiFi"
        return True
    if _written_otherwise(words, texts):
        return True
    pairs = itertools.groupby(zip(words, missing, strict=True), key=lambda pair: pair[1])
    return all(_written_otherwise([word for word, _ in run], texts) for gone, run in pairs if gone)


def _written_otherwise(words: Sequence[str], texts: Sequence[_Context]) -> bool:
    """Whether a text writes these name words as an acronym, an expansion or a postal code."""
    phrase = " ".join("".join(_words(word)) for word in words)
    acronym = words[0] if len(words) == 1 and words[0].isupper() else None
    for text in texts:
        if region_codes(phrase) & text.forms.acronyms:  # "California" where the text says "CA"
            return True
        if len(words) > 1 and initials(words) & text.forms.acronyms:  # "European Union" / "EU"
            return True
        if acronym is not None and (
            acronym.lower() in text.forms.initials  # "EU" / "European Union"
            or any(all(word in text.words for word in region.split()) for region in region_names(acronym))
        ):
            return True
    return False


def _words(text: str) -> list[str]:
    """The letter runs of ``text`` without case or accents: "Zürich" -> "zurich", "Straße" -> "strasse".

    An answer may write a name as its context does not: without an accent, "ss" for "ß", in
    decomposed or full-width characters.  Accents come off decomposed text, which is then
    composed again so that Hangul syllables stay whole.
    """
    if text.isascii():
        return _WORD.findall(text.lower())
    bare = unicodedata.normalize("NFKD", text.casefold()).translate(_ACCENTS)
    return _WORD.findall(unicodedata.normalize("NFC", bare))


def _flag_claim(statement: FlagStatement, answer: str) -> _Claim:
    """What the answer says of a yes/no field: supported when it keeps the field's value, else a conflict."""
    written = statement.flag
    where = float(written.start)  # the field's identity: one field stated twice is one claim
    said = Mention(Kind.FLAG, statement.start, statement.end, answer[statement.start : statement.end],
                   where, where, family="flag")  # fmt: skip
    if statement.agrees:
        return _Claim(said, Verdict.SUPPORTED)
    return _Claim(said, Verdict.CONFLICT, Mention(Kind.FLAG, written.start, written.end, written.text, family="flag"))


def _is_count(mention: Mention, largest: int) -> bool:
    """A small whole number without a unit: what an answer may have counted itself."""
    value = mention.low
    return mention.kind is Kind.NUMBER and mention.high == value and value.is_integer() and 0 <= value <= largest


def _claim_key(claim: _Claim) -> tuple[str, float, float, str]:
    """Identity of a claim for scoring: the same value stated twice is one claim."""
    found = claim.mention
    return (found.family, found.low, found.high, found.text.lower() if found.kind is Kind.NAME else "")


def _evidence(claims: list[_Claim], context: str, *, truncated: bool) -> dict[str, Any]:
    flagged = [claim for claim in claims if claim.verdict is not Verdict.SUPPORTED]
    ordered = sorted(claims, key=lambda claim: (claim.verdict is Verdict.SUPPORTED, claim.verdict, claim.mention.start))
    return {
        "claims": [claim.to_evidence(context) for claim in ordered[:MAX_CLAIMS_LISTED]],
        "checked": len(claims),
        "conflicts": sum(claim.verdict is Verdict.CONFLICT for claim in claims),
        "unsupported": sum(claim.verdict is Verdict.UNSUPPORTED for claim in claims),
        "spans": [
            {"start": claim.mention.start, "end": claim.mention.end, "text": clip(claim.mention.text, _MAX_TEXT_CHARS)}
            for claim in flagged[:MAX_SPANS_LISTED]
        ],
        "context_truncated": truncated,
    }


def _summary(claims: list[_Claim]) -> str:
    conflicts = [claim for claim in claims if claim.verdict is Verdict.CONFLICT]
    unsupported = [claim for claim in claims if claim.verdict is Verdict.UNSUPPORTED]
    if conflicts:
        first, rival = conflicts[0].mention, conflicts[0].rival
        line = f"answer says {first.text}, context says {rival.text if rival else '?'}"
    elif unsupported:
        line = f"answer says {unsupported[0].mention.text}, context does not"
    else:
        return f"all {len(claims)} checked values and names found in the context"
    others = len(conflicts) + len(unsupported) - 1
    return (line + (f" (+{others} more)" if others else ""))[:500]


def render_evidence(evidence: Mapping[str, Any]) -> list[str]:
    """Its evidence as lines for people, in alerts."""
    conflicts: list[str] = []
    unsupported: list[str] = []
    for claim in shown.records(evidence.get("claims")):
        said = shown.quoted(claim.get("text"))
        if said and claim.get("verdict") == "conflict":
            other = shown.quoted(claim.get("context_text"))
            conflicts.append(f"answer says {said}, context says {other or 'something else'}")
        elif said and claim.get("verdict") == "unsupported":
            unsupported.append(f"answer says {said}, not found in the context")
    lines = conflicts + unsupported  # conflicts first: they are the stronger evidence
    return lines[: shown.EVIDENCE_ITEMS] + shown.more(len(lines), shown.EVIDENCE_ITEMS, "claim(s)")


def build(ing: Ingredients) -> ContradictionDetector:
    """The detector, from its settings and threshold."""
    return ContradictionDetector(ing.config(DETECTOR), ing.threshold)
