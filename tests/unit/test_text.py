from __future__ import annotations

import pytest

from detectors.text.prose import Citations, is_structured_answer, parse_citations, split_sentences, words


def texts(text: str) -> list[str]:
    return [s.text for s in split_sentences(text)]


def test_offsets_point_into_the_original_text() -> None:
    text = "  Dr. Smith paid $3.5 million, e.g. for land [1]. It was built in 1889.[2]\n- item one\r\n  Last one.  "
    sentences = split_sentences(text)
    assert [text[s.start : s.end] for s in sentences] == [s.text for s in sentences]
    assert [s.text for s in sentences] == [
        "Dr. Smith paid $3.5 million, e.g. for land [1].",
        "It was built in 1889.[2]",
        "item one",
        "Last one.",
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Costs rose 3.5% vs. last year. Mr. Brown left at 5 p.m. today.", 2),
        ("See Fig. 3 for details. Also U.S. policy changed.", 2),
        ("1. First item\n2. Second item", 2),
        ("Heading\n\nParagraph without a stop", 2),
        ("北京是中国的首都。它很大\uff01", 2),
        ("Это тест. Второе предложение.", 2),
    ],
)
def test_sentence_boundaries(text: str, expected: int) -> None:
    assert len(texts(text)) == expected


@pytest.mark.parametrize("text", ["", "   ", "\n\n", "[1]", "🙂🙂", "\x00\ud800 odd", "a" * 10_000])
def test_odd_input_never_crashes(text: str) -> None:
    for sentence in split_sentences(text, max_chars=300):
        assert text[sentence.start : sentence.end] == sentence.text


def test_long_sentences_are_cut_at_spaces() -> None:
    text = '{"name": "Live Oak Cafe", "city": "Santa Barbara", ' * 30
    pieces = split_sentences(text, max_chars=200)
    assert len(pieces) > 5
    assert all(len(p.text) <= 200 and text[p.start : p.end] == p.text for p in pieces)


@pytest.mark.parametrize(
    ("sentence", "ids", "clean"),
    [
        ("Built in 1889 [1].", ("1",), "Built in 1889."),
        ("Built in 1889 [1][3].", ("1", "3"), "Built in 1889."),
        ("Tall [1, 2] and old 【4】.", ("1", "2", "4"), "Tall and old."),
        ("Range [2-4] here.", ("2", "3", "4"), "Range here."),
        ("No markers at all.", (), "No markers at all."),
        ("A reversed range [9-1].", ("9",), "A reversed range."),
    ],
)
def test_citation_markers(sentence: str, ids: tuple[str, ...], clean: str) -> None:
    assert parse_citations(sentence) == Citations(ids, clean)


def test_words_split_cjk_per_character() -> None:
    assert words("The Eiffel-Tower, 330 m! 北京") == ["the", "eiffel", "tower", "330", "m", "北", "京"]


@pytest.mark.parametrize(
    ("answer", "cut_off_structured"),
    [
        ('{"sku": "CHR-ERG-01", "quantity": 12, "ship_to": "Berlin office, Friedrichstra', True),  # inside a string
        ('[{"sku": "A", "quantity": 2}, {"sku": "B", "quantity": 1', True),  # after a number
        ('{"in_stock": tru', True),  # inside a literal
        ('{"sku": "A",', True),
        ("[1] The tower was built in 1889 and is 330 metres tall, the source says.", False),
        ('{"sku": "A"} is what I found, and more text the limit cut', False),
        ("The order is for twelve chairs, shipped to Berlin", False),
        ('```json\n{"sku": "A", "quantity": 2, "ship_to": "Lee', True),  # a fenced block, cut before its fence closed
    ],
)
def test_json_cut_off_at_the_token_limit_is_still_structured(answer: str, cut_off_structured: bool) -> None:
    assert is_structured_answer(answer, "length") is cut_off_structured
    assert is_structured_answer(answer, "stop") is False  # a complete answer must parse
    assert is_structured_answer('{"sku": "A", "quantity": 2}', "stop") and is_structured_answer("[1, 2]", None)


@pytest.mark.parametrize(
    ("answer", "structured"),
    [
        ('```json\n{"sku": "A", "quantity": 2}\n```', True),
        ('```\n[{"sku": "A"}, {"sku": "B"}]\n```\n', True),
        ('Here is the order:\n```json\n{"sku": "A"}\n```', False),  # prose around it is prose to check
        ('```json\n{"sku": "A"}\n```\nI picked the cheaper one.', False),
        ("```python\nprint(1)\n```", False),
    ],
)
def test_an_answer_that_is_one_fenced_json_block_is_structured(answer: str, structured: bool) -> None:
    assert is_structured_answer(answer, "stop") is structured
