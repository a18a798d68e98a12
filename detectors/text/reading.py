"""Which parts of a call's sources the embedding model reads: short ones whole, of long ones what the answer is about.

Every source is cut into parts: runs of whole sentences of at most ``part_chars`` characters
(about one model input each).  The parts are the model's unit of reading and of caching, so a
part reads the same whether or not its neighbours are read, and a document that recurs is
read once however the calls that bring it choose.

A call whose sources hold at most ``min_chars`` characters is read whole.  Of a longer one,
the parts sharing the most distinct content words with the answer or the question are read
first, until ``min_chars`` are read, then the parts sharing at least ``min_overlap`` of
them, until ``max_chars``; each source's best part is read whatever it shares, so no source
goes unread.  The cost of a cold call is then bounded, whatever size of documents a
retriever returns.

Grounding and unsupported_spans read the same parts (one cached :func:`choose` per call) and
state in their evidence how many characters the model did not read.  Lexical facts (is a
word in the sources at all, which values they state: contradiction's and unsupported_spans')
still come from the whole text, which costs no model pass.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from detectors.config import ReadingConfig
from detectors.models.embeddings import Ranges
from detectors.text import evidence as shown
from detectors.text.prose import split_sentences, word_list, words

_STOP_WORDS = word_list("stop_words.txt")
_CACHE_SIZE = 1024  # calls whose choice is kept: the detectors of a batch ask for the same calls


@dataclass(frozen=True, slots=True)
class Reading:
    """The parts read of each text (character ranges) and how many characters the texts hold."""

    ranges: tuple[Ranges, ...]
    total_chars: int
    complete: bool  # every part read

    @property
    def read_chars(self) -> int:
        """Characters inside the parts read."""
        return sum(end - start for ranges in self.ranges for start, end in ranges)

    def evidence(self) -> dict[str, int]:
        """The evidence keys stating how much the model left unread; none when it read every part."""
        if self.complete:
            return {}
        return {"read_chars": self.read_chars, "unread_chars": self.total_chars - self.read_chars}


def choose(answer: str, question: str, texts: Sequence[str], config: ReadingConfig) -> Reading:
    """The parts of ``texts`` the model reads for this answer (see module docstring); cached per call."""
    return _choose(answer, question, tuple(texts), config)


@functools.lru_cache(maxsize=_CACHE_SIZE)
def _choose(answer: str, question: str, texts: tuple[str, ...], config: ReadingConfig) -> Reading:
    parts = [(source, part) for source, text in enumerate(texts) for part in parts_of(text, config.part_chars)]
    total = sum(len(text) for text in texts)
    if sum(end - start for _, (start, end) in parts) <= config.min_chars:
        return _reading(texts, parts, range(len(parts)), total)
    wanted = frozenset(words(answer) + words(question)) - _STOP_WORDS
    shared = [len(wanted & _content_words(texts[source][start:end])) for source, (start, end) in parts]
    order = sorted(range(len(parts)), key=lambda i: (-shared[i], i))  # best first, then in reading order
    best: dict[int, int] = {}  # each source's best part: the first of its parts in that order
    for i in order:
        best.setdefault(parts[i][0], i)
    chosen: dict[int, None] = dict.fromkeys(best.values())
    read = sum(_length(parts[i]) for i in chosen)
    for i in order:
        size = _length(parts[i])
        if i in chosen or read + size > max(config.max_chars, config.min_chars):
            continue
        if read < config.min_chars or shared[i] >= config.min_overlap:
            chosen[i] = None
            read += size
    return _reading(texts, parts, sorted(chosen), total)


@functools.lru_cache(maxsize=_CACHE_SIZE * 4)
def parts_of(text: str, part_chars: int) -> Ranges:
    """``text`` in runs of whole sentences of at most ``part_chars`` characters (a longer sentence is cut at spaces)."""
    parts: list[tuple[int, int]] = []
    start = end = -1
    for sentence in split_sentences(text, max_chars=part_chars):
        if start >= 0 and sentence.end - start > part_chars:
            parts.append((start, end))
            start = -1
        start = sentence.start if start < 0 else start
        end = sentence.end
    if start >= 0:
        parts.append((start, end))
    return tuple(parts)


def _reading(
    texts: tuple[str, ...], parts: list[tuple[int, tuple[int, int]]], chosen: Sequence[int] | range, total: int
) -> Reading:
    by_text: list[list[tuple[int, int]]] = [[] for _ in texts]
    for i in chosen:
        source, part = parts[i]
        by_text[source].append(part)
    return Reading(tuple(tuple(ranges) for ranges in by_text), total, complete=len(chosen) == len(parts))


def _length(part: tuple[int, tuple[int, int]]) -> int:
    start, end = part[1]
    return end - start


@functools.lru_cache(maxsize=_CACHE_SIZE * 4)
def _content_words(text: str) -> frozenset[str]:
    return frozenset(words(text)) - _STOP_WORDS


def unread_lines(evidence: Mapping[str, Any]) -> list[str]:
    """The evidence line for people saying how much of the sources the model did not read, if any."""
    unread = shown.number(evidence.get("unread_chars"))
    if not unread:
        return []
    return [f"{int(unread):,} characters of the sources not read by the model (little in common with the answer)"]
