from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from detectors.base import DetectorResult, DetectorStatus
from detectors.contradiction import ContradictionConfig
from detectors.contradiction.detector import ContradictionDetector
from detectors.llm_call import LLMCall, Source
from detectors.text.quantities import Kind, extract_claims, extract_names, extract_values
from tests.calls import demo_call, make_llm_call, whole_words

EIFFEL_CONTEXT = '{"name": "Eiffel Tower", "built": "1887-1889", "height": "330 meters", "location": "Paris, France"}'
EIFFEL_QUESTION = "When was the Eiffel Tower built and how tall is it?"


def make_call(answer: str, context: str | list[str] = "", question: str = "") -> LLMCall:
    passages = [context] if isinstance(context, str) else context
    return make_llm_call(answer, question, [Source(str(i), text) for i, text in enumerate(passages) if text])


def detect(answer: str, context: str | list[str] = "", question: str = "", **config: Any) -> DetectorResult:
    detector = ContradictionDetector(ContradictionConfig(**config), threshold=0.5)
    return detector.detect_batch([make_call(answer, context, question)])[0]


def verdicts(result: DetectorResult) -> dict[str, str]:
    return {claim["text"]: claim["verdict"] for claim in result.evidence["claims"]}


def test_eiffel_example_reports_both_conflicts_with_context_spans() -> None:
    answer = "The Eiffel Tower was built in 1950, is 500 meters tall, and is located in Paris, France."
    result = detect(answer, EIFFEL_CONTEXT, EIFFEL_QUESTION)
    assert result.status is DetectorStatus.OK
    assert result.flagged and result.severity == 4
    assert result.summary == "answer says 1950, context says 1887-1889 (+1 more)"
    assert result.evidence["conflicts"] == 2 and result.evidence["unsupported"] == 0
    conflicts = {c["text"]: c for c in result.evidence["claims"] if c["verdict"] == "conflict"}
    assert set(conflicts) == {"1950", "500 meters"}
    for claim in conflicts.values():
        assert EIFFEL_CONTEXT[claim["context_start"] : claim["context_end"]] == claim["context_text"]
    assert conflicts["500 meters"]["context_text"] == "330 meters"
    assert [span["text"] for span in result.evidence["spans"]] == ["1950", "500 meters"]


def test_a_conflict_quotes_the_source_sentence_stating_the_rival_value() -> None:
    travel = demo_call("completed in 1950")  # the demo's travel-guide answer: "completed in 1950 ... 500 m tall"
    (result,) = ContradictionDetector(ContradictionConfig(), threshold=0.5).detect_batch([travel])
    conflicts = {c["text"]: c for c in result.evidence["claims"] if c["verdict"] == "conflict"}
    assert "built between 1887 and 1889" in conflicts["1950"]["context_passage"]
    assert "330 m tall" in conflicts["500 m"]["context_passage"]
    for claim in conflicts.values():
        assert claim["context_text"] in claim["context_passage"]
        assert whole_words(claim["context_passage"], travel.grounding_text)
    assert not any("context_passage" in c for c in result.evidence["claims"] if c["verdict"] != "conflict")


def test_supported_answer_is_not_flagged() -> None:
    answer = "The Eiffel Tower in Paris was built from 1887 to 1889 and is 330 m (0.33 km) tall."
    result = detect(answer, EIFFEL_CONTEXT, EIFFEL_QUESTION)
    assert result.status is DetectorStatus.OK
    assert not result.flagged and result.score == 0.0 and result.severity == 0
    assert set(verdicts(result).values()) == {"supported"}


@pytest.mark.parametrize(
    ("answer", "context", "verdict"),
    [
        ("It is 5 km long.", "The trail is 5,000 m long.", "supported"),
        ("It is 5 km long.", "The trail is 3,000 m long.", "conflict"),
        ("The drive takes 2 hours.", "The drive takes 120 minutes.", "supported"),
        ("The file is 2 GB.", "The file is 2,000 MB.", "supported"),
        ("It was 70°F outside.", "It was 21°C outside.", "supported"),
        ("The bridge is 330 m long.", '{"bridge length": 330}', "supported"),
    ],
)
def test_units_are_normalized(answer: str, context: str, verdict: str) -> None:
    assert list(verdicts(detect(answer, context)).values()) == [verdict]


@pytest.mark.parametrize(
    ("answer", "verdict"),
    [
        ("The works ran from 1887 to 1889.", "supported"),
        ("The works ran 1887\u20131889.", "supported"),  # en dash
        ("The works finished in 1888.", "supported"),  # inside the context's range
        ("The works ran from 1887 to 1895.", "conflict"),
    ],
)
def test_ranges(answer: str, verdict: str) -> None:
    assert list(verdicts(detect(answer, "The works ran between 1887 and 1889.")).values()) == [verdict]


def test_between_and_range_extraction() -> None:
    (found,) = extract_values("between 5 and 10 km")
    assert (found.kind, found.low, found.high, found.text) == (Kind.QUANTITY, 5000.0, 10000.0, "5 and 10 km")
    assert [found.text for found in extract_values("rose 5 and 10")] == ["5", "10"]  # "and" joins after "between"


@pytest.mark.parametrize(
    ("answer", "verdict"),
    [
        ("Sales grew 40 percent.", "supported"),
        ("Sales grew 40%.", "supported"),
        ("Sales grew 45%.", "conflict"),
    ],
)
def test_percentages(answer: str, verdict: str) -> None:
    assert list(verdicts(detect(answer, "Sales grew 40% last year.")).values()) == [verdict]


@pytest.mark.parametrize(
    ("answer", "verdict"),
    [
        ("The company raised $3.2 million.", "supported"),  # rounded from the context's exact figure
        ("The company raised 3.2 million dollars.", "supported"),
        ("The company raised $4.5 million.", "conflict"),
        ("The company raised €3.2 million.", "unsupported"),  # another currency is not the same amount
    ],
)
def test_money(answer: str, verdict: str) -> None:
    assert list(verdicts(detect(answer, "The company raised $3,215,000 in its seed round.")).values()) == [verdict]


@pytest.mark.parametrize(
    "answer",
    ["The deal closed on March 3, 1999.", "The deal closed on 3 March 1999.", "The deal closed on 1999-03-03."],
)
def test_dates_in_different_formats_match(answer: str) -> None:
    for context in ("The deal closed on 1999-03-03.", "The deal closed on March 3rd, 1999."):
        assert list(verdicts(detect(answer, context)).values()) == ["supported"]


def test_date_conflict_and_partial_dates() -> None:
    assert verdicts(detect("The deal closed on March 5, 1999.", "The deal closed on March 3, 1999.")) == {
        "March 5, 1999": "conflict"
    }
    # A year alone is supported by a full date in that year.
    assert verdicts(detect("The deal closed in 1999.", "The deal closed on March 3, 1999.")) == {"1999": "supported"}


@pytest.mark.parametrize(
    ("answer", "verdict"),
    [
        ("It was released on November 2, 2004.", "supported"),  # the day in the text, the year in its date line
        ("It was released on November 2, 2005.", "unsupported"),  # a year the text never states
        ("It was released on November 9, 2004.", "unsupported"),
    ],
)
def test_a_full_date_is_stated_by_its_day_and_a_year_stated_elsewhere(answer: str, verdict: str) -> None:
    context = "Posted 2004-10-19. The album hits stores on Election Day, November 2, with a tour to follow."
    assert list(verdicts(detect(answer, context)).values()) == [verdict]


def test_times_of_day() -> None:
    context = '{"hours": {"Monday": "8:0-14:0", "Tuesday": "16:30-21:0"}}'
    assert verdicts(detect("On Monday it is open 8:00 am to 2:00 pm.", context))["8:00 am to 2:00 pm"] == "supported"
    assert verdicts(detect("On Monday it is open 11am-10pm.", context))["11am-10pm"] == "conflict"


def test_name_not_in_context_is_unsupported() -> None:
    result = detect("The tower was designed by Gustave Eiffel in Paris.", "The tower stands in Paris.")
    assert verdicts(result) == {"Gustave Eiffel": "unsupported", "Paris": "supported"}
    assert result.severity == 0 and not result.flagged  # a lone unsupported name stays under 0.5
    assert result.summary == "answer says Gustave Eiffel, context does not"


@pytest.mark.parametrize(
    ("answer", "context"),
    [
        ("The Singaporean firm grew.", "A firm from Singapore grew."),  # demonym
        ("Pirates from Somalia were seen.", "Somali pirates were seen."),
        ("Marathon Bombing Survivor Testifies about it.", "A marathon bombing survivor testified about it."),
        ("She met the UN Security Council.", "She met the U.N. Security Council."),  # acronym without dots
        ("Open on Tuesdays.", "Open on Tuesday."),
        ("It has free Wi-Fi and seating.", '{"WiFi": "free", "OutdoorSeating": true}'),  # joined compound
        ("It has free WiFi and seating.", "It has free Wi-Fi."),
        # Acronyms and expansions, either way round, and part of a name written as one.
        ("Talks with the European Union stalled.", "Talks with the EU stalled."),
        ("Talks with the EU stalled.", "Talks with the European Union stalled."),
        ("A call to the United Nations High Commissioner came.", "A call to the UN High Commissioner came."),
        ("He joined the Bank of America board.", "He joined the BOA board."),
        # Postal codes of regions, as addresses and records write them.
        ("The cafe is in Goleta, California.", '{"city": "Goleta", "state": "CA"}'),
        ("The cafe is in Goleta, CA.", "A cafe in Goleta, California."),
        ("The deli is in New York.", '{"city": "Albany", "state": "NY"}'),
        ("The store is in Toronto, Ontario.", '{"city": "Toronto", "province": "ON"}'),
    ],
)
def test_names_match_other_forms_of_their_words(answer: str, context: str) -> None:
    result = detect(answer, context)
    assert set(verdicts(result).values()) == {"supported"}, verdicts(result)


@pytest.mark.parametrize(
    ("answer", "context"),
    [
        ("He moved to Austria.", "He moved to Australia."),
        ("In the UK.", "In UKIP."),
        # A code matches only in capitals: "in" is not Indiana, and an acronym is no region's code.
        ("The plant is in Indiana.", "The plant is in a small town."),
        ("The plant is in Oregon.", "You can pay by card or cash."),
        ("Talks with the European Union stalled.", "Talks with the eu stalled."),
        ("The firm moved to Texas.", "The firm moved to TPX headquarters."),
    ],
)
def test_names_that_only_look_alike_stay_unsupported(answer: str, context: str) -> None:
    assert set(verdicts(detect(answer, context)).values()) == {"unsupported"}


@pytest.mark.parametrize(
    ("context", "answer"),
    [
        # Tokenised text (Wikipedia dumps, many corpora) spaces punctuation out; the values are the same.
        ("CBS cancelled it on November 14 , 2014 , four episodes in.", "CBS cancelled it on November 14, 2014."),
        ("He was third during the 2007 -- 08 season.", "He was third in the 2007-08 season."),
        ("Preheat the oven to 350 degrees F (175 degrees C).", "Preheat the oven to 350°F (175°C)."),
    ],
)
def test_spaced_out_punctuation_in_dates_and_ranges(context: str, answer: str) -> None:
    assert set(verdicts(detect(answer, context)).values()) == {"supported"}


def test_names_skip_sentence_starts_and_function_words() -> None:
    text = "The Eiffel Tower is tall. However, Paris is busy.\n- Gustave Eiffel built it. Free on Sat. and Sun."
    names = [name.text for name in extract_names(text, [])]
    assert names == ["Eiffel Tower", "Paris", "Eiffel"]


def test_numbers_repeated_from_the_question_are_supported() -> None:
    result = detect("Yes, 42 people can fit in the room.", "The room is large.", question="Can 42 people fit?")
    assert verdicts(result) == {"42": "supported"}
    assert not result.flagged


def test_unsupported_numbers_accumulate() -> None:
    result = detect("There are 17 rooms and 230 seats.", "The hall has rooms and seats.")
    assert result.evidence["unsupported"] == 2
    assert result.flagged and result.severity == 2
    assert result.score == pytest.approx(1 - 0.6 * 0.6)


def test_repeated_value_counts_once() -> None:
    once = detect("There are 17 rooms.", "The hall has rooms.")
    twice = detect("There are 17 rooms. Yes, 17 rooms.", "The hall has rooms.")
    assert once.score == twice.score


def test_not_claims_are_skipped() -> None:
    answer = "1. According to passage 2 [1], it is open 24/7 and uses COVID-19 data in 3D."
    assert extract_claims(answer) == ()


def test_empty_answer_and_missing_context_are_skipped() -> None:
    assert detect("", EIFFEL_CONTEXT).status is DetectorStatus.SKIPPED
    assert detect("It is a tower of iron.", EIFFEL_CONTEXT).status is DetectorStatus.SKIPPED
    no_context = detect("It was built in 1950.", "")
    assert no_context.status is DetectorStatus.SKIPPED and not no_context.flagged
    assert no_context.summary == "no grounding context to check against"


def test_prompt_counts_as_context_when_there_are_no_sources() -> None:
    call = make_call("It was built in 1889.", question="The tower was built in 1889. When was it built?")
    (result,) = ContradictionDetector(ContradictionConfig(), 0.5).detect_batch([call])
    assert result.status is DetectorStatus.OK and verdicts(result) == {"1889": "supported"}


def test_non_english_text() -> None:
    answer = "埃菲尔铁塔建于1950年\uff0c高500米。"
    result = detect(answer, "埃菲尔铁塔建于1887年至1889年\uff0c高330米。")
    assert result.status is DetectorStatus.OK
    assert {claim["text"] for claim in result.evidence["claims"]} == {"1950", "500米"}  # 米: metres
    for claim in result.evidence["claims"]:
        assert answer[claim["start"] : claim["end"]] == claim["text"]
    german = detect("Der Turm wurde 1950 gebaut.", "Der Turm wurde 1887\u20131889 gebaut.")
    assert verdicts(german) == {"Turm": "supported", "1950": "conflict"}


BERLIN_OFFICE = "Ship to the Berlin office, Friedrichstraße 12, 3rd floor."


@pytest.mark.parametrize(
    ("answer", "context", "verdict"),
    [
        ("It goes to Friedrichstraße 12 in Berlin.", BERLIN_OFFICE, "supported"),
        ("It goes to Friedrichstrasse 12 in Berlin.", BERLIN_OFFICE, "supported"),  # "ss" for "ß"
        ("It goes to Friedrichstraße 12 in Berlin.", BERLIN_OFFICE.replace("ß", "ss"), "supported"),
        ("It goes to FRIEDRICHSTRASSE 12 in Berlin.", BERLIN_OFFICE, "supported"),
        ("We fly to Zurich.", "Flights to Zürich leave daily.", "supported"),  # accents dropped
        ("We fly to Zu\u0308rich.", "Flights to Zürich leave daily.", "supported"),  # decomposed ü
        (
            "We fly to \uff3a\uff55\uff52\uff49\uff43\uff48.",
            "Flights to Zürich leave daily.",
            "supported",
        ),  # full-width
        ("We fly to Łódź.", "Flights to Łódź leave daily.", "supported"),
        ("We fly to Łódź.", "Flights to Lodz leave daily.", "unsupported"),  # Ł is a letter of its own
    ],
)
def test_names_beyond_ascii_match_without_case_or_accents(answer: str, context: str, verdict: str) -> None:
    names = {text: found for text, found in verdicts(detect(answer, context)).items() if not text[0].isdigit()}
    assert set(names.values()) == {verdict}


def test_unsupported_name_is_quoted_whole() -> None:
    result = detect(
        "It goes to Friedrichstraße 12 in Berlin.", BERLIN_OFFICE.replace("Friedrichstraße", "Kurfürstendamm")
    )
    assert verdicts(result) == {"Friedrichstraße": "unsupported", "12": "supported", "Berlin": "supported"}
    assert result.summary == "answer says Friedrichstraße, context does not"
    assert [span["text"] for span in result.evidence["spans"]] == ["Friedrichstraße"]


@pytest.mark.parametrize(
    ("answer", "context", "verdict"),
    [
        ("Der Turm ist 3,5 km lang.", "The tower is 3500 m long.", "supported"),
        ("Der Turm kostete 1.889.000 Euro.", "The tower cost 1,889,000 euros.", "supported"),
        ("Der Turm ist \uff13\uff13\uff10 m hoch.", "The tower is 330 m tall.", "supported"),  # full-width
        ("البرج ارتفاعه ٣٣٠ m", "The tower is 330 m tall.", "supported"),
        ("埃菲尔铁塔高三百三十米。", "The tower is 330 m tall.", "supported"),
        ("埃菲尔铁塔高三百米。", "埃菲尔铁塔高330米。", "conflict"),
        ("埃菲尔铁塔于1889年3月31日开放。", "The tower opened on March 31, 1889.", "supported"),
        ("埃菲尔铁塔于1889年5月6日开放。", "埃菲尔铁塔于1889年3月31日开放。", "conflict"),
    ],
)
def test_numbers_beyond_ascii(answer: str, context: str, verdict: str) -> None:
    claims = detect(answer, context).evidence["claims"]
    assert [claim["verdict"] for claim in claims if claim["kind"] != "name"] == [verdict]


def test_garbage_never_raises() -> None:
    detector = ContradictionDetector(ContradictionConfig(), 0.5)
    junk = ["\x00\ud800$$$%%%", "9" * 5000, "1e308 1e309 $-.5 ..., --- 00:00:00 pm", "Ⅻ ١٢٣ ۴۵ \U0001d7d9\U0001d7da"]
    results = detector.detect_batch([make_call(text, text[::-1] or "x") for text in junk])
    assert all(result.status is not DetectorStatus.ERROR for result in results)


def test_huge_context_is_truncated() -> None:
    filler = "The tower was repainted in 1999 at a cost of $2 million and stands 330 m tall. " * 20_000
    detector = ContradictionDetector(ContradictionConfig(max_context_chars=100_000), 0.5)
    (result,) = detector.detect_batch([make_call("It stands 330 m tall.", filler)])
    assert result.evidence["context_truncated"] is True
    assert verdicts(result) == {"330 m": "supported"}


def test_offsets_point_into_the_answer() -> None:
    answer = (
        "Built between 1887 and 1889 by Gustave Eiffel, the 330 m tower cost €7.8 million (about 40 percent "
        "over budget) and opened on March 31, 1889 at 10:00 am; it weighs 7,300 tonnes."
    )
    result = detect(answer, "Unrelated text about bridges.")
    assert len(result.evidence["claims"]) == 8
    for claim in result.evidence["claims"]:
        assert answer[claim["start"] : claim["end"]] == claim["text"]
    for span in result.evidence["spans"]:
        assert answer[span["start"] : span["end"]] == span["text"]


def test_evidence_lists_are_capped() -> None:
    answer = " ".join(f"Item costs ${n}." for n in range(100, 400))
    result = detect(answer, "Items cost money.")
    assert len(result.evidence["claims"]) <= 25 and len(result.evidence["spans"]) <= 20
    assert result.evidence["checked"] == 200 and result.evidence["unsupported"] == 200  # checks stop at 200


def test_names_can_be_switched_off_or_required_multiword() -> None:
    answer = "Eiffel met Gustave Eiffel in 1889."
    assert "Gustave Eiffel" not in verdicts(detect(answer, "In 1889.", check_names=False))
    assert set(verdicts(detect(answer, "In 1889.", min_name_words=2))) == {"Gustave Eiffel", "1889"}


def test_config_is_validated() -> None:
    with pytest.raises(ValidationError):
        ContradictionConfig(relative_tolerance=-1)
    with pytest.raises(ValidationError):
        ContradictionConfig(unknown=1)  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="threshold"):
        ContradictionDetector(ContradictionConfig(), threshold=1.5)


def test_a_large_batch_shares_one_context() -> None:
    context = " ".join(f"In {1900 + i} the plant made {i * 37} cars and {i}% profit." for i in range(40))
    calls = [make_call(f"In {1900 + i} it made {i * 37 + i % 3} cars, a {i}% profit.", context) for i in range(2000)]
    results = ContradictionDetector(ContradictionConfig(), 0.5).detect_batch(calls)
    # two answers in three change the car count by 1 or 2: a conflict with the same year's count
    assert sum(result.evidence["conflicts"] > 0 for result in results) > 1000


def test_yes_no_fields_of_a_record_conflict_when_the_answer_turns_them_round() -> None:
    record = '{"sku": "X1", "price_eur": 420, "in_stock": false, "attributes": {"OutdoorSeating": true, "WiFi": "no"}}'
    result = detect("The X1 costs 420 euros and is in stock; it has outdoor seating and no WiFi.", record)
    assert result.flagged and result.severity == 4
    claims = {claim["text"]: claim for claim in result.evidence["claims"]}
    assert claims["stock"]["verdict"] == "conflict"
    assert claims["stock"]["context_text"] == '"in_stock": false'
    assert record[claims["stock"]["context_start"] : claims["stock"]["context_end"]] == '"in_stock": false'
    assert claims["outdoor seating"]["verdict"] == "supported"
    assert claims["no WiFi"]["verdict"] == "supported"
    assert claims["420 euros"]["verdict"] == "supported"


def test_a_faithful_restatement_of_a_record_is_not_flagged() -> None:
    record = '{"in_stock": true, "is_refundable": "no", "attributes": {"OutdoorSeating": true}}'
    result = detect("It is in stock, offers outdoor seating, and is not refundable.", record)
    assert not result.flagged
    assert {claim["verdict"] for claim in result.evidence["claims"]} == {"supported"}
    assert {claim["text"] for claim in result.evidence["claims"]} >= {"stock", "outdoor seating", "not refundable"}


def test_a_count_the_sources_never_write_is_weak_evidence() -> None:
    context = "Reviewer A loved the pasta. Reviewer B found it slow."
    counted = detect("Two reviewers commented; one found it slow.", context)
    assert verdicts(counted)["Two"] == "unsupported"
    assert not counted.flagged and counted.score == pytest.approx(0.1)
    measured = detect("It is 17 minutes away.", context)  # a value, not a count
    assert measured.score == pytest.approx(0.4)
    assert detect("Two reviewers commented.", context, max_count=1).score == pytest.approx(0.4)


def test_record_fields_take_their_unit_from_the_key() -> None:
    found = {m.text: (m.kind, m.family) for m in extract_values('{"price_eur": 420, "weightKg": 2.5, "stock": 3}')}
    assert found == {
        "420": (Kind.MONEY, "money:EUR"),
        "2.5": (Kind.QUANTITY, "quantity:mass"),
        "3": (Kind.NUMBER, "number"),
    }
    record = '{"sku": "X1", "price_eur": 420, "in_stock": true}'
    assert verdicts(detect("The price of X1 is 420 euros.", record)) == {"X": "supported", "420 euros": "supported"}
    wrong = detect("The price of X1 is 380 euros.", record)
    assert wrong.flagged and wrong.severity == 4
    conflict = next(claim for claim in wrong.evidence["claims"] if claim["verdict"] == "conflict")
    assert (conflict["text"], conflict["context_text"]) == ("380 euros", "420")
