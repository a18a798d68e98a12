"""The review queue's next call for a person: the sampler's stratum, then that stratum's next call in seeded order."""

from __future__ import annotations

from pipeline.rate.sampler import inclusion_probability, next_stratum
from pipeline.rate.store import Drawn, RateStore, Scope


def draw_next(store: RateStore, scope: Scope, reviewer: str, seed: int) -> Drawn | None:
    """The call ``reviewer`` should judge next in ``scope`` (one application's window), or None when none is left.

    Calls nobody judged yet and ``reviewer`` did not skip are served; the stratum furthest below
    its share goes first, and the call is drawn as that stratum's next of its calls.
    """
    population, judged, open_strata = store.queue_state(scope, reviewer)
    stratum = next_stratum(population, judged, open_strata)
    if stratum is None:
        return None
    call = store.first_unjudged(scope, stratum, reviewer, seed)
    if call is None:  # judged or skipped between the two reads
        return None
    return Drawn(*call, stratum, inclusion_probability(judged.get(stratum, 0), population[stratum]))
