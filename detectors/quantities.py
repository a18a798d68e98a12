"""Checkable mentions in free text: numbers, years, dates, times, quantities, money, names.

The contradiction detector (SPEC §4.2) compares what an answer states with what its
context states, so both sides go through the same extractor and compare normalized
values.  Regexes and small tables, no parser library and no model: the detector must
keep up with thousands of answers per second, and every verdict must be explainable
from the text alone.

Trade-offs, stated because each one costs recall for precision or speed:

* English notation only (``1,234.5``; month names in English).  Other scripts still
  yield their Arabic-numeral numbers: word boundaries are ASCII, so ``建于1950年``
  gives ``1950``.
* Overlapping candidates are resolved leftmost-longest, so ``March 3, 1999`` is one
  date, not two numbers, and ``$5 million`` one amount.
* Two values joined by ``-``, ``to``, ``through`` or ``between … and`` become one
  range; a unit or scale written once applies to both ends (``5-10 km``, ``2 to 3
  million``).  ``and`` joins only after ``between``.
* Fractions and ratios (``1/2``, ``24/7``), citation markers (``[1]``), list markers
  (``1.`` at a line start) and references such as ``passage 2`` are not claims and are
  skipped.  Numbers glued to letters (``COVID-19``, ``3D``, ``F-16``) are identifiers,
  not quantities.
* Units are normalized to one base unit per dimension (metres, seconds, bytes, …),
  with the factors of ``data/units.yaml``; ``month`` and ``year`` durations use average
  lengths.  Temperatures are kept in °C.
* Dates keep which parts were written (year, month, day), so ``March 1999`` is not
  confused with ``March 3``.
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from enum import StrEnum
from importlib import resources
from typing import Final

import yaml


class Kind(StrEnum):
    """What a mention states; values are stored in evidence, so they are stable names."""

    NUMBER = "number"
    YEAR = "year"
    DATE = "date"
    TIME = "time"
    PERCENT = "percent"
    MONEY = "money"
    QUANTITY = "quantity"
    NAME = "name"


@dataclass(frozen=True, slots=True)
class Mention:
    """One checkable statement found in a text, with its char offsets into that text.

    ``low``/``high`` are the normalized value (equal unless the mention is a range): base
    units for quantities, minutes after midnight for times, ``yyyymmdd`` with unknown
    parts as 0 for dates.  ``amounts`` are the numbers as written (scale applied, unit
    not), so a unitless ``330`` can be matched against ``330 meters``.  ``family``
    decides what a mention may conflict with: the kind plus dimension, currency or the
    written date parts.  ``precision`` is the half-unit of the last significant digit
    (0 when a value has fewer than two significant digits), so a rounded answer
    (``3.2 million``) still matches an exact context value (``3,215,000``).
    """

    kind: Kind
    start: int
    end: int
    text: str
    low: float = 0.0
    high: float = 0.0
    family: str = ""
    amounts: tuple[float, ...] = ()
    precision: float = 0.0


# --------------------------------------------------------------------------- tables

_SCALES: Final = {"thousand": 1e3, "k": 1e3, "million": 1e6, "mn": 1e6, "m": 1e6, "billion": 1e9, "bn": 1e9,
                  "b": 1e9, "trillion": 1e12, "tn": 1e12}  # fmt: skip


def _load_units() -> dict[str, tuple[str, float]]:
    """Read ``data/units.yaml``: unit as written (lowercase for words) -> (dimension, factor to the base unit)."""
    document = yaml.safe_load(resources.files("detectors.data").joinpath("units.yaml").read_text("utf-8"))
    units: dict[str, tuple[str, float]] = {}
    for dimension, entries in document.items():
        for entry in entries:
            factor = entry["factor"]
            # A string here is usually an exponent PyYAML did not take for a number (1e3).
            if not isinstance(factor, int | float) or isinstance(factor, bool) or factor <= 0:
                raise ValueError(
                    f"units.yaml: {dimension} {entry['names']}: factor {factor!r} is not a positive number"
                )
            for name in entry["names"]:
                if not isinstance(name, str) or name in units:
                    raise ValueError(f"units.yaml: {dimension}: unit {name!r} is not a new name")
                units[name] = (dimension, float(factor))
    return units


_UNITS: Final = _load_units()

_TEMPERATURE: Final[dict[str, Callable[[float], float]]] = {
    "°c": lambda value: value,
    "°f": lambda value: (value - 32.0) * 5.0 / 9.0,
    "degrees celsius": lambda value: value,
    "degrees fahrenheit": lambda value: (value - 32.0) * 5.0 / 9.0,
}
_PERCENT_UNITS: Final = frozenset({"%", "percent", "per cent", "pct", "percentage point", "percentage points"})
_CURRENCIES: Final = {
    "$": "USD", "us$": "USD", "usd": "USD", "dollar": "USD", "dollars": "USD",
    "€": "EUR", "eur": "EUR", "euro": "EUR", "euros": "EUR",
    "£": "GBP", "gbp": "GBP", "¥": "JPY", "jpy": "JPY", "yen": "JPY",
    "₹": "INR", "inr": "INR", "rupees": "INR", "rs": "INR", "rs.": "INR",
    "cad": "CAD", "c$": "CAD", "aud": "AUD", "a$": "AUD", "chf": "CHF", "cny": "CNY", "yuan": "CNY",
}  # fmt: skip
# Units that are case-sensitive symbols: "m" is a metre, "M" is not; "MB"/"Mb" both mean data here.
_SYMBOL_UNITS: Final = ("mm", "cm", "m", "km", "ft", "yd", "mi", "m2", "m²", "km2", "km²", "ha", "mg", "g", "kg",
                        "lb", "lbs", "oz", "ms", "s", "h", "hr", "hrs", "min", "mins", "sec", "secs", "yr", "yrs",
                        "ml", "mL", "l", "L", "W", "kW", "MW", "GW", "Wh", "kWh", "MWh", "GWh", "Hz", "kHz", "MHz",
                        "GHz", "KB", "kB", "MB", "GB", "TB", "KiB", "MiB", "GiB", "TiB", "°C", "°F", "°", "%",
                        "km/h", "m/s", "kph", "mph", "kcal")  # fmt: skip
_WORD_UNITS: Final = sorted(
    (name for name in [*_UNITS, *_TEMPERATURE, *_PERCENT_UNITS, *_CURRENCIES] if len(name) > 2 and name.isascii()),
    key=len,
    reverse=True,
)
_NUMBER_WORDS: Final = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10,
    "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15, "sixteen": 16, "seventeen": 17,
    "eighteen": 18, "nineteen": 19, "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60,
    "seventy": 70, "eighty": 80, "ninety": 90, "hundred": 100, "dozen": 12,
}  # fmt: skip
_MONTHS: Final = {"jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6, "jul": 7, "aug": 8, "sep": 9, "oct": 10,
                  "nov": 11, "dec": 12}  # fmt: skip
_YEAR_RANGE: Final = (1500, 2100)


def _alternation(words: list[str] | tuple[str, ...]) -> str:
    return "|".join(re.escape(word).replace(r"\ ", r"\s+") for word in sorted(words, key=len, reverse=True))


# --------------------------------------------------------------------------- regexes

# Every pattern starts with a character class and checks what precedes it only after that first
# character: Python's engine then skips to candidate positions instead of trying each one (4x faster).
# Boundaries are ASCII on purpose: CJK characters are \w in Python, and "于1950年" must still yield 1950.
_DIGIT_START = r"\d(?<![A-Za-z0-9_.,/:]\d)(?<![A-Za-z]-\d)"  # not inside a word, number, code or fraction
_NOT_BEFORE = r"(?![A-Za-z0-9])"
_NUM = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"
_ONES_WORDS = "one|two|three|four|five|six|seven|eight|nine"
_WORD_NUM = (
    rf"(?:(?:twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety)(?:(?:\s*-\s*|\s)(?:{_ONES_WORDS}))?"
    r"|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|sixteen|seventeen"
    r"|eighteen|nineteen|dozen)\b"
)
_SCALE_WORD = r"(?i:thousand|million|billion|trillion|bn|mn|tn)"
_UNIT = rf"(?:{_alternation(_SYMBOL_UNITS)}|(?i:{_alternation(_WORD_UNITS)}))"
_CURRENCY_SYMBOL = r"(?:US\$|C\$|A\$|[$€£¥₹])"
_CURRENCY_BEFORE = re.compile(rf"{_CURRENCY_SYMBOL}\s?\Z")
# After the first number: an optional second one making a range, then scale and unit shared by both.
_AMOUNT_TAIL = rf"""
    (?P<ord>st|nd|rd|th)?
    (?:\s*(?:-|\u2013|\u2014|(?i:to|through)|(?(between)(?i:and)|(?!)))\s*{_CURRENCY_SYMBOL}?
       (?P<num2>{_NUM}|(?i:{_WORD_NUM}))(?:st|nd|rd|th)?)?
    (?:\s?(?P<scale>{_SCALE_WORD}\b|(?<=\d)(?:[kKmMbB]|bn|mn)(?![A-Za-z])))?
    (?:[ \t]?(?P<unit>{_UNIT}))?
    {_NOT_BEFORE}"""
_AMOUNT = re.compile(
    rf"""(?P<num>\d(?P<between>(?<=[Bb]etween\s\d))?(?<![A-Za-z0-9_.,/:]\d)(?<![A-Za-z]-\d)
    (?:\d{{0,2}}(?:,\d{{3}})+|\d*)(?:\.\d+)?){_AMOUNT_TAIL}""",
    re.VERBOSE,
)
_WORD_AMOUNT = re.compile(
    rf"""(?P<num>[TtFfSsEeNnDd](?<![A-Za-z][A-Za-z])(?P<between>(?<=[Bb]etween\s.))?
    (?i:(?<=t)(?:wo|hree|en|welve|hirteen|wenty|hirty)|(?<=f)(?:our|ive|ourteen|ifteen|orty|ifty)
       |(?<=s)(?:ix|even|ixteen|eventeen|ixty|eventy)|(?<=e)(?:ight|leven|ighteen|ighty)|(?<=n)(?:ine|ineteen|inety)
       |(?<=d)ozen)
    (?:(?<=ty)(?:\s*-\s*|\s)(?:{_ONES_WORDS}))?\b){_AMOUNT_TAIL}""",
    re.VERBOSE,
)
_MONTH = (
    r"(?:(?<=J)(?:an(?:uary)?|une?|uly?)|(?<=F)eb(?:ruary)?|(?<=M)(?:ar(?:ch)?|ay)|(?<=A)(?:pr(?:il)?|ug(?:ust)?)"
    r"|(?<=S)ep(?:t(?:ember)?)?|(?<=O)ct(?:ober)?|(?<=N)ov(?:ember)?|(?<=D)ec(?:ember)?)\.?"
)
_MONTH_START = r"[JFMASOND](?<![A-Za-z][A-Z])"
_DAY = r"(?:[12]\d|3[01]|0?[1-9])(?:st|nd|rd|th)?"
_DATES: Final = (
    re.compile(rf"(?P<month>{_MONTH_START}{_MONTH})\s+(?P<day>{_DAY})\b(?:,?\s+(?P<year>\d{{4}})\b)?"),
    re.compile(
        rf"(?P<day>{_DIGIT_START}\d?(?:st|nd|rd|th)?)(?:\s+of)?\s+(?P<month>{_MONTH_START}{_MONTH})\b"
        rf"(?:,?\s+(?P<year>\d{{4}})\b)?"
    ),
    re.compile(rf"(?P<month>{_MONTH_START}{_MONTH}),?\s+(?P<year>\d{{4}})\b"),
    re.compile(
        r"(?P<year>\d(?<![\d/.-]\d)\d{3})([-/.])(?P<month>0?[1-9]|1[0-2])\2(?P<day>[12]\d|3[01]|0?[1-9])(?![\d/-])(?!\.\d)"
    ),
    re.compile(r"(?P<month>\d(?<![\d/.-]\d)\d?)/(?P<day>[12]\d|3[01]|0?[1-9])/(?P<year>\d{4})(?![\d/])"),
)
_TIME = re.compile(
    r"(?P<hour>\d(?<![A-Za-z0-9_.,/:]\d)\d?)(?::(?P<minute>[0-5]?\d)(?::\d\d)?)?"
    r"(?:\s?(?P<ampm>(?i:[ap]\.m\.|[ap]m)))?(?![A-Za-z0-9:])"
)
# Spans that look numeric but state nothing checkable: fractions/ratios, citations, references, list
# markers, and lengths of the answer itself ("a summary in 55 words").  Digit runs are entered at
# their first digit only: tried from every digit of a long run, each alternative rescans the rest.
_NOT_CLAIMS = re.compile(
    r"(?<!\d)\d+\s?/\s?\d+|\[\s*\d+(?:\s*[,\u2013-]\s*\d+)*\s*\]|【\d+】"
    r"|(?i:\b(?:passages?|documents?|docs?|sources?|snippets?|results?|references?|context|figure|fig\.|table)\s+\d+)"
    r"|(?i:\b(?:options?|steps?|items?)\s+\d+)"
    r"|(?i:(?<!\d)\d+\s+(?:words|sentences|characters|bullet\s+points)\b)"
    r"|^[ \t]*\(?\d+[.)]\s",
    re.MULTILINE,
)
_RANGE_JOIN = re.compile(r"\s*(?:-|\u2013|\u2014|to|through|until|till)\s*", re.IGNORECASE)

_NAME_TOKEN = r"[A-ZÀ-ÖØ-Þ][A-Za-zÀ-ÖØ-öø-ÿ]*(?:['\u2019-][A-Za-zÀ-ÖØ-öø-ÿ]+)*"  # noqa: S105 - a regex of name tokens, not a password
_NAME_LINK = r"(?:of|de|da|del|der|van|von|la|le|du|bin|al|and|&)"  # "Bank of America", "Ludwig van Beethoven"
_NAME = re.compile(rf"(?<![\w'\u2019-])(?P<name>{_NAME_TOKEN}(?:[ ](?:{_NAME_LINK}[ ])?{_NAME_TOKEN})*)")
_LEADING_MARKS = frozenset(" \t\"'\u201c\u2018([*#>\u2022\u2013-")  # quotes, brackets, bullets
_SENTENCE_ENDS = frozenset(".!?:;\n\r")


# --------------------------------------------------------------------------- builders


def _parse_number(text: str) -> float:
    words = text.lower().replace("-", " ").split()
    if words[0] in _NUMBER_WORDS:
        return float(sum(_NUMBER_WORDS.get(word, 0) for word in words))
    return float(text.replace(",", ""))


def _precision(num_text: str, factor: float) -> float:
    """Half a unit of the last significant digit, times ``factor``; 0 below two significant digits.

    ``3.2`` and ``15,000`` were rounded by whoever wrote them, so a context value that
    rounds to them matches; ``200`` (one significant digit) says too little to allow that.
    """
    digits = num_text.replace(",", "")
    if not digits[:1].isdigit():
        return 0.0
    whole, _, fraction = digits.partition(".")
    if fraction:
        significant, step = (whole + fraction).lstrip("0"), 10.0 ** -len(fraction)
    else:
        significant, step = whole.strip("0"), 10.0 ** (len(whole) - len(whole.rstrip("0")))
    return step * factor / 2 if len(significant) >= 2 else 0.0


def _amount_mention(match: re.Match[str]) -> Mention:
    """A number or number range with its optional currency, scale and unit."""
    start, unit, scale_text = match.start(), match["unit"], match["scale"] or ""
    symbol = _CURRENCY_BEFORE.search(match.string, max(0, start - 4), start)
    currency = symbol[0].strip() if symbol else None
    if scale_text == "m" and not currency:
        unit, scale_text = unit or "m", ""  # "5m" without a currency is metres; "5M" is a million
    scale = _SCALES.get(scale_text.lower(), 1.0)
    texts = [text for text in (match["num"], match["num2"]) if text]
    low, high = (_parse_number(text) * scale for text in (texts[0], texts[-1]))
    # The regex already told case-sensitive symbols apart ("m" matched, "M" did not); tables are lowercase.
    key = " ".join(unit.lower().split()) if unit else ""
    if key == "s" and match.string[match.start("unit") - 1].isalnum():
        key = ""  # "1990s", "90s": a plural, not seconds
    amounts = (low, high)
    factor, year_end = 1.0, _year_range_end(texts, low, high) if scale == 1.0 else 0.0
    if currency or key in _CURRENCIES:
        kind, family = Kind.MONEY, f"money:{_CURRENCIES[(currency or key).lower()]}"
    elif key in _PERCENT_UNITS:
        kind, family = Kind.PERCENT, "percent"
    elif key in _TEMPERATURE:
        kind, family = Kind.QUANTITY, "quantity:temperature"
    elif key in _UNITS:
        dimension, factor = _UNITS[key]
        kind, family = Kind.QUANTITY, f"quantity:{dimension}"
    elif year_end:
        kind, family, high = Kind.YEAR, "year", year_end
        amounts = (low, high)
    else:
        kind, family = Kind.NUMBER, "number"
    to_celsius = _TEMPERATURE.get(key)
    exact = kind is Kind.YEAR or to_celsius is not None  # years are never rounded; conversions carry their own error
    start = symbol.start() if symbol else start
    low, high = sorted(to_celsius(value) if to_celsius else value * factor for value in (low, high))
    return Mention(
        kind=kind,
        start=start,
        end=match.end(),
        text=match.string[start : match.end()],
        low=low,
        high=high,
        family=family,
        amounts=tuple(dict.fromkeys(amounts)),
        precision=0.0 if exact else max(_precision(text, scale * factor) for text in texts),
    )


def _is_year(text: str) -> bool:
    return text.isdigit() and len(text) == 4 and _YEAR_RANGE[0] <= int(text) <= _YEAR_RANGE[1]


def _year_range_end(texts: list[str], low: float, high: float) -> float:
    """The last year of a year or year range (``2020-21`` ends in 2021); 0 when not years."""
    if not _is_year(texts[0]):
        return 0.0
    if _is_year(texts[-1]):
        return high
    end = low // 100 * 100 + high
    return end if len(texts[-1]) == 2 and texts[-1].isdigit() and end > low else 0.0


def _time_mention(match: re.Match[str]) -> Mention | None:
    """A time of day in minutes after midnight; a bare number with neither minutes nor am/pm is not one."""
    minute, ampm = match["minute"], (match["ampm"] or "").lower()
    if minute is None and not ampm:
        return None
    hour = int(match["hour"])
    if hour > 24:
        return None
    if ampm.startswith("p") and hour < 12:
        hour += 12
    elif ampm.startswith("a") and hour == 12:
        hour = 0
    value = float(hour * 60 + int(minute or 0))
    return Mention(Kind.TIME, match.start(), match.end(), match[0], value, value, "time", (float(match["hour"]),))


def _date_mention(match: re.Match[str]) -> Mention | None:
    """A calendar date; its family names the parts written, so ``March 1999`` never meets ``March 3``."""
    groups = match.groupdict()
    month_text = groups["month"]
    month = int(month_text) if month_text.isdigit() else _MONTHS[month_text[:3].lower()]
    day = int(groups["day"].rstrip("stndrh")) if groups.get("day") else 0
    year = int(groups["year"]) if groups.get("year") else 0
    if (year and not _YEAR_RANGE[0] <= year <= _YEAR_RANGE[1]) or not 1 <= month <= 12 or day > 31:
        return None
    parts = "".join(name for name, value in (("y", year), ("m", month), ("d", day)) if value)
    value = float(year * 10000 + month * 100 + day)
    amounts = tuple(float(part) for part in (day, year) if part)
    return Mention(Kind.DATE, match.start(), match.end(), match[0], value, value, f"date:{parts}", amounts)


_EXTRACTORS: Final[tuple[tuple[re.Pattern[str], Callable[[re.Match[str]], Mention | None]], ...]] = (
    *((pattern, _date_mention) for pattern in _DATES),
    (_TIME, _time_mention),
    (_AMOUNT, _amount_mention),
    (_WORD_AMOUNT, _amount_mention),
)


# --------------------------------------------------------------------------- extraction


def extract_claims(text: str) -> list[Mention]:
    """The numeric mentions of an answer that state something: no citations, list markers, fractions."""
    blocked = _Spans((found.start(), found.end()) for found in _NOT_CLAIMS.finditer(text))
    return [mention for mention in extract_values(text) if not blocked.overlap(mention.start, mention.end)]


def extract_values(text: str) -> list[Mention]:
    """Every numeric mention of ``text`` (all kinds but names), in text order, ranges merged."""
    candidates: list[tuple[int, int, int, Mention]] = []
    for priority, (pattern, build) in enumerate(_EXTRACTORS):
        for match in pattern.finditer(text):
            mention = build(match)
            if mention is not None:
                candidates.append((mention.start, mention.start - mention.end, priority, mention))
    chosen: list[Mention] = []
    taken_until = 0
    for start, _, _, mention in sorted(candidates, key=lambda candidate: candidate[:3]):
        if start >= taken_until:
            chosen.append(mention)
            taken_until = mention.end
    return _merge_ranges(text, chosen)


class _Spans:
    """Character spans that answer "does any overlap this range?" in O(log n).

    Texts with thousands of mentions are fine; comparing each with each would be quadratic.
    """

    def __init__(self, spans: Iterable[tuple[int, int]]) -> None:
        ordered = sorted(spans)
        self._starts = [start for start, _ in ordered]
        self._ends_so_far = list(itertools.accumulate((end for _, end in ordered), max))

    def overlap(self, start: int, end: int) -> bool:
        """Whether a span starting before ``end`` reaches past ``start``."""
        before = bisect.bisect_left(self._starts, end)
        return bool(before) and self._ends_so_far[before - 1] > start


def _merge_ranges(text: str, mentions: list[Mention]) -> list[Mention]:
    """Join two single values of one family written as ``A - B`` or ``A to B`` into a range.

    Ranges sharing one unit (``5-10 km``) are matched by the amount pattern itself; this
    joins those whose ends each carry one: dates, times, ``5% to 10%``.
    """
    merged: list[Mention] = []
    for mention in mentions:
        previous = merged[-1] if merged else None
        if (
            previous is not None
            and previous.family == mention.family
            and previous.low == previous.high
            and mention.low == mention.high
            and _RANGE_JOIN.fullmatch(text, previous.end, mention.start)
        ):
            merged[-1] = replace(
                mention,
                start=previous.start,
                text=text[previous.start : mention.end],
                low=min(previous.low, mention.low),
                high=max(previous.high, mention.high),
                amounts=previous.amounts + mention.amounts,
                precision=max(previous.precision, mention.precision),
            )
        else:
            merged.append(mention)
    return merged


def extract_names(text: str, numeric: list[Mention]) -> Iterator[Mention]:
    """Capitalised names outside ``numeric`` mentions, first word of a sentence left out.

    A sentence's first word is capitalised whatever it is, so it is dropped from a name,
    as are leading and trailing function words (``The``, ``In``) and calendar words.
    """
    # Indices, not list slicing: "A A A ..." is one long name candidate, and stripping it
    # word by word by copying would be quadratic.
    taken = _Spans((mention.start, mention.end) for mention in numeric)
    for match in _NAME.finditer(text):
        start, words = match.start(), match["name"].split(" ")
        first, last = 0, len(words)
        if _at_sentence_start(text, start):
            start, first = start + len(words[0]) + 1, 1
        while first < last and words[first].lower() in NOT_NAMES:
            start, first = start + len(words[first]) + 1, first + 1
        while last > first and words[last - 1].lower() in NOT_NAMES:
            last -= 1
        end = start + sum(len(word) + 1 for word in words[first:last]) - 1
        if last > first and not taken.overlap(start, end):
            yield Mention(Kind.NAME, start, end, text[start:end], family="name")


def _at_sentence_start(text: str, start: int) -> bool:
    """True when only spaces, quotes, brackets or bullet marks separate ``start`` from a sentence end."""
    index = start - 1
    while index >= 0 and text[index] in _LEADING_MARKS:
        index -= 1
    return index < 0 or text[index] in _SENTENCE_ENDS


NOT_NAMES: Final = frozenset(
    """a an the this that these those there their they it its in on at of for to from by with and or but as if
    when while after before during since until however also although though because so thus then here i we you he
    she his her our your my me us him them what which who whom whose where why how all any each every some no not
    yes according overall additionally furthermore moreover finally first second third next last based note please
    mr mrs ms dr prof st monday tuesday wednesday thursday friday saturday sunday january february march april may
    june july august september october november december passage passages document documents source sources context
    answer question summary article section table figure am pm ok""".split()  # noqa: SIM905 - reads as text
)
