"""Values read as people write them (detectors.text.quantities): restated, they are supported; changed, contradicted.

``RESTATEMENTS`` is a check set of our own, kept apart from the shared labelled data: each source
states a value one way, the faithful answer restates it another way, and the changed answer writes
the restated form with another value.  Every faithful answer must pass the contradiction detector
without a flagged value and every changed one must be a conflict.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from detectors.contradiction import ContradictionConfig
from detectors.contradiction.detector import ContradictionDetector, index_values, stated_values
from detectors.llm_call import Source
from detectors.text.quantities import Kind, extract_values
from tests.calls import make_llm_call


@dataclass(frozen=True)
class Restatement:
    source: str
    faithful: str
    changed: str


RESTATEMENTS = {
    "mln bucks / million dollars": Restatement(
        "Honestly we may loose 5 mln bucks if the deal falls through.",
        "If the deal falls through they risk losing 5 million dollars.",
        "If the deal falls through they risk losing 50 million dollars.",
    ),
    "half an hour / minutes, noon / 12 pm": Restatement(
        "The briefing lasts half an hour and starts at noon.",
        "The briefing lasts 30 minutes and starts at 12 pm.",
        "The briefing lasts 45 minutes and starts at 12 pm.",
    ),
    "three-quarters / percent": Restatement(
        "Three-quarters of the members backed the proposal.",
        "75% of the members backed the proposal.",
        "65% of the members backed the proposal.",
    ),
    "7.30pm / 19:30": Restatement(
        "Dinner is served at 7.30pm in the main hall.",
        "Dinner is served at 19:30 in the main hall.",
        "Dinner is served at 20:30 in the main hall.",
    ),
    "£30m / million pounds": Restatement(
        "The club paid £30m for the striker last summer.",
        "The club paid 30 million pounds for the striker.",
        "The club paid 35 million pounds for the striker.",
    ),
    "a fortnight / two weeks": Restatement(
        "Delivery usually takes a fortnight from the order date.",
        "Delivery usually takes two weeks from the order date.",
        "Delivery usually takes three weeks from the order date.",
    ),
    "$2.5bn / billion dollars": Restatement(
        "The startup raised $2.5bn in its latest funding round.",
        "The startup raised 2.5 billion dollars in its latest funding round.",
        "The startup raised 1.5 billion dollars in its latest funding round.",
    ),
    "40k / 40,000": Restatement(
        "Attendance reached 40k fans at the stadium on Sunday.",
        "Attendance reached 40,000 fans at the stadium.",
        "Attendance reached 45,000 fans at the stadium.",
    ),
    "grand / pounds": Restatement(
        "The flat sold for 450 grand last spring.",
        "The flat sold for £450,000 last spring.",
        "The flat sold for £540,000 last spring.",
    ),
    "quid / £": Restatement(
        "He borrowed 20 quid from his brother for the train.",
        "He borrowed £20 from his brother for the train.",
        "He borrowed £25 from his brother for the train.",
    ),
    "EUR code / euros": Restatement(
        "A ticket costs EUR 45 per person, lunch included.",
        "A ticket costs 45 euros per person.",
        "A ticket costs 54 euros per person.",
    ),
    "2 h 5 min / minutes": Restatement(
        "The film runs for 2 h 5 min without an interval.",
        "The film runs for 125 minutes.",
        "The film runs for 115 minutes.",
    ),
    "°C / degrees Celsius": Restatement(
        "Water boils at 100°C at sea level.",
        "At sea level water boils at 100 degrees Celsius.",
        "At sea level water boils at 90 degrees Celsius.",
    ),
    "31C / 31 °C": Restatement(
        "Highs of 31C are expected on Friday afternoon.",
        "Highs of 31 °C are expected on Friday.",
        "Highs of 35 °C are expected on Friday.",
    ),
    "miles / km": Restatement(
        "The coastal trail is 5 miles long.",
        "The coastal trail is about 8 km long.",
        "The coastal trail is about 12 km long.",
    ),
    "mg / g": Restatement(
        "Each tablet contains 500 mg of paracetamol.",
        "Each tablet contains 0.5 g of paracetamol.",
        "Each tablet contains 0.25 g of paracetamol.",
    ),
    "km / metres": Restatement(
        "The bridge spans 1.2 km across the river.",
        "The bridge spans 1,200 metres across the river.",
        "The bridge spans 2,100 metres across the river.",
    ),
    "the 3rd of May / May 3rd": Restatement(
        "The festival opens on the 3rd of May.",
        "The festival opens on May 3rd.",
        "The festival opens on May 13th.",
    ),
    "midnight / 12 am": Restatement(
        "On Saturdays the store closes at midnight.",
        "The store closes at 12 am on Saturdays.",
        "The store closes at 11 pm on Saturdays.",
    ),
    "two thirds / percent": Restatement(
        "Nearly two thirds of the respondents commute by bike.",
        "Nearly 67% of the respondents commute by bike.",
        "Nearly 57% of the respondents commute by bike.",
    ),
    "half of / per cent": Restatement(
        "Half of the budget goes to research.",
        "50 per cent of the budget goes to research.",
        "40 per cent of the budget goes to research.",
    ),
    "pct / %": Restatement(
        "Unemployment fell to 4.2 pct in March.",
        "Unemployment fell to 4.2% in March.",
        "Unemployment fell to 4.8% in March.",
    ),
    "a dozen / 12": Restatement(
        "The warranty covers a dozen parts of the engine.",
        "The warranty covers 12 parts of the engine.",
        "The warranty covers 15 parts of the engine.",
    ),
    "a couple of / two": Restatement(
        "The renovation of the library took a couple of years.",
        "The library's renovation took two years.",
        "The library's renovation took five years.",
    ),
    "crore / million": Restatement(
        "The project's budget is 3 crore rupees.",
        "The project has a budget of 30 million rupees.",
        "The project has a budget of 300 million rupees.",
    ),
    "Indian grouping / lakh": Restatement(
        "The village received Rs 5,00,000 in grants.",
        "The village received 5 lakh rupees in grants.",
        "The village received 50 lakh rupees in grants.",
    ),
    "12m / million": Restatement(
        "The app now has 12m users across Europe.",
        "The app has 12 million users.",
        "The app has 21 million users.",
    ),
    "an hour and a half / minutes": Restatement(
        "The flight to Vienna lasts an hour and a half.",
        "The flight to Vienna lasts 90 minutes.",
        "The flight to Vienna lasts 80 minutes.",
    ),
    "date split over sentences": Restatement(
        "The bakery was founded in Leeds. It opened its first shop on 14 June. That was in 1998.",
        "The bakery opened its first shop on June 14, 1998.",
        "The bakery opened its first shop on June 14, 1999.",
    ),
    "one in five / percent": Restatement(
        "One in five adults in the survey never exercise.",
        "20% of adults in the survey never exercise.",
        "25% of adults in the survey never exercise.",
    ),
}


def claims(source: str, answer: str) -> dict[str, str]:
    detector = ContradictionDetector(ContradictionConfig(), threshold=0.5)
    (result,) = detector.detect_batch([make_llm_call(answer, "", [Source("1", source)])])
    return {claim["text"]: claim["verdict"] for claim in result.evidence["claims"] if claim["kind"] != "name"}


@pytest.mark.parametrize("case", RESTATEMENTS.values(), ids=RESTATEMENTS.keys())
def test_a_faithful_restatement_is_supported(case: Restatement) -> None:
    verdicts = claims(case.source, case.faithful)
    assert verdicts and set(verdicts.values()) == {"supported"}, verdicts


@pytest.mark.parametrize("case", RESTATEMENTS.values(), ids=RESTATEMENTS.keys())
def test_a_changed_value_in_the_same_form_is_a_conflict(case: Restatement) -> None:
    assert "conflict" in claims(case.source, case.changed).values()


def test_the_check_set_holds_thirty_values_each_way() -> None:
    assert len(RESTATEMENTS) == 30


def value(text: str) -> tuple[str, float, float]:
    (found,) = extract_values(text)
    return found.family, round(found.low, 4), round(found.high, 4)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("5 mln", ("number", 5e6, 5e6)),
        ("5M users", ("number", 5e6, 5e6)),
        ("5K", ("number", 5e3, 5e3)),
        ("3 tn", ("number", 3e12, 3e12)),
        ("2B", ("number", 2e9, 2e9)),
        ("three hundred thousand", ("number", 3e5, 3e5)),
        ("a quarter of a million", ("number", 2.5e5, 2.5e5)),
        ("half a dozen", ("number", 6.0, 6.0)),
        ("two dozen", ("number", 24.0, 24.0)),
        ("a score of", ("number", 20.0, 20.0)),
        ("5 lakh", ("number", 5e5, 5e5)),
        ("12,34,567", ("number", 1234567.0, 1234567.0)),
        ("USD 5 million", ("money:USD", 5e6, 5e6)),
        ("GBP 2bn", ("money:GBP", 2e9, 2e9)),
        ("50 bucks", ("money", 50.0, 50.0)),
        ("5 grand", ("money", 5e3, 5e3)),
        ("£5m", ("money:GBP", 5e6, 5e6)),
        ("5m euros", ("money:EUR", 5e6, 5e6)),
        ("10 pounds sterling", ("money:GBP", 10.0, 10.0)),
        ("a million dollars", ("money:USD", 1e6, 1e6)),
        ("two and a half hours", ("quantity:duration", 9000.0, 9000.0)),
        ("a quarter of an hour", ("quantity:duration", 900.0, 900.0)),
        ("1 hour and 30 minutes", ("quantity:duration", 5400.0, 5400.0)),
        ("3 kg 200 g", ("quantity:mass", 3.2, 3.2)),
        ("7 o'clock", ("time", 420.0, 420.0)),
        ("7.30 p.m.", ("time", 1170.0, 1170.0)),
        ("24:00", ("time", 0.0, 0.0)),
        ("12 noon", ("time", 720.0, 720.0)),
        ("midday", ("time", 720.0, 720.0)),
        ("77F", ("quantity:temperature", 25.0, 25.0)),
        ("25º C", ("quantity:temperature", 25.0, 25.0)),
        ("a third of", ("percent", 33.3333, 33.3333)),
        ("one in a hundred", ("percent", 1.0, 1.0)),
        ("the twenty-first of June", ("date:md", 621.0, 621.0)),
        ("May the 3rd", ("date:md", 503.0, 503.0)),
        ("twelve euros and fifty cents", ("money:EUR", 12.5, 12.5)),
        ("5 dollars and 99 cents", ("money:USD", 5.99, 5.99)),
        ("one to three minutes", ("quantity:duration", 60.0, 180.0)),
        ("Rotten Tomatoes:81 %", ("percent", 81.0, 81.0)),  # a label's colon does not join its value
    ],
)
def test_values_written_in_words_and_slang_are_normalized(text: str, expected: tuple[str, float, float]) -> None:
    assert value(text) == expected


@pytest.mark.parametrize(
    ("text", "family"),
    [
        ("The wall is 5m tall.", "quantity:length"),  # metres: nothing counted follows
        ("The show drew 5m viewers.", "number"),  # millions: a plural noun follows
        ("It weighs 30 pounds.", "quantity:mass"),  # no scale: pounds of weight
        ("It cost 30 million pounds.", "money:GBP"),  # nobody weighs in millions of pounds
    ],
)
def test_ambiguous_abbreviations_are_read_by_what_surrounds_them(text: str, family: str) -> None:
    (found,) = extract_values(text)
    assert found.family == family


@pytest.mark.parametrize(
    "text",
    [
        "She won 2 Grand Slam titles",  # a name, not a sum of money
        "We meet once a week",  # "a week" states no amount
        "They stand half a chance",
        "Cut the cake in half",
        "The Midnight Express left",  # capitalised: a name
        "the first of many",
        "one of them said",  # "one" is a number only where a range starts
    ],
)
def test_words_that_state_no_amount_are_not_read_as_one(text: str) -> None:
    assert [found for found in extract_values(text) if found.kind is not Kind.NUMBER] == []


def test_an_implied_currency_never_contradicts_a_stated_one() -> None:
    assert claims("The repair cost him 5 grand in the end.", "The repair cost £5,000.") == {"£5,000": "supported"}
    assert claims("The repair cost him 5 grand in the end.", "The repair cost £6,000.") == {"£6,000": "conflict"}
    # Two stated currencies are not the same money: not supported, and not a conflict either.
    assert claims("The repair cost €5,000 in the end.", "The repair cost $5,000.") == {"$5,000": "unsupported"}


def test_a_full_date_is_supported_by_its_day_and_month_with_the_year_elsewhere() -> None:
    source = "The album came out in 2004. It hits stores on Election Day, November 2."
    assert claims(source, "The album was released on November 2, 2004.") == {"November 2, 2004": "supported"}
    assert claims(source, "The album was released in November 2004.") == {"November 2004": "unsupported"}
    assert claims(source, "The album hits stores on November 3, 2004.") == {"November 3, 2004": "conflict"}


def test_unsupported_spans_and_the_span_features_compare_normalized_values() -> None:
    indexes = [index_values("We may loose 5 mln bucks and the call is at 7.30pm.")]
    found = {answer[v.start : v.end]: v.stated for answer in ["Losing 5 million dollars at 19:30; 6 million dollars."]
             for v in stated_values(answer, indexes)}  # fmt: skip
    assert found == {"5 million dollars": True, "19:30": True, "6 million dollars": False}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("They won 3-0 at home.", ("score", 3.0, 0.0)),
        ("It ended 0\u20130.", ("score", 0.0, 0.0)),
        ("a 2\u20135 defeat away", ("score", 2.0, 5.0)),  # upwards, but a result word follows
        ("They lost 1-3.", ("score", 1.0, 3.0)),
        ("three goals to nil", ("score", 3.0, 0.0)),
        ("She won 6 to 2 in the final set.", ("score", 6.0, 2.0)),
        ("a 102-99 overtime win", ("score", 102.0, 99.0)),
        ("Bring 2-5 players each.", ("number", 2.0, 5.0)),  # a range runs upwards
        ("Take 8 - 5 to get the rest.", ("number", 5.0, 8.0)),  # spaced, no result word: maybe a subtraction
        ("so x = 8-5", ("number", 5.0, 8.0)),  # next to an arithmetic sign: a subtraction
        ("Rangers (3-1) went through.", ("score", 3.0, 1.0)),
        ("The odds were 6 to 2.", ("number", 2.0, 6.0)),  # "to" without a result word: a ratio or a range
        ("the 2019-20 season", ("year", 2019.0, 2020.0)),
        ("It takes 3-4 weeks.", ("quantity:duration", 3 * 604800.0, 4 * 604800.0)),
    ],
)
def test_a_match_score_is_one_value_with_its_sides_in_written_order(
    text: str, expected: tuple[str, float, float]
) -> None:
    assert value(text) == expected


SCORE_SOURCE = "The hosts edged their neighbours 2-1 in the cup tie on Tuesday night."


@pytest.mark.parametrize(
    "answer",
    [
        "The hosts won the cup tie 2-1 on Tuesday.",
        "The hosts won the cup tie 2\u20131 on Tuesday.",
        "The hosts won the cup tie by two goals to one on Tuesday.",
    ],
)
def test_a_score_restated_is_supported(answer: str) -> None:
    assert set(claims(SCORE_SOURCE, answer).values()) == {"supported"}


@pytest.mark.parametrize(
    "answer",
    [
        "The hosts won the cup tie 3-1 on Tuesday.",
        "The hosts won the cup tie 2-0 on Tuesday.",
        "The hosts lost the cup tie 1-2 on Tuesday.",  # the sides swapped, the teams in the same order
        "The hosts won the cup tie by three goals to one on Tuesday.",
    ],
)
def test_a_changed_score_is_a_conflict(answer: str) -> None:
    assert set(claims(SCORE_SOURCE, answer).values()) == {"conflict"}


def test_a_score_is_supported_by_its_sides_where_the_source_writes_no_score() -> None:
    record = '{"home_team": "Harriers", "home_goals": 2, "away_goals": 1}'
    assert claims(record, "The Harriers won 2-1 at home.") == {"2-1": "supported"}
    assert claims(record, "The Harriers won 3-1 at home.") == {"3-1": "unsupported"}


def test_a_coarser_date_is_supported_by_a_full_one_and_a_changed_one_contradicted() -> None:
    source = "The bridge reopened to traffic on 2 November 2004 after repairs."
    assert claims(source, "The bridge reopened to traffic in November 2004.") == {"November 2004": "supported"}
    assert claims(source, "The bridge reopened to traffic in December 2004.") == {"December 2004": "conflict"}
    assert claims(source, "The bridge reopened to traffic on November 3.") == {"November 3": "conflict"}
