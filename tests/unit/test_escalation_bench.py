"""bench/escalation.py on a synthetic app: a useless judge changes nothing, a perfect one only helps; its minimums."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "escalation.py"
sys.path.insert(0, str(BENCH.parent))

from recalibration import Application, Record, draw  # noqa: E402

from detectors.thresholds import load_thresholds  # noqa: E402
from detectors.verdict import PlattScaling  # noqa: E402
from pipeline.calibration.alert_probability import RouteTargets  # noqa: E402
from pipeline.calibration.app_map import JudgedCall, route_estimates  # noqa: E402
from pipeline.calibration.operating_point import TrafficCall  # noqa: E402
from pipeline.config.settings import load_settings  # noqa: E402
from pipeline.judge.weight import JudgeWeight, Judgment  # noqa: E402
from pipeline.rate.sampler import Strata  # noqa: E402

FLAGS: tuple[dict[str, int], ...] = (
    {},
    {"grounding": 2},
    {"grounding": 2, "contradiction": 2},
    {"contradiction": 4, "grounding": 2},
)


def synthetic_app(folder: Path, records: int = 800) -> Path:
    """A labelled file and the scores bench/recalibration.py would have kept for it (``folder/scored``)."""
    settings = load_settings()
    agreement = RouteTargets.from_settings(settings.alerting).agreement(
        load_thresholds(settings.thresholds_file).alert_probability
    )
    strata = Strata.configured(settings.review)
    rng = np.random.default_rng(7)
    labelled, scored = [], []
    for i in range(records):
        hallucinated = bool(rng.random() < 0.4)
        p = float(np.clip(rng.beta(5, 2) if hallucinated else rng.beta(2, 5), 0.01, 0.99))
        flags = FLAGS[int(rng.integers(len(FLAGS)))]
        alerted = agreement.first_match(flags, p) is not None
        key = f"app-{i}"
        labelled.append({"id": key, "context": [f"document {i}"], "answer": "an answer", "hallucinated": hallucinated})
        scored.append({"key": key, "probability": p, "flags": flags, "hallucinated": hallucinated,
                       "stratum": strata.of(p, alerted)})  # fmt: skip
    path = folder / "app.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in labelled))
    (folder / "scored").mkdir()
    (folder / "scored" / "app.jsonl").write_text("".join(json.dumps(r) + "\n" for r in scored))
    return path


def bench(path: Path, accuracy: float) -> list[dict[str, float]]:
    command = [sys.executable, str(BENCH), str(path), "--scored", str(path.parent / "scored"), "--json",
               "--seeds", "2", "--judge-accuracy", str(accuracy)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=True, timeout=240)
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_a_judge_no_better_than_chance_is_given_no_weight_after_the_verdicts(tmp_path: Path) -> None:
    rows = bench(synthetic_app(tmp_path), accuracy=0.5)
    assert {(r["verdicts"], r["judge_share"]) for r in rows} == {
        (v, s) for v in (0, 100) for s in (0.01, 0.05, 0.1, 1.0)
    }
    for row in (r for r in rows if r["verdicts"] == 100):
        assert row["weight_hallucinated"] == 0.0 and row["band"] == 0 and row["judge_calls"] == 0
        assert row["recall_after"] == row["recall_before"]
        assert row["alerted_faithful_after"] == row["alerted_faithful_before"]


def test_a_perfect_judge_within_its_budget_only_adds_caught_calls_and_removes_false_alarms(tmp_path: Path) -> None:
    rows = bench(synthetic_app(tmp_path), accuracy=1.0)
    for row in rows:  # under the same rules, its answers only add caught calls and remove false alarms
        assert row["recall_after"] >= row["recall_unjudged"]
        assert row["alerted_faithful_after"] <= row["alerted_faithful_unjudged"]
        assert row["judge_calls"] <= row["band"]
    full = next(r for r in rows if r["verdicts"] == 100 and r["judge_share"] == 1.0)
    short = next(r for r in rows if r["verdicts"] == 100 and r["judge_share"] == 0.01)
    assert full["recall_after"] > full["recall_unjudged"] and short["judge_calls"] < full["judge_calls"]


def scored_records(count: int = 300) -> list[Record]:
    """Records as bench/recalibration.py keeps them: faithful ones with a single flag and p near Slack's minimum."""
    settings = load_settings()
    strata = Strata.configured(settings.review)
    rng = np.random.default_rng(3)
    out = []
    for i in range(count):
        hallucinated = bool(rng.random() < 0.3)
        p = float(rng.uniform(0.6, 0.99)) if hallucinated else float(rng.uniform(0.3, 0.97))
        flags = FLAGS[2] if hallucinated else FLAGS[1]
        out.append(Record(f"call-{i}", p, flags, hallucinated, strata.of(p, False)))
    return out


def minimums_both_ways(weight: JudgeWeight, judgment: Judgment) -> tuple[dict[str, float], dict[str, float]]:
    """The minimums chosen on 100 verdicts and the traffic without the judge's answers, and with ``judgment`` on all."""
    app = Application.configured()
    records = scored_records()
    population: dict[str, int] = {}
    for r in records:
        population[r.stratum] = population.get(r.stratum, 0) + 1
    drawn = draw(records, 100, seed=0)

    def chosen(answer: Judgment | None) -> dict[str, float]:
        calls = [JudgedCall(r.key, r.stratum, r.probability, r.hallucinated, pi, r.flags, answer) for r, pi in drawn]
        traffic = [TrafficCall(r.probability, r.flags, answer) for r in records]
        routes = route_estimates(calls, population, PlattScaling(), app.routing, app.shipped, True, traffic, weight,
                                 app.shrinkage)  # fmt: skip
        return {r.route: r.min_probability for r in routes}

    return chosen(None), chosen(judgment)


def test_minimums_chosen_with_the_judges_answers_are_those_without_where_the_judge_has_no_weight() -> None:
    detectors, judged = minimums_both_ways(JudgeWeight.none(), Judgment.HALLUCINATED)
    assert judged.keys() == detectors.keys() == {"page", "slack"}
    assert judged == pytest.approx(detectors, abs=1e-9)


def test_a_judge_that_calls_faithful_single_flag_calls_hallucinated_raises_the_minimum_they_would_pass() -> None:
    detectors, judged = minimums_both_ways(JudgeWeight(0.9, 0.5), Judgment.HALLUCINATED)
    # Its "hallucinated" is a second flag on every faithful call: Slack would alert on those over its minimum.
    assert judged["slack"] > detectors["slack"]
    assert judged["page"] == pytest.approx(detectors["page"], abs=1e-9)
