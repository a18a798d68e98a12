"""The review queue's next calls: the sampler's stratum, then that stratum's next call in seeded order."""

from __future__ import annotations

from pipeline.rate.sampler import inclusion_probability, next_stratum
from pipeline.rate.store import Drawn, RateStore, Scope


def draw(store: RateStore, scope: Scope, reviewer: str, seed: int, count: int = 1) -> list[Drawn]:
    """Up to ``count`` calls to judge next in ``scope`` (one application's window), as the queue serves them.

    Calls nobody judged yet and ``reviewer`` did not skip are served; the stratum furthest below
    its share goes first, each call drawn as that stratum's next.  Several drawn at once (a
    digest) count as judged for the shares that follow, as they will be once judged.
    """
    population, judged, left = store.queue_state(scope, reviewer)
    drawn: list[Drawn] = []
    while len(drawn) < count:
        stratum = next_stratum(population, judged, [name for name, calls in left.items() if calls > 0])
        if stratum is None:
            break
        call = store.first_unjudged(scope, stratum, reviewer, seed, [(d.trace_id, d.span_id) for d in drawn])
        if call is None:  # judged or skipped since the counts were read
            left[stratum] = 0
            continue
        drawn.append(Drawn(*call, stratum, inclusion_probability(judged.get(stratum, 0), population[stratum])))
        judged[stratum] = judged.get(stratum, 0) + 1
        left[stratum] -= 1
    return drawn


def draw_next(store: RateStore, scope: Scope, reviewer: str, seed: int) -> Drawn | None:
    """The one call ``reviewer`` should judge next, or None when none is left."""
    return next(iter(draw(store, scope, reviewer, seed)), None)
