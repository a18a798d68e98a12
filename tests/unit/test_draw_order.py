"""The worker's copy of the review queue's draw order is ClickHouse's, hash for hash."""

from __future__ import annotations

import chdb

from pipeline.rate.draw_order import draw_hash, drawn_early, sip_hash64


def test_sip_hash64_is_clickhouses_for_every_tail_length():
    texts = ["", "a", "0:4bf92f3577b34da6a3ce929d0e0e4736:00f067aa0ba902b7", *("x" * n for n in range(1, 18)), "é€"]
    literals = ", ".join("sipHash64(" + "'" + text + "')" for text in texts)
    expected = [int(v) for v in str(chdb.query(f"SELECT {literals}", "CSV")).strip().split(",")]
    assert [sip_hash64(text.encode()) for text in texts] == expected


def test_the_review_draws_order_and_its_early_share():
    calls = [(f"{n:032x}", f"{n:016x}") for n in range(400)]
    ranked = sorted(calls, key=lambda call: draw_hash(7, *call))
    early = [call for call in calls if drawn_early(7, *call, share=0.1)]
    assert 20 <= len(early) <= 60  # about a tenth
    assert set(ranked[: len(early)]) == set(early)  # the first the queue would serve
    assert not any(drawn_early(7, *call, share=0.0) for call in calls)
