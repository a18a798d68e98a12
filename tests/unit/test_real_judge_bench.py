"""bench/real_judge.py without the model: which records it asks about, the calls, and what its answers count as."""

from __future__ import annotations

import json
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

from real_judge import Asked, calls, picked, standing_in, tally  # noqa: E402
from recalibration import Record  # noqa: E402

from pipeline.judge.weight import Judgment  # noqa: E402

H, F, U = Judgment.HALLUCINATED, Judgment.FAITHFUL, Judgment.UNKNOWN


def record(key: str, hallucinated: bool) -> Record:
    return Record(key, 0.5, {}, hallucinated, "p 0.50-0.60")


def test_half_of_each_label_are_asked_about_and_the_band_first() -> None:
    records = [record(f"h{i}", True) for i in range(10)] + [record(f"f{i}", False) for i in range(10)]
    band = {"h3", "h7", "f1"}
    chosen = picked(records, 6, band, seed=0)
    assert sum(r.hallucinated for r in chosen) == 3 and sum(not r.hallucinated for r in chosen) == 3
    assert {"h3", "h7", "f1"} <= {r.key for r in chosen}
    assert len({r.key for r in chosen}) == 6
    assert [r.key for r in chosen] == [r.key for r in picked(records, 6, band, seed=0)]  # seeded


def test_a_labelled_record_becomes_the_call_a_rag_app_traced(tmp_path: Path) -> None:
    path = tmp_path / "app.jsonl"
    rows = [{"id": "a-1", "question": "Who wrote it?", "context": ["Ann wrote it.", "In 1990."], "answer": "Bob did.",
             "hallucinated": True},
            {"id": "a-2", "context": ["Sky is blue."], "answer": "Blue.", "hallucinated": False}]  # fmt: skip
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    second, first = calls(path, [record("a-2", False), record("a-1", True)])
    assert first.answer == "Bob did." and first.prompt == "Who wrote it?"
    assert [s.text for s in first.sources] == ["Ann wrote it.", "In 1990."]
    assert second.answer == "Blue." and [s.text for s in second.sources] == ["Sky is blue."]
    assert first.trace_id != second.trace_id


def test_sensitivity_and_specificity_count_answered_records_and_unknowns_apart() -> None:
    asked = [Asked("h1", True, H, 900, 80.0), Asked("h2", True, F, 700, 60.0), Asked("h3", True, U, 800, 100.0),
             Asked("f1", False, H, 600, 40.0), Asked("f2", False, U, 1000, 120.0)]  # fmt: skip
    counted = tally(asked)
    assert counted["sensitivity"] == 0.5  # h1 of h1, h2: the unknown h3 says nothing
    assert counted["specificity"] == 0.0
    assert counted["unknown_share"] == 0.4
    assert counted["tokens_per_call"] == 800.0 and counted["seconds_per_call"] == 80.0
    assert (counted["judged"], counted["judged_hallucinated"], counted["judged_faithful"]) == (5, 3, 2)


def test_a_judge_that_never_answers_has_no_rates() -> None:
    counted = tally([Asked("h1", True, U, 800, 180.0), Asked("f1", False, U, 800, 180.0)])
    assert counted["sensitivity"] is None and counted["specificity"] is None and counted["unknown_share"] == 1.0


def test_real_answers_stand_where_asked_and_the_reviews_side_draws_from_its_rates() -> None:
    asked = [Asked("h1", True, H, 1, 1.0), Asked("f1", False, F, 1, 1.0)]
    records = [record("h1", True), record("f1", False), record("h2", True),
               record("r-h", True), record("r-f", False)]  # fmt: skip
    judgments = standing_in(asked, records, measured={"h1", "f1", "h2"}, seed=3)
    assert judgments["h1"] == H and judgments["f1"] == F
    assert judgments["h2"] == U  # measured, never asked: moves nothing
    assert judgments["r-h"] == H and judgments["r-f"] == F  # the only real answer of each label
