"""How well each answer word is supported by the sources, as numbers a small model can learn from.

The unit is the word (a run of letters and digits, kept whole across inner separators as in
"1,889", "8:00" or "Friedrichstraße"; one per CJK character), not the model's word piece:
labels, evidence and spans are about words.  A word's support is read off the contextual
token embeddings of one forward pass over the answer and one over the sources and question
(:meth:`~detectors.models.embeddings.Embedder.encode_tokens`): for each of its pieces the best
cosine to any support token, plus its neighbourhood and plain lexical facts (is the word in
the sources at all, is it a number, a name).  A wrong year in an otherwise matching
sentence barely moves a sentence embedding, but the token "1950" has no good match anywhere.

Used alike by the unsupported-spans detector and by ``halluwatch train``, so the features
a model is trained on are the features it is run on.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

import numpy as np
import numpy.typing as npt

from detectors.contradiction.detector import StatedValue
from detectors.models.embeddings import TokenVectors
from detectors.text.prose import word_list

Matrix = npt.NDArray[np.float64]

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_WORD: Final = re.compile(rf"[{_CJK}]|[^\W_{_CJK}]+(?:[.,:'\u2019-][^\W_{_CJK}]+)*")
_SENTENCE_ENDS: Final = ".!?:\u3002"
# Function words carry no claim of their own; their support says little.
STOP_WORDS: Final = word_list("stop_words.txt")
_NEIGHBOURS = 2  # words either side whose support smooths a word's own
_REGION = 5  # words either side for the share of absent content words around a word
LOW_SUPPORT = 0.5  # a content word's best token cosine below this counts as weakly supported
LIKELY = 0.1  # a word probability above about twice the base rate of hallucinated words (RAGTruth: 4 %)

WORD_FEATURES: Final = (
    "best", "best_mean", "top3", "absent", "stop", "number", "capitalised",
    "near_best_mean", "near_best_min", "near_absent", "number_absent", "long", "position",
    "value_stated", "value_unstated",
)  # fmt: skip
CALL_FEATURES: Final = (
    "max_p", "top3_p", "n_likely", "share_likely", "mean_p", "absent_share", "absent_n",
    "low_support_n", "low_support_share", "number_absent_n", "answer_words", "support_tokens",
)  # fmt: skip
# What the answer rests on decides what an unsupported word means: retold prose keeps the
# source's words, while an answer written from JSON records (tool results, database rows, the
# RAGTruth data-to-text task) brings its own wording around the values.  Each kind has its own
# word model and span threshold (held-out span F1 within hallucinated answers 0.19 -> 0.30 over six
# document splits).
SupportKind = Literal["prose", "json"]
SUPPORT_KINDS: Final[tuple[SupportKind, ...]] = ("prose", "json")


@dataclass(frozen=True, slots=True)
class Word:
    """One answer word and where it sits in the answer (character offsets)."""

    start: int
    end: int
    text: str


@dataclass(frozen=True, slots=True)
class SupportMatch:
    """The support token that matches an answer word best: which support text, where in it."""

    support: int
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class WordSupport:
    """The answer's words, their feature rows (``WORD_FEATURES`` order) and where each matched best.

    ``best_token`` indexes the support tokens of all support texts stacked in order (-1: the
    word has no token or there is no support); :meth:`match` turns one into a place in a text.
    """

    words: tuple[Word, ...]
    features: Matrix
    support_tokens: int
    kind: SupportKind
    best_token: npt.NDArray[np.int64]
    token_owner: npt.NDArray[np.int64]
    token_offsets: npt.NDArray[np.int64]

    @property
    def content(self) -> npt.NDArray[np.bool_]:
        """Which words are content words (not stop words)."""
        return self.features[:, WORD_FEATURES.index("stop")] == 0 if len(self.words) else np.zeros(0, dtype=bool)

    def match(self, word: int) -> SupportMatch | None:
        """The support token that word ``word`` matched best, or None."""
        token = int(self.best_token[word])
        if token < 0:
            return None
        start, end = self.token_offsets[token]
        return SupportMatch(int(self.token_owner[token]), int(start), int(end))


def split_words(text: str, offset: int = 0) -> list[Word]:
    """The words of ``text`` with their offsets (plus ``offset``: ``text`` may be a slice of a longer one)."""
    return [Word(m.start() + offset, m.end() + offset, m.group()) for m in _WORD.finditer(text)]


def text_vocabulary(text: str) -> frozenset[str]:
    """Lower-cased words of ``text``, for exact-presence checks."""
    return frozenset(w.group().lower() for w in _WORD.finditer(text))


def word_support(
    answer: str,
    words: Sequence[Word],
    answer_tokens: TokenVectors,
    support: Sequence[TokenVectors],
    vocab: frozenset[str],
    kind: SupportKind = "prose",
    values: Sequence[StatedValue] = (),
    token_count: int | None = None,
) -> WordSupport:
    """Support features of each of the answer's ``words`` against the support texts' tokens.

    ``values`` are the answer's numbers, dates, times and quantities with whether the support
    states them after normalisation ("9 am to 9 pm" is stated by "9:0-21:0"): token cosine
    alone cannot tell a restated value from a changed one.  ``token_count`` is how many
    tokens the whole support holds when ``support`` is only the parts read (default: all of it).
    """
    owner = np.repeat(np.arange(len(support), dtype=np.int64), [len(p.offsets) for p in support])
    token_offsets = np.array([o for p in support for o in p.offsets], dtype=np.int64).reshape(-1, 2)
    best, top3, best_index = _token_support(answer_tokens, support)
    n = len(words)
    features = np.zeros((n, len(WORD_FEATURES)))
    best_token = np.full(n, -1, dtype=np.int64)
    pieces = _pieces(words, answer_tokens.offsets)
    if pieces is not None:
        has, word_of, token = pieces
        first = np.flatnonzero(np.r_[True, word_of[1:] != word_of[:-1]])
        counts = np.diff(np.r_[first, len(token)])
        features[has, 0] = np.minimum.reduceat(best[token], first)
        features[has, 1] = np.add.reduceat(best[token], first) / counts
        features[has, 2] = np.add.reduceat(top3[token], first) / counts
        weakest = token[np.lexsort((best[token], word_of))[first]]  # the piece that decides the word's support
        best_token[has] = best_index[weakest]
    texts = [w.text for w in words]
    lower = [t.lower() for t in texts]
    number = np.array([any(c.isdigit() for c in t) for t in texts], dtype=bool)
    absent = np.array([t not in vocab for t in lower], dtype=bool)
    features[:, 3] = absent
    features[:, 4] = [t in STOP_WORDS for t in lower]
    features[:, 5] = number
    features[:, 6] = [
        i > 0 and w.text[:1].isupper() and not _starts_sentence(answer, w.start) for i, w in enumerate(words)
    ]
    features[:, 10] = number & absent
    features[:, 11] = [len(t) > 6 for t in texts]
    features[:, 12] = np.arange(n) / max(n - 1, 1)
    _mark_values(words, values, features)
    _neighbourhood(features)
    count = len(owner) if token_count is None else token_count
    return WordSupport(tuple(words), features, count, kind, best_token, owner, token_offsets)


def flagged_runs(flagged: npt.NDArray[np.bool_], content: npt.NDArray[np.bool_]) -> list[list[int]]:
    """Runs of flagged content words, as word indices; stop words may sit inside a run, not end it."""
    runs: list[list[int]] = []
    run: list[int] = []
    for i in range(len(flagged) + 1):
        if i < len(flagged) and flagged[i] and content[i]:
            run.append(i)
        elif i == len(flagged) or content[i]:
            if run:
                runs.append(run)
            run = []
    return runs


def call_features(features: Matrix, support_tokens: int, probabilities: Matrix) -> Matrix:
    """One row (``CALL_FEATURES`` order) summing up a call's word features and word probabilities."""
    content = features[:, WORD_FEATURES.index("stop")] == 0
    p = probabilities[content]
    n_content = max(int(content.sum()), 1)
    absent = features[content, WORD_FEATURES.index("absent")]
    low = features[content, WORD_FEATURES.index("best")] < LOW_SUPPORT
    number_absent = features[:, WORD_FEATURES.index("number_absent")].sum()
    top = np.sort(p)[-3:] if len(p) else np.zeros(1)
    return np.array(
        [
            p.max() if len(p) else 0.0,
            top.mean(),
            np.log1p((p >= LIKELY).sum()),
            (p >= LIKELY).sum() / n_content,
            p.mean() if len(p) else 0.0,
            absent.sum() / n_content,
            np.log1p(absent.sum()),
            np.log1p(low.sum()),
            low.sum() / n_content,
            np.log1p(number_absent),
            np.log1p(len(features)),
            np.log1p(support_tokens),
        ]
    )


def _token_support(
    answer_tokens: TokenVectors, support: Sequence[TokenVectors]
) -> tuple[Matrix, Matrix, npt.NDArray[np.int64]]:
    """Per answer token: best cosine to any support token, mean of the best three, and which token was best."""
    count = len(answer_tokens.offsets)
    rows = [p.vectors for p in support if len(p.offsets)]
    if not rows or not count:
        return np.zeros(count), np.zeros(count), np.full(count, -1, dtype=np.int64)
    sims = answer_tokens.vectors @ np.vstack(rows).T
    best_index = sims.argmax(axis=1).astype(np.int64)
    k = min(3, sims.shape[1])
    top3 = np.partition(sims, -k, axis=1)[:, -k:].mean(axis=1)
    return sims[np.arange(count), best_index].astype(np.float64), top3.astype(np.float64), best_index


def _pieces(
    words: Sequence[Word], offsets: tuple[tuple[int, int], ...]
) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.int64], npt.NDArray[np.int64]] | None:
    """The model's tokens overlapping each word (offsets are sorted), as flat pairs.

    Returns which words have any token, and for those, grouped by word in order, the
    word's index among them and the token's index; None when no word has a token.
    """
    spans = np.array(offsets, dtype=np.int64).reshape(-1, 2)
    real = np.flatnonzero(spans[:, 1] > spans[:, 0])  # zero-width tokens carry no text
    starts, ends = spans[real, 0], spans[real, 1]
    word_starts = np.array([w.start for w in words], dtype=np.int64)
    word_ends = np.array([w.end for w in words], dtype=np.int64)
    lo = np.searchsorted(ends, word_starts, side="right")  # first token ending after the word starts
    hi = np.searchsorted(starts, word_ends, side="left")  # first token starting at or after its end
    has = hi > lo
    if not has.any():
        return None
    counts = (hi - lo)[has]
    word_of = np.repeat(np.arange(len(counts)), counts)
    within = np.arange(len(word_of)) - np.repeat(np.cumsum(counts) - counts, counts)
    return has, word_of, real[np.repeat(lo[has], counts) + within]


def _mark_values(words: Sequence[Word], values: Sequence[StatedValue], features: Matrix) -> None:
    """Set the value columns of words that lie inside a stated or an unstated value, in place."""
    if not values or not words:
        return
    starts = np.array([w.start for w in words], dtype=np.int64)
    stated, unstated = WORD_FEATURES.index("value_stated"), WORD_FEATURES.index("value_unstated")
    for value in values:
        inside = slice(np.searchsorted(starts, value.start), np.searchsorted(starts, value.end))
        features[inside, stated if value.stated else unstated] = 1.0


def _starts_sentence(text: str, position: int) -> bool:
    """Whether only whitespace separates ``position`` from a sentence end or line break before it."""
    head = text[max(0, position - 80) : position]
    stripped = head.rstrip()
    return "\n" in head[len(stripped) :] or stripped[-1:] in _SENTENCE_ENDS


def _window_sums(values: Matrix, reach: int) -> Matrix:
    """Sum of ``values`` over ``reach`` items either side of each item (fewer at the ends)."""
    n = len(values)
    cumulative = np.r_[0.0, np.cumsum(values)]
    index = np.arange(n)
    sums: Matrix = cumulative[np.minimum(index + reach + 1, n)] - cumulative[np.maximum(index - reach, 0)]
    return sums


def _neighbourhood(features: Matrix) -> None:
    """Fill the neighbourhood columns from the words' own support, in place."""
    n = len(features)
    if not n:
        return
    best, absent, stop = features[:, 0], features[:, 3], features[:, 4]
    features[:, 7] = _window_sums(best, _NEIGHBOURS) / _window_sums(np.ones(n), _NEIGHBOURS)
    padded = np.pad(best, _NEIGHBOURS, constant_values=np.inf)
    features[:, 8] = np.lib.stride_tricks.sliding_window_view(padded, 2 * _NEIGHBOURS + 1).min(axis=1)
    content = 1.0 - stop
    features[:, 9] = _window_sums(absent * content, _REGION) / np.maximum(_window_sums(content, _REGION), 1.0)
