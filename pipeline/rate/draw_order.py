"""The review queue's draw order, computed where the calls are made: which calls it will serve first.

The store serves each stratum's unjudged calls in the order of ClickHouse's
``sipHash64('<seed>:<trace id>:<span id>')`` (:meth:`pipeline.rate.store.RateStore`), a seeded
random order.  A call whose hash falls in the lowest ``share`` of the hash space is among the
first a stratum serves, so the worker can have such calls judged before anyone reviews them:
their verdicts then weigh the judge (:mod:`pipeline.judge.weight`).  SipHash-2-4 with a zero key
is what ClickHouse's ``sipHash64`` computes; tests/unit/test_draw_order.py checks the two agree.
"""

from __future__ import annotations

import struct

_MASK = (1 << 64) - 1
_SPACE = 1 << 64


def draw_hash(seed: int, trace_id: str, span_id: str) -> int:
    """The call's place in the review queue's draw (lower: served sooner in its stratum)."""
    return sip_hash64(f"{seed}:{trace_id}:{span_id}".encode())


def drawn_early(seed: int, trace_id: str, span_id: str, share: float) -> bool:
    """Whether the call lies in the first ``share`` of the draw order."""
    return draw_hash(seed, trace_id, span_id) < share * _SPACE


def sip_hash64(data: bytes) -> int:
    """SipHash-2-4 of ``data`` under the zero key, as ClickHouse's ``sipHash64`` returns it."""
    v0, v1, v2, v3 = 0x736F6D6570736575, 0x646F72616E646F6D, 0x6C7967656E657261, 0x7465646279746573

    def rounds(count: int) -> None:
        nonlocal v0, v1, v2, v3
        for _ in range(count):
            v0 = (v0 + v1) & _MASK
            v1 = _rotl(v1, 13) ^ v0
            v0 = _rotl(v0, 32)
            v2 = (v2 + v3) & _MASK
            v3 = _rotl(v3, 16) ^ v2
            v0 = (v0 + v3) & _MASK
            v3 = _rotl(v3, 21) ^ v0
            v2 = (v2 + v1) & _MASK
            v1 = _rotl(v1, 17) ^ v2
            v2 = _rotl(v2, 32)

    whole = len(data) - len(data) % 8
    for (word,) in struct.iter_unpack("<Q", data[:whole]):
        v3 ^= word
        rounds(2)
        v0 ^= word
    last = int.from_bytes(data[whole:], "little") | (len(data) & 0xFF) << 56
    v3 ^= last
    rounds(2)
    v0 ^= last
    v2 ^= 0xFF
    rounds(4)
    return v0 ^ v1 ^ v2 ^ v3


def _rotl(value: int, bits: int) -> int:
    return ((value << bits) | (value >> (64 - bits))) & _MASK
