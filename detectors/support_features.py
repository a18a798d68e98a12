"""How well each answer word is supported by the sources, as numbers a small model can learn from.

The unit is the word (a run of letters and digits, kept whole across inner separators as in
"1,889", "8:00" or "Friedrichstraße"; one per CJK character), not the model's word piece:
labels, evidence and spans are about words.  A word's support is read off the contextual
token embeddings of one forward pass over the answer and one over the sources and question
(:meth:`~detectors.embeddings.Embedder.encode_tokens`): for each of its pieces the best
cosine to any support token, plus its neighbourhood and plain lexical facts (is the word in
the sources at all, is it a number, a name).  A wrong year in an otherwise matching
sentence barely moves a sentence embedding, but the token "1950" has no good match anywhere.

Used alike by the unsupported-spans detector and by ``halluwatch train``, so the features
a model is trained on are the features it is run on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from typing import Final

import numpy as np
import numpy.typing as npt

from detectors.embeddings import TokenVectors

Matrix = npt.NDArray[np.float64]

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_WORD: Final = re.compile(rf"[{_CJK}]|[^\W_{_CJK}]+(?:[.,:'\u2019-][^\W_{_CJK}]+)*")
_SENTENCE_END: Final = re.compile(r"[.!?:\n\u3002]\s*$")
# Function words carry no claim of their own; their support says little.
STOP_WORDS: Final = frozenset(
    line.strip()
    for line in resources.files("detectors.data").joinpath("stop_words.txt").read_text("utf-8").splitlines()
    if line.strip() and not line.startswith("#")
)
_NEIGHBOURS = 2  # words either side whose support smooths a word's own
_REGION = 5  # words either side for the share of absent content words around a word
LOW_SUPPORT = 0.5  # a content word's best token cosine below this counts as weakly supported
LIKELY = 0.1  # a word probability above about twice the base rate of hallucinated words (RAGTruth: 4 %)

WORD_FEATURES: Final = (
    "best", "best_mean", "top3", "absent", "stop", "number", "capitalised",
    "near_best_mean", "near_best_min", "near_absent", "number_absent", "long", "position",
)  # fmt: skip
CALL_FEATURES: Final = (
    "max_p", "top3_p", "n_likely", "share_likely", "mean_p", "absent_share", "absent_n",
    "low_support_n", "low_support_share", "number_absent_n", "answer_words", "support_tokens",
)  # fmt: skip


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
    """The answer's words, their feature rows (``WORD_FEATURES`` order) and best matches."""

    words: tuple[Word, ...]
    features: Matrix
    matches: tuple[SupportMatch | None, ...]
    support_tokens: int

    @property
    def content(self) -> npt.NDArray[np.bool_]:
        """Which words are content words (not stop words)."""
        return self.features[:, WORD_FEATURES.index("stop")] == 0 if len(self.words) else np.zeros(0, dtype=bool)


def split_words(text: str) -> list[Word]:
    """The words of ``text`` with their offsets."""
    return [Word(m.start(), m.end(), m.group()) for m in _WORD.finditer(text)]


def text_vocabulary(text: str) -> frozenset[str]:
    """Lower-cased words of ``text``, for exact-presence checks."""
    return frozenset(w.group().lower() for w in _WORD.finditer(text))


def word_support(
    answer: str, answer_tokens: TokenVectors, support: list[TokenVectors], vocab: frozenset[str]
) -> WordSupport:
    """Support features of every answer word against the support texts' tokens."""
    words = tuple(split_words(answer))
    pieces = _pieces_per_word(words, answer_tokens.offsets)
    rows = [i for i, p in enumerate(support) if len(p.offsets)]
    support_tokens = sum(len(support[i].offsets) for i in rows)
    best = np.zeros(len(answer_tokens.offsets))
    top3 = np.zeros(len(answer_tokens.offsets))
    best_index = np.full(len(answer_tokens.offsets), -1)
    owner = np.zeros(0, dtype=np.int64)
    if rows and len(answer_tokens.offsets):
        matrix = np.vstack([support[i].vectors for i in rows])
        owner = np.concatenate([np.full(len(support[i].offsets), i) for i in rows])
        sims = answer_tokens.vectors @ matrix.T
        best_index = sims.argmax(axis=1)
        best = sims[np.arange(len(sims)), best_index]
        k = min(3, sims.shape[1])
        top3 = np.partition(sims, -k, axis=1)[:, -k:].mean(axis=1)
    n = len(words)
    features = np.zeros((n, len(WORD_FEATURES)))
    matches: list[SupportMatch | None] = []
    for i, (word, piece) in enumerate(zip(words, pieces, strict=True)):
        lower = word.text.lower()
        number = any(c.isdigit() for c in word.text)
        absent = lower not in vocab
        capitalised = word.text[:1].isupper() and i > 0 and not _SENTENCE_END.search(answer[: word.start])
        if piece:
            weakest = piece[int(np.argmin(best[piece]))]  # the piece that decides the word's support
            features[i, :3] = (best[piece].min(), best[piece].mean(), top3[piece].mean())
        features[i, 3:7] = (absent, lower in STOP_WORDS, number, capitalised)
        features[i, 10:12] = (number and absent, len(word.text) > 6)
        features[i, 12] = i / max(n - 1, 1)
        matches.append(_match(support, owner, int(best_index[weakest])) if piece else None)
    _neighbourhood(features)
    return WordSupport(words, features, tuple(matches), support_tokens)


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


def _match(support: list[TokenVectors], owner: npt.NDArray[np.int64], token: int) -> SupportMatch | None:
    if token < 0:
        return None
    which = int(owner[token])
    first = int(np.searchsorted(owner, which))
    start, end = support[which].offsets[token - first]
    return SupportMatch(which, start, end)


def _pieces_per_word(words: tuple[Word, ...], offsets: tuple[tuple[int, int], ...]) -> list[list[int]]:
    """Indices of the model's tokens overlapping each word (offsets are sorted)."""
    pieces: list[list[int]] = [[] for _ in words]
    token = 0
    for i, word in enumerate(words):
        while token < len(offsets) and offsets[token][1] <= word.start:
            token += 1
        t = token
        while t < len(offsets) and offsets[t][0] < word.end:
            if offsets[t][1] > offsets[t][0]:
                pieces[i].append(t)
            t += 1
    return pieces


def _neighbourhood(features: Matrix) -> None:
    """Fill the neighbourhood columns from the words' own support, in place."""
    n = len(features)
    best, absent, stop = features[:, 0], features[:, 3], features[:, 4]
    for i in range(n):
        near = slice(max(0, i - _NEIGHBOURS), min(n, i + _NEIGHBOURS + 1))
        region = slice(max(0, i - _REGION), min(n, i + _REGION + 1))
        content = 1.0 - stop[region]
        features[i, 7] = best[near].mean()
        features[i, 8] = best[near].min()
        features[i, 9] = (absent[region] * content).sum() / max(content.sum(), 1.0)
