"""Which verdicts stand on which row of a call: the finding each was given on, or the call as a whole."""

from __future__ import annotations

from collections.abc import Iterable

from pipeline.ui.queries import LabelView

WHOLE_CALL = ""  # the detector column of a verdict given on the call rather than on one finding


def standing_by_row(labels: Iterable[LabelView], span_id: str) -> dict[str, list[LabelView]]:
    """The call's standing (not withdrawn) verdicts, keyed by the finding they were given on."""
    rows: dict[str, list[LabelView]] = {}
    for label in labels:
        if label.span_id == span_id and not label.withdrawn:
            rows.setdefault(label.detector, []).append(label)
    return rows


def verdict_words(hallucinated: bool, flagged: bool = True) -> str:
    """A verdict as the page and its messages say it: on a flagged call, whether the flag was right.

    A call nobody flagged cannot be a false alarm: its verdicts read "hallucinated" or "faithful".
    """
    if flagged:
        return "confirmed hallucination" if hallucinated else "false alarm"
    return "hallucinated" if hallucinated else "faithful"
