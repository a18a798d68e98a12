"""Checkable mentions in free text: numbers, years, dates, times, quantities, money, names.

The contradiction detector (docs/detectors.md) compares what an answer states with what its
context states, so both sides go through the same extractor and compare normalized
values.  Regexes and small tables, no parser library and no model: the detector must
keep up with thousands of answers per second, and every verdict must be explainable
from the text alone.

Trade-offs, stated because each one costs recall for precision or speed:

* Digits of any script (Arabic-Indic, full-width, …) and the common separators:
  ``1,889``, ``1.889.000``, ``1'000``, ``330 000`` with a no-break or thin space.  A comma
  is a decimal point only where it cannot group thousands and a unit, scale or currency
  follows (``3,5 km``) or dots group before it (``1.234,5``); a lone dot always is one
  (``1.889``).  Chinese numerals written with multipliers (``三百三十``, ``一千八百八十九``,
  ``三万``), CJK dates (``1889年3月31日``) and units (``米``, ``公里``, ``亿``) are read;
  digit-by-digit numerals (``一八八九年``) and ``点`` decimals are not.  Month names and
  number words are English.
* Letters with case (Latin, Greek, Cyrillic, …) make words: a number glued to one is an
  identifier (``COVID-19``, ``3D``, ``F-16``) and names are runs of them (``Friedrichstraße``,
  ``Île-de-France``).  Scripts without case do not space their words, so ``建于1950年``
  still gives ``1950`` and ``东京Tower`` the name ``Tower``.
* Overlapping candidates are resolved leftmost-longest, so ``March 3, 1999`` is one
  date, not two numbers, and ``$5 million`` one amount.
* Two values joined by ``-``, ``to``, ``through`` or ``between … and`` become one
  range; a unit or scale written once applies to both ends (``5-10 km``, ``2 to 3
  million``).  ``and`` joins only after ``between``.
* Fractions and ratios (``1/2``, ``24/7``), citation markers (``[1]``), list markers
  (``1.`` at a line start) and references such as ``passage 2`` are not claims and are
  skipped.  Comma pairs and lists (``(3,4)``, ``2,4,6``) are not decimals: only their
  first number is read.
* Units are normalized to one base unit per dimension (metres, seconds, bytes, …),
  with the factors of ``data/units.yaml``; ``month`` and ``year`` durations use average
  lengths.  Temperatures are kept in °C.
* Dates keep which parts were written (year, month, day), so ``March 1999`` is not
  confused with ``March 3``.
* Match scores and results are one value, a pair kept in written order: ``4-1`` (with any
  dash), ``four goals to one``.  Two whole numbers joined by a dash are a score where the first is
  not smaller (nobody writes a range downwards: ``4-1``, ``1-1``) or a result word is near
  (``lost 1-4``, ``a 1-3 defeat``); joined by ``to``, only with such a word (``won 4 to 1``;
  ``4 to 1 odds`` is a ratio).  ``1-4 players`` stays a range.
"""

from __future__ import annotations

import bisect
import itertools
import math
import re
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from functools import lru_cache
from importlib import resources
from typing import Final

import yaml

from detectors.text.prose import RECORD_KEY, key_words


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
    SCORE = "score"  # a match score or result: two sides in written order
    FLAG = "flag"  # a yes/no field of a structured source (detectors.text.stated_flags)


@dataclass(frozen=True, slots=True)
class Mention:
    """One checkable statement found in a text, with its char offsets into that text.

    ``low``/``high`` are the normalized value (equal unless the mention is a range): base
    units for quantities, minutes after midnight for times, ``yyyymmdd`` with unknown
    parts as 0 for dates; a score's two sides in written order (``1-4``: 1, then 4).
    ``amounts`` are the numbers as written (scale applied, unit not), so a unitless
    ``330`` can be matched against ``330 meters``.  ``family``
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

_SCALES: Final = {"dozen": 12.0, "hundred": 1e2, "thousand": 1e3, "k": 1e3, "grand": 1e3, "lakh": 1e5,
                  "lakhs": 1e5, "million": 1e6, "mn": 1e6, "mln": 1e6, "m": 1e6, "crore": 1e7, "crores": 1e7,
                  "billion": 1e9, "bn": 1e9, "b": 1e9, "trillion": 1e12, "tn": 1e12, "万": 1e4, "萬": 1e4,
                  "亿": 1e8, "億": 1e8}  # fmt: skip
# Money whose currency is only implied ("5 grand", "50 bucks": dollars of which country?): it is
# compared with an amount in any currency, so it never contradicts the currency a text states.
IMPLIED_MONEY: Final = "money"


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


def _celsius(value: float) -> float:
    return value


def _fahrenheit(value: float) -> float:
    return (value - 32.0) * 5.0 / 9.0


# "°C" with or without the sign: "25°C", "25° C", "25 ºC", "25C" (glued only: "5 C" is too often a grade or a
# type), "25 degrees C" (recipes: "350 degrees F (175 degrees C)"), "25 Celsius".  A bare "25 degrees" or
# "25°" stays an angle: it may be Celsius or Fahrenheit, and reading it as either would invent conflicts.
_TEMPERATURE: Final[dict[str, Callable[[float], float]]] = {
    **dict.fromkeys(("°c", "c", "celsius", "centigrade", "degrees celsius", "degrees centigrade", "degrees c",
                     "deg c"), _celsius),
    **dict.fromkeys(("°f", "f", "fahrenheit", "degrees fahrenheit", "degrees f", "deg f"), _fahrenheit),
}  # fmt: skip
_PERCENT_UNITS: Final = frozenset(
    {"%", "\uff05", "percent", "per cent", "pct", "percentage point", "percentage points"}
)
_CURRENCIES: Final = {
    "$": "USD", "us$": "USD", "usd": "USD", "dollar": "USD", "dollars": "USD",
    "€": "EUR", "eur": "EUR", "euro": "EUR", "euros": "EUR",
    "£": "GBP", "gbp": "GBP", "quid": "GBP", "sterling": "GBP", "¥": "JPY", "jpy": "JPY", "yen": "JPY",
    "₹": "INR", "inr": "INR", "rupee": "INR", "rupees": "INR", "rs": "INR", "rs.": "INR",
    "buck": IMPLIED_MONEY, "bucks": IMPLIED_MONEY,
    "cad": "CAD", "c$": "CAD", "aud": "AUD", "a$": "AUD", "chf": "CHF", "cny": "CNY", "yuan": "CNY",
    "元": "CNY", "人民币": "CNY", "美元": "USD", "欧元": "EUR", "日元": "JPY", "円": "JPY", "英镑": "GBP",
}  # fmt: skip
_POUNDS: Final = frozenset({"pound", "pounds"})
_STERLING: Final = re.compile(r"\s+sterling\b", re.IGNORECASE)
# A plural noun after "5m": a count in millions.  Words ending in "s" that are no plural nouns are left out.
_COUNTED: Final = re.compile(r"[ \t]?(?P<word>[a-z]{2,}[a-rt-z]s|people|children|men|women|staff)\b")
_NOT_COUNTED: Final = frozenset({"this", "thus", "plus", "does", "goes", "has", "was", "its", "always", "towards",
                                 "upwards", "downwards", "afterwards", "besides", "perhaps", "sometimes"})  # fmt: skip
# Units that are case-sensitive symbols: "m" is a metre, "M" is not; "MB"/"Mb" both mean data here.
_SYMBOL_UNITS: Final = ("mm", "cm", "m", "km", "ft", "yd", "mi", "m2", "m²", "km2", "km²", "ha", "mg", "g", "kg",
                        "lb", "lbs", "oz", "ms", "s", "h", "hr", "hrs", "min", "mins", "sec", "secs", "yr", "yrs",
                        "ml", "mL", "l", "L", "W", "kW", "MW", "GW", "Wh", "kWh", "MWh", "GWh", "Hz", "kHz", "MHz",
                        "GHz", "KB", "kB", "MB", "GB", "TB", "KiB", "MiB", "GiB", "TiB", "°C", "°F", "°", "%",
                        "km/h", "m/s", "kph", "mph", "kcal", "\uff05", "ºC", "ºF", "° C", "° F", "º C",
                        "º F")  # fmt: skip
# Matched case-insensitively: English words longer than two letters, and names in scripts without case (米, 公里).
_WORD_UNITS: Final = sorted(
    (
        name
        for name in [*_UNITS, *_TEMPERATURE, *_PERCENT_UNITS, *_CURRENCIES]
        if (len(name) > 2 and name.isascii()) or (name.isalpha() and name.lower() == name.upper())
    ),
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
_HAN_DIGITS: Final = {"\u3007": 0, "零": 0, "一": 1, "二": 2, "两": 2, "兩": 2, "三": 3, "四": 4, "五": 5, "六": 6,
                      "七": 7, "八": 8, "九": 9}  # fmt: skip
_HAN_POWERS: Final = {"十": 10, "百": 100, "千": 1000}
_HAN_MYRIADS: Final = {"亿": 10**8, "億": 10**8, "万": 10**4, "萬": 10**4}  # largest first


def _alternation(words: list[str] | tuple[str, ...]) -> str:
    return "|".join(re.escape(word).replace(r"\ ", r"\s+") for word in sorted(words, key=len, reverse=True))


def _by_first_letter(words: Iterable[str]) -> str:
    """A regex matching any of ``words`` after its first letter has matched: ``(?<=f)(?:irst|ifth)|...``.

    A pattern that starts with a character class lets Python's engine skip to candidate positions.
    """
    groups = itertools.groupby(sorted(words), key=lambda word: word[0])
    return (
        "(?:"
        + "|".join(f"(?<={first})(?:{_alternation(tuple(w[1:] for w in found))})" for first, found in groups)
        + ")"
    )


def _first_letters(words: Iterable[str]) -> str:
    """The character class of the words' first letters, both cases."""
    firsts = {word[0] for word in words}
    return "".join(sorted({*firsts, *(letter.upper() for letter in firsts)}))


# --------------------------------------------------------------------------- character classes

# Letters with case past the BMP (Adlam, Osage, Deseret, mathematical letters) are left out: re tests
# characters past it range by range, which made every lookbehind on a case class twice as slow.
_LAST_CASED: Final = 0xFFFF


def _char_class(accept: Callable[[str], bool]) -> str:
    """The body of a regex character class: the characters up to ``_LAST_CASED`` that ``accept``, as ranges.

    Python's ``re`` has no Unicode property classes; building one from the running Unicode tables takes ~5 ms.
    """
    codes = [code for code in range(_LAST_CASED + 1) if accept(chr(code))]
    runs = itertools.groupby(enumerate(codes), lambda pair: pair[1] - pair[0])
    spans = [[code for _, code in run] for _, run in runs]
    return "".join(f"{chr(span[0])}-{chr(span[-1])}" for span in spans)  # letters: no escaping needed


def _is_upper_letter(char: str) -> bool:
    return char.isalpha() and char.istitle()  # a lone character is "title" when upper- or titlecase (ǅ)


def _is_cased_letter(char: str) -> bool:
    return char.isalpha() and (char.istitle() or char.islower())


_UPPER: Final = _char_class(_is_upper_letter)
# Letters with case: scripts that space their words, so a digit or name touching one is part of a word.
# CJK, Arabic or Thai letters are not in it: "于1950年" yields 1950 and "东京Tower" the name "Tower".
_CASED: Final = _char_class(_is_cased_letter)


# --------------------------------------------------------------------------- regexes

# Every pattern starts with a character class and checks what precedes it only after that first
# character: Python's engine then skips to candidate positions instead of trying each one (4x faster).
_JOINS = rf"[{_CASED}\d_.,/]"  # a digit after one of these continues a word, number, code or fraction
# Checked after a first digit; "F-16" is a code too.  A colon joins digits ("12:30") but not a label to its
# value ("Rotten Tomatoes:81 %", "Population:8,000").
_NOT_JOINED = rf"(?<!{_JOINS}\d)(?<!\d:\d)(?<![{_CASED}]-\d)"
_DIGIT_START = rf"\d{_NOT_JOINED}"
_NOT_BEFORE = rf"(?![{_CASED}\d])"
_BETWEEN = r"(?P<between>(?<=[Bb]etween\s.))?"  # after a first character: "between 5 and 10" is a range
_SCALE_WORD = r"(?i:dozen|hundred|thousand|million|billion|trillion|lakhs?|crores?|bn|mn|mln|tn)"
# "5 grand" is money, but "2 Grand Slam titles" and "3 grand prizes" are not.
_GRAND = r"grand(?!\s+(?:slams?|prix|prizes?|jury|juries|tours?|finals?|masters|total|opening|piano|canyon)\b)"
_SCALE = rf"(?:(?:{_SCALE_WORD}|{_GRAND})\b|[万萬亿億]|(?<=\d)(?:[kKmMbB]|bn|mn|mln)(?![{_CASED}]))"
_UNIT = rf"(?:{_alternation(_SYMBOL_UNITS)}|(?<=\d)[CF]|(?i:{_alternation(_WORD_UNITS)}))"
_CURRENCY_SYMBOL = r"(?:US\$|C\$|A\$|[$€£¥₹])"
# A number after its first digit: thousands groups ("1,889", "1.889.000", "1'000", "330 000" with a no-break
# or thin space, Arabic "٬"), then decimals.  A comma is a decimal point only where it cannot group and a
# unit, scale or currency follows ("3,5 km", "12,50 €"): English writes pairs and lists that way ("(3,4)",
# "divisible by 3,5 and 7", "ethane-1,2-diol").  _plain_number reads a match by the same rules.
_GROUP_MARKS: Final = "'\u2019\u00a0\u2009\u202f\u066c"
_NUM_REST = (
    r"(?:\d?(?:,\d\d)+,\d{3}(?!\d)(?:[.\u066b]\d+)?"  # Indian grouping: 5,00,000 (five lakh)
    r"|\d{0,2}(?:(?:,\d{3}(?!\d))+(?:[.\u066b]\d+)?"
    r"|(?:\.\d{3}(?!\d)){2,}(?:,\d+)?|\.\d{3}(?!\d),\d+"
    rf"|(?:[{_GROUP_MARKS}]\d{{3}}(?!\d))+(?:[.,\u066b]\d+)?)"
    rf"|\d*(?:[.\u066b]\d+|,\d{{1,2}}(?=\s?(?:{_UNIT}|{_SCALE_WORD}|[万萬亿億]|{_CURRENCY_SYMBOL})(?![^\W\d_])))?)"
)
_NUM = rf"\d{_NUM_REST}"
_ONES_WORDS = "one|two|three|four|five|six|seven|eight|nine"
_WORD_NUM = (
    rf"(?:(?:twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety)(?:(?:\s*-\s*|\s)(?:{_ONES_WORDS}))?"
    r"|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|sixteen|seventeen"
    r"|eighteen|nineteen|dozen)\b"
)
# Chinese numerals with a multiplier, led by a digit or 十: lone characters (一, 十) are mostly parts of words,
# runs led by 万 or 千 idioms (万一 "in case", 千万 "by all means"), and 第 makes an ordinal.  Atomic, so a
# run glued to a letter is dropped rather than cut short.
_HAN_LEADS: Final = "一二两兩三四五六七八九十"
_HAN_DIGIT = f"[{''.join(_HAN_DIGITS)}]"
_HAN_MULTIPLIERS: Final = "".join([*_HAN_POWERS, *_HAN_MYRIADS])
_HAN_NUM = (
    rf"(?>[{_HAN_LEADS}](?<!第.){_BETWEEN}"
    rf"(?:(?<=十)(?:{_HAN_DIGIT}|[{_HAN_MULTIPLIERS}])|{_HAN_DIGIT}*[{_HAN_MULTIPLIERS}])"
    rf"(?:{_HAN_DIGIT}|[{_HAN_MULTIPLIERS}])*)"
)
# A symbol or an ISO code before the number: "$5", "USD 5 million", "GBP 2bn".
_CURRENCY_BEFORE = re.compile(rf"(?:{_CURRENCY_SYMBOL}|\b(?:USD|EUR|GBP|JPY|INR|CAD|AUD|CHF|CNY|Rs\.?)\s)\s?\Z")
# After the first number: an optional second one making a range, then scale and unit shared by both.
_AMOUNT_TAIL = rf"""
    (?P<ord>st|nd|rd|th)?
    (?:\s*(?:--?|\u2013|\u2014|(?i:to|through)|(?(between)(?i:and)|(?!)))\s*{_CURRENCY_SYMBOL}?
       (?P<num2>{_NUM}|(?i:{_WORD_NUM}))(?:st|nd|rd|th)?)?
    (?P<half>\s+and\s+a\s+half\b)?
    (?:\s?(?P<scale>{_SCALE}(?:\s+{_SCALE_WORD}\b)?))?
    (?:[ \t]?(?P<unit>{_UNIT})(?P<half_after>\s+and\s+a\s+half\b)?)?
    {_NOT_BEFORE}"""
_AMOUNT = re.compile(rf"(?P<num>\d{_BETWEEN}{_NOT_JOINED}{_NUM_REST}){_AMOUNT_TAIL}", re.VERBOSE)
# "one" is a pronoun as often as a number ("one of them"): it is read only where a range starts ("one to three").
_WORD_AMOUNT = re.compile(
    rf"""(?P<num>[TtFfSsEeNnDdOo](?<![{_CASED}].){_BETWEEN}
    (?i:(?<=o)ne(?=\s*(?:-|\u2013|to|through)\s*(?:{_ONES_WORDS}|ten|\d)\b)
       |(?<=t)(?:wo|hree|en|welve|hirteen|wenty|hirty)|(?<=f)(?:our|ive|ourteen|ifteen|orty|ifty)
       |(?<=s)(?:ix|even|ixteen|eventeen|ixty|eventy)|(?<=e)(?:ight|leven|ighteen|ighty)|(?<=n)(?:ine|ineteen|inety)
       |(?<=d)ozen)
    (?:(?<=ty)(?:\s*-\s*|\s)(?:{_ONES_WORDS}))?\b){_AMOUNT_TAIL}""",
    re.VERBOSE,
)
# Amounts people write in words with "a": "half an hour", "a quarter of a million", "a couple of days", "a score
# of years", "an hour and a half", "a fortnight".  "a" alone is one only before a scale ("a million") or a unit
# that "and a half" follows: "once a week", "a day off" state no amount.
_IDIOM_AMOUNT = re.compile(
    rf"""(?P<num>[AaHhOoTt](?<![{_CASED}].){_BETWEEN}
    (?i:(?<=h)alf\s+an?|(?<=a)[\s-]+quarter\s+of\s+an?|(?<=o)ne[\s-]+quarter\s+of\s+an?
       |(?<=t)hree[\s-]+quarters\s+of\s+an?|(?<=a)\s+couple\s+of
       |(?<=a)\s+score\s+of(?!\s*\d)|(?<=a)n?(?=\s+(?:{_SCALE_WORD}|fortnight|[a-z]+\s+and\s+a\s+half)\b))
    ){_AMOUNT_TAIL}""",
    re.VERBOSE,
)
_IDIOM_VALUES: Final = {"a": 1.0, "an": 1.0, "half a": 0.5, "half an": 0.5, "a couple of": 2.0, "a score of": 20.0,
                        **{f"{whole} {part} of {article}": share for whole, part, share in (
                            ("a", "quarter", 0.25), ("one", "quarter", 0.25), ("three", "quarters", 0.75))
                           for article in ("a", "an")}}  # fmt: skip
# Shares written as fractions: "half of", "two-thirds of", "a quarter of", "one in five": percentages.
_PARTS: Final = {"half": 2, "third": 3, "thirds": 3, "quarter": 4, "quarters": 4, "fifth": 5,
                 "fifths": 5, "sixth": 6, "sixths": 6, "seventh": 7, "sevenths": 7, "eighth": 8, "eighths": 8,
                 "ninth": 9, "ninths": 9, "tenth": 10, "tenths": 10}  # fmt: skip
_SHARE_WHOLES: Final = ("a", "an", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "half", "1")
_SHARE = re.compile(
    rf"""(?P<whole>[{_first_letters(_SHARE_WHOLES)}](?<![{_CASED}\d.,].)(?i:{_by_first_letter(_SHARE_WHOLES)}
       (?:(?<!half)[\s-]+(?P<part>{_alternation(tuple(_PARTS))})(?=\s+of\b)
         |(?<=half)(?=\s+of\b)
         |(?:(?<=one)|(?<=1))\s+in\s+(?P<base>two|three|four|five|six|seven|eight|nine|ten|a\s+hundred|\d{{1,4}}(?!\d)))
    ))(?![{_CASED}])""",
    re.VERBOSE,
)
# Before "half of", a word that makes it one part of something: "the second half of", "her better half".
_PART_OF_A_WHOLE = re.compile(
    r"\b(?:the|a|an|this|that|its|their|his|her|our|my|your|first|second|last|latter|other|better|top|bottom|upper"
    r"|lower|back|front|next|final|opening|closing)\s+\Z",
    re.IGNORECASE,
)
_HAN_AMOUNT = re.compile(rf"(?P<num>{_HAN_NUM}){_AMOUNT_TAIL}", re.VERBOSE)
_MONTH = (
    r"(?:(?<=J)(?:an(?:uary)?|une?|uly?)|(?<=F)eb(?:ruary)?|(?<=M)(?:ar(?:ch)?|ay)|(?<=A)(?:pr(?:il)?|ug(?:ust)?)"
    r"|(?<=S)ep(?:t(?:ember)?)?|(?<=O)ct(?:ober)?|(?<=N)ov(?:ember)?|(?<=D)ec(?:ember)?)\.?"
)
_MONTH_START = rf"[JFMASOND](?<![{_CASED}].)"
_DAY = r"(?:[12]\d|3[01]|0?[1-9])(?:st|nd|rd|th)?"
_FIRST_ORDINALS: Final = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth")
_TEEN_ORDINALS: Final = ("tenth", "eleventh", "twelfth", "thirteenth", "fourteenth", "fifteenth", "sixteenth",
                         "seventeenth", "eighteenth", "nineteenth")  # fmt: skip
# Days written as ordinal words: "the third of May", "May twenty-first".
_DAY_WORDS: Final = {
    word: day
    for day, word in enumerate(
        (*_FIRST_ORDINALS, *_TEEN_ORDINALS, "twentieth", *(f"twenty-{w}" for w in _FIRST_ORDINALS), "thirtieth",
         "thirty-first"),
        start=1,
    )
}  # fmt: skip

_DAY_WORD = rf"[{_first_letters(_DAY_WORDS)}](?<![{_CASED}].)(?i:{_by_first_letter(_DAY_WORDS)})(?![{_CASED}-])"
_DATES: Final = (
    re.compile(
        rf"(?P<month>{_MONTH_START}{_MONTH})\s+(?:the\s+)?(?P<day>{_DAY}|{_DAY_WORD})\b"
        rf"(?:\s?,?\s+(?P<year>\d{{4}})\b)?"
    ),
    re.compile(
        rf"(?P<day>{_DIGIT_START}\d?(?:st|nd|rd|th)?)(?:\s+of)?\s+(?P<month>{_MONTH_START}{_MONTH})\b"
        rf"(?:\s?,?\s+(?P<year>\d{{4}})\b)?"
    ),
    re.compile(
        rf"(?P<day>{_DAY_WORD})\s+of\s+(?P<month>{_MONTH_START}{_MONTH})\b"
        rf"(?:\s?,?\s+(?P<year>\d{{4}})\b)?"
    ),
    re.compile(rf"(?P<month>{_MONTH_START}{_MONTH})\s?,?\s+(?P<year>\d{{4}})\b"),
    re.compile(
        r"(?P<year>\d(?<![\d/.-]\d)\d{3})([-/.])(?P<month>0?[1-9]|1[0-2])\2(?P<day>[12]\d|3[01]|0?[1-9])(?![\d/-])(?!\.\d)"
    ),
    re.compile(r"(?P<month>\d(?<![\d/.-]\d)\d?)/(?P<day>[12]\d|3[01]|0?[1-9])/(?P<year>\d{4})(?![\d/])"),
)
# 1889年3月31日, 1889年3月, 3月31日; month and day values are checked by _date_mention.
_CJK_DATES: Final = (
    re.compile(rf"(?P<year>{_DIGIT_START}\d{{3}})\s?年\s?(?P<month>\d\d?)\s?月(?:\s?(?P<day>\d\d?)\s?日)?"),
    re.compile(rf"(?P<month>{_DIGIT_START}\d?)\s?月\s?(?P<day>\d\d?)\s?日"),
)
# 19:30, 7:30 pm, 7 p.m., 7 o'clock, and 7.30pm (a dot between hour and minutes only before am/pm: "7.30" alone
# is a decimal number).  "19.30" without am/pm, and "half past seven", are not read.
_AMPM = r"(?i:[ap]\.m\.|[ap]m)"
_TIME = re.compile(
    rf"(?P<hour>\d(?<!{_JOINS}\d)(?<!\d:\d)\d?)(?::(?P<minute>[0-5]?\d)(?::\d\d)?|\.(?P<dotted>[0-5]\d)(?=\s?{_AMPM}))?"
    rf"(?:\s?(?P<ampm>{_AMPM})|(?P<oclock>\s?o['\u2019]clock)|\s(?P<word>noon|midday|midnight))?(?![{_CASED}\d:])"
)
_TIME_WORDS: Final = {"noon": 12 * 60, "midday": 12 * 60, "midnight": 0}
# Match scores: "4-1" (any dash), "won 4 to 1", "2-nil", "four goals to one".  Which pairs are scores is decided by
# _score_mention; a pair glued to more digits ("3-2-1", "4-1.5") or letters is something else.
_SCORE_SIDES: Final = ("nil", "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
                       "eleven", "twelve")  # fmt: skip
_SCORE_SIDE_WORD = (
    rf"[{_first_letters(_SCORE_SIDES)}](?<![{_CASED}].)(?i:{_by_first_letter(_SCORE_SIDES)})(?![{_CASED}])"
)
_SCORE_END = rf"(?![\d{_CASED}]|[-\u2013\u2014/:.,]\d)"
_SCORES: Final = (
    re.compile(
        rf"(?P<first>\d(?<!{_JOINS}\d)(?<!\d:\d)(?<![-\u2013\u2014]\d)\d{{0,2}})"
        rf"(?:[ \t]?(?P<dash>[-\u2013\u2014])[ \t]?|\s+(?i:to)\s+)(?P<second>\d{{1,3}}|(?i:nil)){_SCORE_END}"
    ),
    re.compile(
        rf"(?P<first>{_SCORE_SIDE_WORD}|{_DIGIT_START}\d{{0,2}})\s+"
        rf"(?P<counted>(?i:goals?|points?|runs?|sets?|games?|frames?|tries|wickets?|votes?))\s+(?i:to)\s+"
        rf"(?P<second>{_SCORE_SIDE_WORD}|\d{{1,3}}{_SCORE_END})"
    ),
)
# Words near a pair of numbers that make it a result: "lost 1-4", "a 1-3 defeat", "the vote was 5 to 4".
_RESULT_WORDS: Final = frozenset(
    """won win wins winning beat beats beating beaten lost lose loses losing loss defeat defeated defeats drew draw
    draws drawn tie tied ties victory triumph score scored scores scoreline lead led leads leading trail trailed
    trailing result final aggregate edged thrashed routed match game ended finished vote votes voted""".split()  # noqa: SIM905
)
_RESULT_WORDS_BEFORE, _RESULT_WORDS_AFTER = 3, 2
# Lowercase only: "Midnight Express" is a name.
_TIME_WORD = re.compile(rf"(?P<word>[nm](?<![{_CASED}].)(?:(?<=n)oon|(?<=m)id(?:day|night)))(?![{_CASED}])")
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
_CENTS = re.compile(
    rf"\s+and\s+(?P<cents>\d{{1,2}}|(?i:(?:twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety)(?:[\s-](?:{_ONES_WORDS}))?"
    rf"|{_ONES_WORDS}|ten|eleven|twelve|thirteen|fourteen|fifteen|sixteen|seventeen|eighteen|nineteen))"
    r"\s+(?i:cents?|pence|centimes?|p)\b"
)
_COMPOUND_JOIN = re.compile(r"[ \t]*(?:,?[ \t]+and[ \t]+)?")
_RANGE_JOIN = re.compile(r"\s*(?:--?|\u2013|\u2014|to|through|until|till)\s*", re.IGNORECASE)

# A name word: a capital, then letters with case or accents written as separate marks (decomposed text),
# joined inside by apostrophes, the Hawaiian okina or hyphens (O'Connor, Île-de-France, Müller-Lüdenscheidt).
_NAME_CHARS = rf"{_CASED}\u0300-\u036f"
_NAME_JOINERS = r"'\u2019\u02bb\u02bc-"
_NAME_REST = rf"[{_NAME_CHARS}]*(?:[{_NAME_JOINERS}][{_NAME_CHARS}]+)*"
_NAME_LINK = r"(?:of|de|da|del|der|van|von|la|le|du|bin|al|and|&)"  # "Bank of America", "Ludwig van Beethoven"
_NAME = re.compile(
    rf"(?P<name>[{_UPPER}](?<![{_NAME_CHARS}\d_{_NAME_JOINERS}].){_NAME_REST}"
    rf"(?:[ ](?:{_NAME_LINK}[ ])?[{_UPPER}]{_NAME_REST})*)"
)
# Quotes, brackets, bullets, Spanish opening marks; sentence ends, CJK ones included.
_LEADING_MARKS = frozenset(" \t\"'\u201c\u2018\u201e\u00ab([*#>\u2022\u2013\u00bf\u00a1\u300c\u300e\uff08-")
_SENTENCE_ENDS = frozenset(".!?:;\n\r\u3002\uff01\uff1f\uff1b\uff1a")


# --------------------------------------------------------------------------- builders


def _parse_number(text: str) -> float:
    words = text.lower().replace("-", " ").split()
    idiom = _IDIOM_VALUES.get(" ".join(words))
    if idiom is not None:
        return idiom
    if words[0] in _NUMBER_WORDS:
        return float(sum(_NUMBER_WORDS.get(word, 0) for word in words))
    return float(_plain_number(text))


def _plain_number(text: str) -> str:
    """A number as matched, in Python's notation: ``1.889.000`` -> ``1889000``, ``3,5`` -> ``3.5``; words unchanged."""
    if text[0] in _HAN_LEADS:
        return str(_han_value(text))
    if not text[0].isdecimal():
        return text
    written = text if text.isascii() else "".join(str(unicodedata.decimal(c)) if c.isdecimal() else c for c in text)
    number = written.replace("\u066b", ".").translate(_UNGROUPED)
    point = _decimal_point(number, grouped=len(number) < len(written))
    whole, fraction = number.rsplit(point, 1) if point else (number, "")
    whole = whole.replace(",", "").replace(".", "")
    return f"{whole}.{fraction}" if fraction else whole


_UNGROUPED: Final = str.maketrans("", "", _GROUP_MARKS)


def _decimal_point(number: str, *, grouped: bool) -> str:
    """Which of ``.`` and ``,`` is the decimal point of a matched ``number``; "" when it has none.

    Both marks: the last one (``1.234,5``, ``1,234.5``).  One mark after space or apostrophe groups:
    it (``1 234,5``).  One mark repeated: thousands groups (``1.889.000``).  A lone dot is a
    decimal point (``1.889``); a lone comma groups when three digits follow (``1,889``), else it
    is one (``3,5 km``).
    """
    marks = [char for char in number if char in ".,"]
    if not marks or (len(marks) > 1 and len(set(marks)) == 1):
        return ""
    if len(marks) > 1 or grouped or marks[0] == ".":
        return marks[-1]
    return "" if len(number.partition(",")[2]) == 3 else ","


def _han_value(text: str) -> int:
    """A Chinese numeral's value: 三百三十 = 330, 一千八百八十九 = 1889, 一亿两千万 = 120,000,000."""
    for mark, myriad in _HAN_MYRIADS.items():
        if mark in text:  # 一亿两千万: 一 hundred-millions, then 两千万
            high, _, low = text.partition(mark)
            return _han_value(high) * myriad + _han_value(low)
    value = digit = 0
    for char in text:
        power = _HAN_POWERS.get(char)
        if power is None:
            digit = _HAN_DIGITS[char]
        else:
            value += (digit or 1) * power  # 十五: a power with no digit before it counts once
            digit = 0
    return value + digit


def _precision(num_text: str, factor: float) -> float:
    """Half a unit of the last significant digit, times ``factor``; 0 below two significant digits.

    ``3.2`` and ``15,000`` were rounded by whoever wrote them, so a context value that
    rounds to them matches; ``200`` (one significant digit) says too little to allow that.
    """
    digits = _plain_number(num_text)
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
    symbol = _CURRENCY_BEFORE.search(match.string, max(0, start - 5), start)
    currency = symbol[0].strip() if symbol else None
    if scale_text == "m" and not (currency or (unit and unit.lower() in _CURRENCIES) or _counts(match)):
        unit, scale_text = unit or "m", ""  # "5m" is metres, but "£5m", "5m euros" and "5m viewers" are millions
    scale = math.prod(_SCALES.get(word, 1.0) for word in scale_text.lower().split())
    texts = [text for text in (match["num"], match["num2"]) if text]
    half = 0.5 if match["half"] or match["half_after"] else 0.0  # "two and a half hours", "an hour and a half"
    low, high = ((_parse_number(text) + half) * scale for text in (texts[0], texts[-1]))
    key = _unit_key(match, unit) if unit else ""
    if key in _POUNDS and (scale != 1.0 or _STERLING.match(match.string, match.end())):
        currency = "£"  # "30 million pounds" is money: nobody weighs in millions of pounds
    amounts = (low, high)
    factor, year_end = 1.0, _year_range_end(texts, low, high) if scale == 1.0 else 0.0
    if currency or key in _CURRENCIES or "grand" in scale_text.lower():
        code = _CURRENCIES[(currency or key).lower()] if currency or key in _CURRENCIES else IMPLIED_MONEY
        kind, family = Kind.MONEY, code if code == IMPLIED_MONEY else f"money:{code}"
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


def _idiom_mention(match: re.Match[str]) -> Mention | None:
    """An amount written with "a" ("half an hour", "a couple of days"); "a"/"half a" need a scale or unit."""
    counted = match["num"].lower().split()[-1] == "of"  # "a couple of", "a score of": a number of their own
    return _amount_mention(match) if counted or match["scale"] or match["unit"] else None


def _share_mention(match: re.Match[str]) -> Mention | None:
    """A share written as a fraction, as a percentage: "two-thirds of" is 66.7 %, "one in five" 20 %."""
    words = match["whole"].lower().replace("-", " ").split()
    if words == ["half"] and _PART_OF_A_WHOLE.search(match.string, max(0, match.start() - 30), match.start()):
        return None  # "the second half of the match" is a part, not a share
    if match["base"]:
        base = _parse_number(match["base"].lower().removeprefix("a").strip())  # "one in a hundred"
        if not base:
            return None
        share = 1.0 / base
    elif words == ["half"]:
        share = 0.5
    else:
        share = _IDIOM_VALUES.get(words[0], 0.0) or _parse_number(words[0])
        share /= _PARTS[words[-1]]
    value = share * 100.0
    return Mention(Kind.PERCENT, match.start(), match.end(), match[0], value, value, "percent", (round(value, 1),))


def _unit_key(match: re.Match[str], unit: str) -> str:
    """A matched unit as the tables spell it: lowercase, one space between words, degrees as ``°c``."""
    # The regex already told case-sensitive symbols apart ("m" matched, "M" did not); tables are lowercase.
    key = " ".join(unit.lower().replace("º", "°").split())
    if key.startswith("° "):
        key = key.replace(" ", "")  # "25° C"
    if key == "s" and match.string[match.start("unit") - 1].isalnum():
        return ""  # "1990s", "90s": a plural, not seconds
    return key


def _counts(match: re.Match[str]) -> bool:
    """Whether a plural noun follows the amount: what "5m" then counts in millions ("5m viewers")."""
    following = _COUNTED.match(match.string, match.end())
    return following is not None and following["word"].lower() not in _NOT_COUNTED


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
    minute, ampm = match["minute"] or match["dotted"], (match["ampm"] or "").lower()
    if match["word"]:
        return _time_word_mention(match) if match["hour"] == "12" else None  # "12 noon", "12 midnight"
    if minute is None and not ampm and not match["oclock"]:
        return None
    hour = int(match["hour"])
    if hour > 24:
        return None
    if ampm.startswith("p") and hour < 12:
        hour += 12
    elif ampm.startswith("a") and hour == 12:
        hour = 0
    value = float((hour * 60 + int(minute or 0)) % _DAY_MINUTES)  # 24:00 is midnight
    return Mention(Kind.TIME, match.start(), match.end(), match[0], value, value, "time", (float(match["hour"]),))


_DAY_MINUTES: Final = 24 * 60


def _time_word_mention(match: re.Match[str]) -> Mention:
    """Noon, midday or midnight, as minutes after midnight."""
    value = float(_TIME_WORDS[match["word"]])
    return Mention(Kind.TIME, match.start(), match.end(), match[0], value, value, "time", (12.0,))  # "12 am/pm"


def _date_mention(match: re.Match[str]) -> Mention | None:
    """A calendar date; its family names the parts written, so ``March 1999`` never meets ``March 3``."""
    groups = match.groupdict()
    month_text = groups["month"]
    month = int(month_text) if month_text.isdigit() else _MONTHS[month_text[:3].lower()]
    day_text = groups.get("day") or ""
    day = _DAY_WORDS.get(day_text.lower()) or int(day_text.rstrip("stndrh") or 0)
    year = int(groups["year"]) if groups.get("year") else 0
    if (year and not _YEAR_RANGE[0] <= year <= _YEAR_RANGE[1]) or not 1 <= month <= 12 or day > 31:
        return None
    parts = "".join(name for name, value in (("y", year), ("m", month), ("d", day)) if value)
    value = float(year * 10000 + month * 100 + day)
    amounts = tuple(float(part) for part in (day, year) if part)
    return Mention(Kind.DATE, match.start(), match.end(), match[0], value, value, f"date:{parts}", amounts)


def _score_mention(match: re.Match[str]) -> Mention | None:
    """A match score, its sides in written order; a pair of numbers only where it reads as one.

    Counted sides ("four goals to one") always do; dashed ones where the first is not smaller (a range runs
    upwards: "4-1" and "1-1" are results, "1-4" may be "1-4 players") or a result word is near ("lost 1-4");
    ones joined by "to", or by a hyphen with spaces round it ("9 - 6" is as often a subtraction), only with
    such a word ("won 4 to 1", but "4 to 1 odds").  Next to an arithmetic sign it is a sum ("= 100 - 10").
    """
    first, second = (_score_side(match[side]) for side in ("first", "second"))
    groups = match.groupdict()
    dashed = groups.get("dash") and not _SPACED_HYPHEN.search(match[0])
    if _ARITHMETIC_BEFORE.search(match.string, max(0, match.start() - 3), match.start()) or _ARITHMETIC_AFTER.match(
        match.string, match.end()
    ):
        return None
    if not (groups.get("counted") or (dashed and first >= second) or _near_result_word(match)):
        return None
    return Mention(Kind.SCORE, match.start(), match.end(), match[0], first, second, "score", (first, second))


def _score_side(text: str) -> float:
    return 0.0 if text.lower() in ("nil", "zero") else _parse_number(text)


def _near_result_word(match: re.Match[str]) -> bool:
    """Whether a word that makes a pair of numbers a result is a few words before or after it."""
    text = match.string
    before = _LOWER_WORD.findall(text[max(0, match.start() - 40) : match.start()].lower())[-_RESULT_WORDS_BEFORE:]
    after = _LOWER_WORD.findall(text[match.end() : match.end() + 30].lower())[:_RESULT_WORDS_AFTER]
    return not _RESULT_WORDS.isdisjoint(before + after)


_LOWER_WORD: Final = re.compile(r"[a-z]+")
_SPACED_HYPHEN: Final = re.compile(r"\s-\s")
_ARITHMETIC_BEFORE: Final = re.compile(r"[=+*/\u00d7]\s*\Z")
_ARITHMETIC_AFTER: Final = re.compile(r"\s*[=+*/\u00d7]")
_FIELD_AMOUNT = re.compile(RECORD_KEY + r"(?P<num>-?\d+(?:\.\d+)?)(?![\w.])")


def _field_mention(match: re.Match[str]) -> Mention | None:
    """A record field whose key names its currency or unit: ``"price_eur": 420``, ``"distanceKm": 5``.

    The number alone would be unitless, and a unitless number conflicts with nothing that has
    a unit: typed by its key, "380 euros" in an answer conflicts with the price it contradicts.
    """
    unit = key_words(match["key"])[-1]
    if len(unit) < 2 or not (unit in _CURRENCIES or unit in _UNITS):
        return None
    written = match["num"]
    value = float(written)
    start, end = match.span("num")
    if unit in _CURRENCIES:
        kind, family, factor = Kind.MONEY, f"money:{_CURRENCIES[unit]}", 1.0
    else:
        dimension, factor = _UNITS[unit]
        kind, family = Kind.QUANTITY, f"quantity:{dimension}"
    return Mention(kind, start, end, written, value * factor, value * factor, family, (value,),
                   _precision(written.lstrip("-"), factor))  # fmt: skip


@dataclass(frozen=True, slots=True)
class _Extractor:
    """A pattern and what builds a mention from its match.

    ``needs``: characters one of which a text must hold for the pattern to match, so CJK patterns
    cost nothing on other texts (a scan for "月" is quick).
    """

    pattern: re.Pattern[str]
    build: Callable[[re.Match[str]], Mention | None]
    needs: str = ""

    def applies(self, text: str) -> bool:
        return not self.needs or any(char in text for char in self.needs)


_EXTRACTORS: Final = (
    *(_Extractor(pattern, _date_mention) for pattern in _DATES),
    *(_Extractor(pattern, _date_mention, needs="月") for pattern in _CJK_DATES),
    _Extractor(_TIME, _time_mention),
    _Extractor(_TIME_WORD, _time_word_mention),
    _Extractor(_FIELD_AMOUNT, _field_mention, needs=":"),  # before _AMOUNT: the same number, typed
    *(_Extractor(pattern, _score_mention) for pattern in _SCORES),  # before _AMOUNT: "4-1" is no range
    _Extractor(_AMOUNT, _amount_mention),
    _Extractor(_WORD_AMOUNT, _amount_mention),
    _Extractor(_HAN_AMOUNT, _amount_mention, needs=_HAN_MULTIPLIERS),
    _Extractor(_IDIOM_AMOUNT, _idiom_mention),
    _Extractor(_SHARE, _share_mention),
)


# --------------------------------------------------------------------------- extraction


# Contradiction reads an answer's claims twice and unsupported_spans once: remembered by text.
@lru_cache(maxsize=1024)
def extract_claims(text: str) -> tuple[Mention, ...]:
    """The numeric mentions of an answer that state something: no citations, list markers, fractions."""
    blocked = _Spans((found.start(), found.end()) for found in _NOT_CLAIMS.finditer(text))
    return tuple(mention for mention in extract_values(text) if not blocked.overlap(mention.start, mention.end))


def extract_values(text: str) -> list[Mention]:
    """Every numeric mention of ``text`` (all kinds but names), in text order, ranges merged."""
    candidates: list[tuple[int, int, int, Mention]] = []
    for priority, extractor in enumerate(_EXTRACTORS):
        for match in extractor.pattern.finditer(text) if extractor.applies(text) else ():
            mention = extractor.build(match)
            if mention is not None:
                candidates.append((mention.start, mention.start - mention.end, priority, mention))
    chosen: list[Mention] = []
    taken_until = 0
    for start, _, _, mention in sorted(candidates, key=lambda candidate: candidate[:3]):
        if start >= taken_until:
            chosen.append(mention)
            taken_until = mention.end
    return _merge_ranges(text, _merge_compounds(text, _add_cents(text, chosen)))


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


def _add_cents(text: str, mentions: list[Mention]) -> list[Mention]:
    """Read "twelve euros and fifty cents" (or pence, centimes) as 12.50: the hundredths of the amount before."""
    read: list[Mention] = []
    for mention in mentions:
        if read and mention.start < read[-1].end:
            continue  # the cents of the amount before
        cents = _CENTS.match(text, mention.end) if mention.kind is Kind.MONEY and mention.low == mention.high else None
        if cents is not None:
            value, end = mention.low + _parse_number(cents["cents"]) / 100, cents.end()
            mention = replace(mention, end=end, text=text[mention.start : end], low=value, high=value,
                              amounts=(*mention.amounts, value))  # fmt: skip
        read.append(mention)
    return read


def _merge_compounds(text: str, mentions: list[Mention]) -> list[Mention]:
    """Add up one quantity written in parts of smaller units: "2 h 5 min", "1 hour and 30 minutes", "3 kg 200 g".

    The later part must be in a smaller unit and less than one of the earlier part's units, so a list of
    distances ("10 km and 5 km") stays a list.
    """
    merged: list[Mention] = []
    for mention in mentions:
        previous = merged[-1] if merged else None
        if (
            previous is not None
            and _adds_to(previous, mention)
            and _COMPOUND_JOIN.fullmatch(text, previous.end, mention.start)
        ):
            merged[-1] = replace(
                previous,
                end=mention.end,
                text=text[previous.start : mention.end],
                low=previous.low + mention.low,
                high=previous.high + mention.high,
                amounts=previous.amounts + mention.amounts,
                precision=max(previous.precision, mention.precision),
            )
        else:
            merged.append(mention)
    return merged


def _adds_to(whole: Mention, part: Mention) -> bool:
    """Whether ``part`` can be the smaller-unit rest of ``whole``: one dimension, a smaller unit, less than one."""
    if not (
        whole.kind is part.kind is Kind.QUANTITY
        and whole.family == part.family != "quantity:temperature"
        and whole.low == whole.high
        and part.low == part.high
        and whole.amounts[0]
        and part.amounts[0]
    ):
        return False
    unit = whole.low / whole.amounts[0]
    return part.low / part.amounts[0] < unit and part.low < unit


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
            and mention.kind is not Kind.SCORE  # its two sides are no range's ends
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


def comparable(family: str, other: str) -> bool:
    """Whether values of two families may support or contradict each other.

    The same family; two amounts of money where one's currency is only implied ("5 grand" and
    "£5,000"): an implied currency never contradicts a stated one, the amounts decide; and a date
    with a date that writes fewer or more of its parts ("June 14, 1998" and "14 June", "December
    2004" and "November 2, 2004"): they differ where the parts they share differ.  Dates that
    each write a part the other lacks ("November 2004" and "November 2") are not compared.
    """
    if family == other:
        return True
    if family.startswith("date:") and other.startswith("date:"):
        parts, others = set(family[5:]), set(other[5:])
        return parts < others or others < parts
    return IMPLIED_MONEY in (family, other) and family.startswith(IMPLIED_MONEY) and other.startswith(IMPLIED_MONEY)


def extract_names(text: str, numeric: Sequence[Mention]) -> Iterator[Mention]:
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
    june july august september october november december mon tue tues wed thu thur thurs fri sat sun jan feb mar apr
    jun jul aug sep sept oct nov dec passage passages document documents source sources context
    answer question summary article section table figure am pm ok""".split()  # noqa: SIM905 - reads as text
)
