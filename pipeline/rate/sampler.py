"""The audit sampler's decisions: which stratum a call is in, which stratum serves next, and with what probability.

Calls an alert was raised on form one stratum (the alert rule's precision is their share
hallucinated); the others are cut by ``p_hallucination`` at the configured edges, and those
without a probability (no detector the verdict model weighs checked them) form their own
stratum.  Every stratum holding calls gets
an equal share of the verdicts, so the many calls nobody flagged are judged too (recall needs
them) and the rare high-probability ones are not drowned.  Within a stratum the store serves
the unjudged call with the lowest seeded hash: a simple random sample, reproducible for a seed.
A call drawn as its stratum's ``k``-th of ``N`` has inclusion probability ``k / N``.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pipeline.config.review import ReviewSettings, check_edges

NO_PROBABILITY = "no probability"
ALERTED = "alerted"


@dataclass(frozen=True, slots=True)
class Strata:
    """Probability strata cut at ``edges`` (ascending, inside (0, 1)), the calls with none, the alerted calls."""

    edges: tuple[float, ...]

    def __post_init__(self) -> None:
        check_edges(self.edges)

    @classmethod
    def configured(cls, review: ReviewSettings) -> Strata:
        """The strata the settings' ``review.strata`` edges cut."""
        return cls(tuple(review.strata))

    @property
    def names(self) -> tuple[str, ...]:
        """Every stratum's name: lowest probabilities first, then the calls without one, then the alerted."""
        bounds = (0.0, *self.edges, 1.0)
        bins = (f"p {low:.2f}-{high:.2f}" for low, high in itertools.pairwise(bounds))
        return (*bins, NO_PROBABILITY, ALERTED)

    def of(self, probability: float | None, alerted: bool) -> str:
        """The stratum of a call with ``probability``, on whose trace an alert was raised or not."""
        if alerted:
            return ALERTED
        if probability is None:
            return NO_PROBABILITY
        return self.names[sum(1 for edge in self.edges if probability >= edge)]


def next_stratum(population: Mapping[str, int], judged: Mapping[str, int], open_strata: Sequence[str]) -> str | None:
    """The stratum the next verdict should come from: the one furthest below its equal share.

    ``population``: calls per stratum; ``judged``: audit verdicts per stratum; ``open_strata``:
    those still holding a call to serve.  Ties go to the later stratum (the alerted, then higher
    probabilities: the rarer calls).  None when no stratum is open.
    """
    holding = [name for name in population if population[name] > 0]
    if not holding:
        return None
    share = 1 / len(holding)
    after = sum(judged.get(name, 0) for name in holding) + 1
    candidates = [name for name in holding if name in open_strata]
    if not candidates:
        return None
    order = {name: rank for rank, name in enumerate(holding)}
    return max(candidates, key=lambda name: (share * after - judged.get(name, 0), order[name]))


def inclusion_probability(judged_in_stratum: int, stratum_size: int) -> float:
    """The probability that a call of a stratum of ``stratum_size`` is in a sample of ``judged_in_stratum + 1``."""
    if stratum_size < 1:
        raise ValueError("a stratum serving a call holds at least that call")
    return min(1.0, (judged_in_stratum + 1) / stratum_size)
