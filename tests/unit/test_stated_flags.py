from __future__ import annotations

import pytest

from detectors.text.stated_flags import flag_statements, source_flags

RECORD = (
    '{"name": "Cafe X", "attributes": {"BusinessParking": {"garage": false, "street": true, "valet": false},'
    ' "RestaurantsReservations": true, "RestaurantsTakeOut": true, "OutdoorSeating": false, "WiFi": "no",'
    ' "Music": null}, "in_stock": false}'
)


def test_fields_take_their_words_from_the_key() -> None:
    flags = {flag.words: flag.value for flag in source_flags(RECORD)}
    assert flags == {
        ("garage", "parking"): False,  # a one-word key takes its object's last word
        ("street", "parking"): True,
        ("valet", "parking"): False,
        ("reservations",): True,  # "Restaurants" begins several keys: a namespace
        ("take", "out"): True,
        ("outdoor", "seating"): False,
        ("wifi",): False,  # "WiFi" is one word; "no" is false; null is unknown and skipped
        ("stock",): False,
    }


def test_python_style_dicts_count_too() -> None:
    flags = source_flags("Tool result: {'refundable': True, 'gift_wrap': 'No'}")
    assert {flag.words: flag.value for flag in flags} == {("gift", "wrap"): False}  # one-word key outside an object
    assert source_flags("no fields here, just prose: true or false") == ()


@pytest.mark.parametrize(
    ("answer", "words", "affirmed"),
    [
        ("It offers outdoor seating.", ("outdoor", "seating"), True),
        ("It does not offer outdoor seating.", ("outdoor", "seating"), False),
        ("It doesn\u2019t offer outdoor seating.", ("outdoor", "seating"), False),  # a typographic apostrophe
        ("Valet parking is not available.", ("valet", "parking"), False),
        ("Valet parking is not currently offered.", ("valet", "parking"), False),
        ("It has no Wi-Fi, but street parking is easy.", ("street", "parking"), True),
        ("It has no Wi-Fi, but street parking is easy.", ("wifi",), False),
        ("There is no WiFi, and the street parking is free.", ("street", "parking"), True),  # a new subject
        ("It does not offer outdoor seating, WiFi, or reservations.", ("reservations",), False),  # an or-list
        ("It does not accept cards, offers outdoor seating daily.", ("outdoor", "seating"), True),  # a new predicate
        ("The street parking is not scenic.", ("street", "parking"), True),  # denies scenery, not parking
        ("It takes reservations and is in stock.", ("reservations",), True),  # forms of a word
    ],
)
def test_answers_affirm_or_deny_a_field(answer: str, words: tuple[str, ...], affirmed: bool) -> None:
    statements = [s for s in flag_statements(answer, source_flags(RECORD)) if s.flag.words == words]
    assert len(statements) == 1
    assert statements[0].affirmed is affirmed
    if not affirmed:  # a denial's span takes the negation in, so the evidence reads right
        said = answer[statements[0].start : statements[0].end].lower()
        assert any(cue in said for cue in ("not", "no ", "n't", "n\u2019t"))


def test_unrelated_words_are_no_statement() -> None:
    assert flag_statements("They serve street food and research reserve wines.", source_flags(RECORD)) == []
