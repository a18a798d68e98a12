"""Per-policy calibration: own fits where labels allow, shrunk toward the global fit, global elsewhere."""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path

import jsonschema
import pytest

from detectors.thresholds import Thresholds, load_thresholds
from detectors.verdict import PlattScaling
from pipeline.agreement.rules import AgreementRule
from pipeline.config.alerting import AlertRule
from pipeline.offline.calibrate import calibrate, load_thresholds_schema, thresholds_document, write_thresholds
from pipeline.offline.policy_calibration import ALONE, GLOBAL, SHRUNK, calibrate_policies, policies_document
from pipeline.offline.scored_calls import DetectorScore, LabelledScores

RULE = AgreementRule([AlertRule(name="two", route="slack")], window_seconds=600)
CURRENT = Thresholds("builtin-test", {"a": 0.5, "b": 0.5})


def app_records(policy: str, count: int, prior: float, clean_scores: float, seed: int) -> list[LabelledScores]:
    """Calls of one app: hallucinated ones score high on a and b; clean ones around ``clean_scores``."""
    rng = random.Random(seed)
    records = []
    for index in range(count):
        hallucinated = rng.random() < prior
        centre = 0.75 if hallucinated else clean_scores
        scores = {name: DetectorScore(min(max(rng.gauss(centre, 0.1), 0.0), 1.0), severity=2) for name in "ab"}
        records.append(LabelledScores(f"{policy}-{index}", hallucinated, scores, policy))
    return records


# "extraction" runs hot (its clean calls score 0.55: the pooled fit flags too many of them);
# "search" has too few positives to fit alone; "default" calls are never fitted per policy.
RECORDS = [
    *app_records("extraction", 600, 0.5, 0.55, seed=1),
    *app_records("search", 200, 0.05, 0.3, seed=2),
    *app_records("default", 600, 0.3, 0.3, seed=3),
]


def test_a_group_with_labels_is_fitted_and_shrunk_and_one_without_keeps_the_global_fit():
    overall = calibrate(RECORDS, CURRENT, RULE, min_positives=30, min_flagged=30)
    groups = {group.policy: group for group in calibrate_policies(RECORDS, overall, RULE, shrinkage=100)}
    assert set(groups) == {"extraction", "search"}
    extraction, search = groups["extraction"], groups["search"]
    assert extraction.weight == pytest.approx(600 / 700)
    for name in ("a", "b"):
        pooled = overall.detectors[name].threshold
        alone, written = extraction.alone[name], extraction.thresholds[name]
        assert alone > pooled  # its clean calls score high: its own threshold sits higher
        assert written == pytest.approx(extraction.weight * alone + (1 - extraction.weight) * pooled)
    assert (search.weight, search.thresholds) == (0.0, {})
    assert "positives" in search.note and search.note.startswith("global thresholds")
    # On its own held-out calls, its own thresholds raise alert precision over the pooled ones.
    held = extraction.heldout_alerts
    assert set(held) == {GLOBAL, ALONE, SHRUNK}
    assert held[ALONE].precision > held[GLOBAL].precision


def test_the_per_policy_section_is_valid_and_workers_read_it_back(tmp_path: Path):
    overall = calibrate(RECORDS, CURRENT, RULE, min_positives=30, min_flagged=30)
    section = policies_document(calibrate_policies(RECORDS, overall, RULE))
    jsonschema.validate(thresholds_document(overall, policies=section), load_thresholds_schema())
    path = tmp_path / "thresholds.yaml"
    write_thresholds(overall, path, policies=section)
    loaded = load_thresholds(path)
    assert set(loaded.by_policy) == {"extraction", "search"}
    assert loaded.by_policy["search"] == {}
    assert loaded.by_policy["extraction"]["a"] == pytest.approx(section["extraction"]["detectors"]["a"]["threshold"])


def test_negative_shrinkage_is_refused():
    overall = calibrate(RECORDS, CURRENT, RULE, min_positives=30, min_flagged=30)
    with pytest.raises(ValueError, match="shrinkage"):
        calibrate_policies(RECORDS, overall, RULE, shrinkage=-1)


def test_a_policy_may_aim_at_its_own_precision():
    overall = calibrate(RECORDS, CURRENT, RULE, min_positives=30, min_flagged=30)
    default_aim = {g.policy: g for g in calibrate_policies(RECORDS, overall, RULE)}["extraction"]
    strict = {g.policy: g for g in calibrate_policies(RECORDS, overall, RULE, targets={"extraction": 0.95})}
    assert strict["extraction"].alone["a"] > default_aim.alone["a"]
    assert strict["extraction"].note.endswith("at precision 0.95")
    assert strict["search"].note == {g.policy: g for g in calibrate_policies(RECORDS, overall, RULE)}["search"].note


def test_an_app_whose_probabilities_run_low_gets_its_own_map_shrunk_and_composed():
    rng = random.Random(5)
    # Its calls were stored with p 0.2-0.4 by the global verdict, yet people confirmed most of them.
    judged = [
        replace(record, p_hallucination=0.2 + 0.3 * rng.random() + (0.05 if record.hallucinated else 0.0))
        for record in app_records("extraction", 400, 0.8, 0.55, seed=4)
    ]
    records = judged + app_records("default", 600, 0.3, 0.3, seed=3)
    overall = calibrate(records, CURRENT, RULE, min_positives=30, min_flagged=30)
    current = {"extraction": PlattScaling(1.0, 0.5)}
    (group,) = calibrate_policies(records, overall, RULE, shrinkage=100, current=current)
    assert group.recalibration is not None
    own = group.recalibration
    before = current["extraction"].apply_one(0.3)
    assert own.apply_one(0.3) > before  # composed after the current map, and raised further
    document = policies_document([group])["extraction"]["calibration"]
    assert document == {"slope": round(own.slope, 6), "intercept": round(own.intercept, 6)}
    unjudged = calibrate_policies(app_records("extraction", 400, 0.8, 0.55, seed=4), overall, RULE)
    assert unjudged[0].recalibration is None  # no stored probabilities: nothing to fit


def test_the_composed_map_is_the_two_maps_one_after_the_other():
    first, second = PlattScaling(1.3, -0.2), PlattScaling(0.8, 0.4)
    for p in (0.05, 0.5, 0.93):
        assert first.then(second).apply_one(p) == pytest.approx(second.apply_one(first.apply_one(p)))
