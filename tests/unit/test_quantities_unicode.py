"""Names, numbers and dates beyond ASCII: letters of any cased script, digits of any script, CJK numerals."""

from __future__ import annotations

import pytest

from detectors.text.quantities import Kind, extract_claims, extract_names, extract_values


def full_width(text: str) -> str:
    """ASCII in the full-width forms CJK text writes it in."""
    return "".join(chr(ord(char) + 0xFEE0) for char in text)


def arabic_indic(text: str) -> str:
    """Digits and decimal point in Arabic-Indic script."""
    return "".join(chr(0x0660 + int(char)) if char.isdigit() else "\u066b" if char == "." else char for char in text)


def names(text: str) -> list[str]:
    return [name.text for name in extract_names(text, extract_values(text))]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The office is at Friedrichstraße 12.", ["Friedrichstraße"]),
        ("Flights from Zürich to São Paulo stop in Łódź.", ["Zürich", "São Paulo", "Łódź"]),
        ("A ferry serves Ærøskøbing in summer.", ["Ærøskøbing"]),
        ("Paris lies in Île-de-France.", ["Île-de-France"]),
        ("It was written by O'Connor.", ["O'Connor"]),
        ("It was written by Müller-Lüdenscheidt.", ["Müller-Lüdenscheidt"]),
        ("It was written by O\u2019Connor in Hawai\u02bbi.", ["O\u2019Connor", "Hawai\u02bbi"]),
        ("Flights to Zu\u0308rich.", ["Zu\u0308rich"]),  # decomposed: u + combining diaeresis
        ("Он живёт в Москве.", ["Москве"]),
        ("东京塔位于Minato区。", ["Minato"]),  # a caseless script around a name does not glue to it
        ("东京塔高333米。Tokyo Tower is tall.", ["Tower"]),  # 。 ends a sentence
        ("东京塔高333米\uff0c建于1958年。", []),
        ("«Zürich» is a city. ¿Dónde está Málaga?", ["Málaga"]),  # opening marks start sentences
    ],
)
def test_names_are_extracted_whole(text: str, expected: list[str]) -> None:
    assert names(text) == expected


@pytest.mark.parametrize(
    ("text", "kind", "value"),
    [
        (arabic_indic("330"), Kind.NUMBER, 330.0),
        (arabic_indic("330.5"), Kind.NUMBER, 330.5),
        (full_width("330"), Kind.NUMBER, 330.0),
        ("1,889", Kind.NUMBER, 1889.0),  # thousands, not a decimal
        ("1.889", Kind.NUMBER, 1.889),  # a lone dot is a decimal point
        ("1.889.000", Kind.NUMBER, 1889000.0),
        ("1.234,5", Kind.NUMBER, 1234.5),
        ("1,234.5", Kind.NUMBER, 1234.5),
        ("330\u202f000", Kind.NUMBER, 330000.0),  # narrow no-break space
        ("330\u00a0000", Kind.NUMBER, 330000.0),  # no-break space
        ("330\u2009000,5", Kind.NUMBER, 330000.5),  # thin space, decimal comma
        ("1'000", Kind.NUMBER, 1000.0),
        ("1\u2019000", Kind.NUMBER, 1000.0),
        ("3,5 km", Kind.QUANTITY, 3500.0),
        ("3,5 %", Kind.PERCENT, 3.5),
        ("三百三十", Kind.NUMBER, 330.0),
        ("一千八百八十九", Kind.NUMBER, 1889.0),
        ("三百零五", Kind.NUMBER, 305.0),
        ("十五", Kind.NUMBER, 15.0),
        ("三万", Kind.NUMBER, 30000.0),
        ("一亿两千万", Kind.NUMBER, 120000000.0),
        ("1.4亿", Kind.NUMBER, 140000000.0),
        ("高三百三十米", Kind.QUANTITY, 330.0),
        ("长5公里", Kind.QUANTITY, 5000.0),
        ("花了100美元", Kind.MONEY, 100.0),
        ("建于1887年", Kind.YEAR, 1887.0),
        (full_width("1889") + "年", Kind.YEAR, 1889.0),
        ("1889年3月31日", Kind.DATE, 18890331.0),
        ("1889年3月", Kind.DATE, 18890300.0),
        ("3月31日", Kind.DATE, 331.0),
    ],
)
def test_numbers_of_any_script_and_notation(text: str, kind: Kind, value: float) -> None:
    (found,) = extract_values(text)
    assert (found.kind, found.low, found.high) == (kind, pytest.approx(value), pytest.approx(value))
    assert text[found.start : found.end] == found.text


@pytest.mark.parametrize(
    ("text", "values"),
    [
        ("Points (3,4) and (5,6).", [3.0, 5.0]),  # pairs, not decimals
        ("divisible by 3,5 and 7", [3.0, 7.0]),
        ("sizes 2,4,6 and [1,2]", [2.0, 1.0]),
        ("1,8890", [1.0]),
        ("一些 统一 万一 千万 十分 第十二 一一", []),  # words, idioms, ordinals: not amounts
        ("一千八百八十九abc", []),  # glued to a word: dropped, not cut short
    ],
)
def test_ambiguous_separators_and_numerals_stay_apart(text: str, values: list[float]) -> None:
    assert [found.low for found in extract_values(text)] == values


@pytest.mark.parametrize(
    ("text", "claims"), [("φ1 = 25°", ["25°"]), ("the Ц5 model", []), ("F-16 and ÜF-16", []), ("于1950年", ["1950"])]
)
def test_numbers_glued_to_letters_of_cased_scripts_are_identifiers(text: str, claims: list[str]) -> None:
    assert [found.text for found in extract_claims(text)] == claims
