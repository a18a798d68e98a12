"""Text helpers the content detectors share: sentences with offsets, citation markers, words.

Sentence boundaries come from ``sentencex`` (Wikimedia's rule-based segmenter, Rust core):
it knows abbreviations ("e.g.", "Dr.", "U.S."), decimals ("3.5") and CJK full stops, and
splits a 2 kB source in ~20 µs, which matters because every source of every call is split.
On top of it every line break ends a sentence (LLM answers put list items and headings on
their own lines, and a list item is a claim of its own) and list markers are left out.
Offsets are character offsets into the original text, so evidence can point at the exact
answer span.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from importlib import resources

import sentencex

MIN_STEM_CHARS = 4  # two forms of one word share a stem at least this long...
INFLECTION_CHARS = 3  # ...and neither goes on for more letters than this past it
# A record's key and its colon, JSON- or Python-quoted: what structured-source readers start from.
RECORD_KEY = r"""["'](?P<key>[^\W\d_][\w\- ]{0,48})["']\s*:\s*"""
_KEY_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|[^\W\d_]+")
# A fenced (JSON) code block's content; a closing fence the token limit cut off may be missing.
JSON_FENCE = re.compile(r"```[ \t]*(?:json)?[ \t]*\n?(.*?)(?:```|\Z)", re.DOTALL | re.IGNORECASE)
_CUT_LITERAL = len("fals")  # the longest unfinished literal a cut can leave
_MAX_RANGE = 20  # "[1-300]" is a typo or a table, not 300 citations
_SEPARATORS = "[,;\uff0c\u3001\uff1b]"  # also fullwidth comma, ideographic comma, semicolon
_DASHES = "-\u2013"
_ID = rf"\d{{1,4}}(?:\s*[{_DASHES}]\s*\d{{1,4}})?"
_ID_LIST = rf"{_ID}(?:\s*{_SEPARATORS}\s*{_ID})*"
_CITATION = re.compile(rf"\[\s*({_ID_LIST})\s*\]|【\s*({_ID_LIST})\s*】")
_LINE = re.compile(r"[^\n\r]+")
_LIST_MARKER = re.compile(r"\s*(?:[-*•]|\d{1,3}[.)])\s+")
_SURROGATE = re.compile("[\ud800-\udfff]")
# Starts only where a run of spaces starts: from every position inside a long run the
# engine would rescan the rest of it (quadratic on a sentence padded with spaces).
_SPACE_BEFORE_PUNCTUATION = re.compile("(?<!\\s)\\s+([.,;:!?\u3002\uff0c\uff01\uff1f])")
_SPACES = re.compile(r"\s{2,}")
# One token per CJK character (those scripts do not separate words), else runs of word characters.
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_WORD = re.compile(rf"[{_CJK}]|[^\W{_CJK}]+")


@dataclass(frozen=True, slots=True)
class Sentence:
    """A sentence and its character offsets: ``source[start:end] == text``."""

    start: int
    end: int
    text: str


@dataclass(frozen=True, slots=True)
class Citations:
    """Citation ids found in a sentence (in order, unique) and the sentence without them."""

    ids: tuple[str, ...]
    text: str


def split_sentences(text: str, language: str = "en", max_chars: int | None = None) -> list[Sentence]:
    """Sentences of ``text``, whitespace-trimmed, with offsets; blank ones are dropped.

    ``max_chars`` cuts longer sentences at a space: text without sentence punctuation (JSON
    records, tables, logs) would otherwise be one "sentence" that an embedding truncates.
    """
    sentences: list[Sentence] = []
    for line in _LINE.finditer(text):
        offset = line.start() + (marker.end() if (marker := _LIST_MARKER.match(line.group())) else 0)
        # Same length, so offsets hold: the Rust segmenter rejects lone surrogates.
        content = _SURROGATE.sub("\ufffd", text[offset : line.end()])
        for boundary in sentencex.get_sentence_boundaries(language, content):
            segment = text[offset + int(boundary["start_index"]) : offset + int(boundary["end_index"])]
            stripped = segment.strip()
            if stripped:
                first = offset + int(boundary["start_index"]) + segment.index(stripped)
                sentences += _cut(Sentence(first, first + len(stripped), stripped), max_chars)
    return sentences


def _cut(sentence: Sentence, max_chars: int | None) -> list[Sentence]:
    """``sentence`` in pieces of at most ``max_chars``, cut at the last space that keeps half."""
    pieces: list[Sentence] = []
    start, text = sentence.start, sentence.text
    while max_chars and len(text) > max_chars:
        cut = text.rfind(" ", max_chars // 2, max_chars)
        cut = cut if cut > 0 else max_chars
        head, rest = text[:cut].rstrip(), text[cut:]
        pieces.append(Sentence(start, start + len(head), head))
        start += cut + len(rest) - len(rest.lstrip())
        text = rest.lstrip()
    if text:
        pieces.append(Sentence(start, start + len(text), text))
    return pieces


def parse_citations(sentence: str) -> Citations:
    """Markers ``[1]``, ``[1][3]``, ``[1, 2]``, ``[2-4]``, ``【1】`` -> ids, plus the cleaned sentence."""
    ids: dict[str, None] = {}
    for match in _CITATION.finditer(sentence):
        for part in re.split(_SEPARATORS, match.group(1) or match.group(2)):
            low, _, high = part.replace("\u2013", "-").partition("-")
            first = int(low)
            last = int(high) if high.strip() else first
            if last < first or last - first >= _MAX_RANGE:
                last = first
            ids.update((str(n), None) for n in range(first, last + 1))
    if not ids:
        return Citations((), sentence)
    cleaned = _SPACE_BEFORE_PUNCTUATION.sub(r"\1", _CITATION.sub(" ", sentence))
    return Citations(tuple(ids), _SPACES.sub(" ", cleaned).strip())


def citation_spans(text: str) -> list[tuple[int, int]]:
    """Where the citation markers (``[1]``, ``【2】``) of ``text`` are: pointers to sources, not words of a claim."""
    return [match.span() for match in _CITATION.finditer(text)]


def words(text: str) -> list[str]:
    """Lower-cased word tokens (CJK: one per character), for lexical overlap and length checks."""
    return _WORD.findall(text.lower())


def is_json_document(text: str) -> bool:
    """Whether ``text`` is one JSON object or array (structured output has no sentences or words to support)."""
    return _json_document(text, cut_off=False)


def is_structured_answer(answer: str, finish_reason: str | None) -> bool:
    """Whether an answer is structured output: one JSON document, or the start of one the token limit cut off.

    A model that stops at its limit (finish reason ``length``) leaves JSON that does not parse;
    read as prose, its keys would be unsupported words and its text one ungrounded sentence
    (schema_violation names the cut).  Models often wrap JSON in a code fence, which is no prose
    either: an answer that is one fenced block counts by what is inside it.
    """
    fenced = JSON_FENCE.fullmatch(answer.strip())
    return _json_document(fenced.group(1) if fenced else answer, cut_off=finish_reason == "length")


def _json_document(text: str, *, cut_off: bool) -> bool:
    stripped = text.strip()
    if stripped[:1] not in ("{", "["):
        return False
    try:
        json.loads(stripped)
    except json.JSONDecodeError as error:
        # Cut off, the text fails only where it stops: inside a string, or in a number or
        # literal at its very end ("tru").  "[1] As the source says" fails at its start.
        return cut_off and (error.msg.startswith("Unterminated string") or error.pos >= len(stripped) - _CUT_LITERAL)
    return True


def same_word(word: str, other: str) -> bool:
    """Whether two lower-cased words are forms of one word.

    Forms differ in an ending of at most ``INFLECTION_CHARS`` letters past a shared stem of
    at least ``MIN_STEM_CHARS``: "Tuesdays" / "Tuesday", "Singaporean" / "Singapore",
    "parking" / "park" -- but not "Austria" / "Australia" or "research" / "reserve".
    """
    if word == other:
        return True
    shared = next((i for i, (a, b) in enumerate(zip(word, other, strict=False)) if a != b), min(len(word), len(other)))
    return shared >= max(MIN_STEM_CHARS, max(len(word), len(other)) - INFLECTION_CHARS)


def word_list(filename: str) -> frozenset[str]:
    """The words of a one-per-line list in ``detectors/data`` (``#`` lines are comments)."""
    lines = resources.files("detectors.data").joinpath(filename).read_text("utf-8").splitlines()
    return frozenset(line.strip() for line in lines if line.strip() and not line.startswith("#"))


def key_words(key: str) -> list[str]:
    """A record key's words, lower-cased: camelCase, snake_case, kebab-case and spaces split ("priceEUR")."""
    return [word.lower() for word in _KEY_WORD.findall(key.replace("_", " "))]
