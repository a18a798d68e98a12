"""Which source passage a flagged span of the answer is quoted beside, in evidence.

The span's weakest word points at the source token it matched best.  For a value that is
often a value of the same shape in an unrelated sentence: "completed in 1950" matched
"1930" in "…the tallest man-made structure in the world until 1930."  So a span holding a
value (number, year, date, quantity...) is quoted beside the source value of the same kind
whose surrounding words overlap most, paired as the contradiction detector pairs them
("built between 1887 and 1889"); any other span beside the sentence of its best-matching
token.
"""

from __future__ import annotations

from collections.abc import Sequence

from detectors.contradiction import ContradictionConfig
from detectors.contradiction.detector import ValueIndex, closest_value
from detectors.support_features import SupportMatch
from detectors.text.quantities import Mention

_PAIRING = ContradictionConfig()  # the window and overlap contradiction pairs values with by default


def quote(
    answer: str, values: Sequence[Mention], indexes: Sequence[ValueIndex], match: SupportMatch | None
) -> SupportMatch | None:
    """Where to quote for a span holding ``values`` whose weakest word matched ``match``; None: nothing to quote.

    ``indexes`` are the support texts' values (:func:`detectors.contradiction.detector.index_values`), in
    order; the place returned is a stated value or ``match`` itself.
    """
    best: tuple[int, int, Mention] | None = None  # (shared words, text, its value)
    for value in values:
        for support, index in enumerate(indexes):
            rival = closest_value(
                value, answer, index, _PAIRING.context_window_words, _PAIRING.conflict_min_shared_words
            )
            if rival is not None and (best is None or rival.shared > best[0]):
                best = (rival.shared, support, rival.mention)
    if best is not None:
        _, support, stated = best
        return SupportMatch(support, stated.start, stated.end)
    return match
