"""The combined verdict: the learned, calibrated model over every detector, and the maximum without one."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from detectors.base import DetectorResult, DetectorStatus
from detectors.models.learned import ScaledLogistic
from detectors.verdict import (
    VERDICT_DETECTORS,
    VERDICT_FEATURES,
    PlattScaling,
    VerdictModel,
    combined_verdict,
    judge_call,
    load_verdict_model,
    verdict_features,
)


def result(detector: str, score: float, threshold: float = 0.5, status: DetectorStatus = DetectorStatus.OK):
    return DetectorResult(detector, "1", score, score >= threshold, threshold, status)


def test_features_are_threshold_relative_scores_of_detectors_that_checked():
    row = verdict_features([result("contradiction", 0.25, 0.25), result("grounding", 0.9, 0.5, DetectorStatus.SKIPPED)])
    named = dict(zip(VERDICT_FEATURES, row, strict=True))
    assert named["contradiction.score"] == 0.5 and named["contradiction.checked"] == 1.0
    assert named["grounding.score"] == 0.0 and named["grounding.checked"] == 0.0


def trusting(detector: str, **fields) -> VerdictModel:
    model = ScaledLogistic(
        VERDICT_FEATURES, (0.0,) * len(VERDICT_FEATURES), (1.0,) * len(VERDICT_FEATURES),
        tuple(8.0 if f == f"{detector}.score" else 0.0 for f in VERDICT_FEATURES), -4.0,
    )  # fmt: skip
    return VerdictModel("test-1", model, **fields)


def test_the_model_decides_where_one_is_given_and_the_maximum_otherwise():
    results = [result("contradiction", 0.1), result("grounding", 0.95), result("sentinel", 1.0)]
    score, flagged = combined_verdict(results, trusting("contradiction"))
    assert score < 0.5 and not flagged  # grounding alone does not convince this model
    assert combined_verdict(results) == (pytest.approx(0.95), True)  # the maximum: grounding decides


def test_a_call_nothing_weighed_has_no_probability():
    model = trusting("contradiction")
    assert model.verdict([result("sentinel", 1.0), result("grounding", 0.9, status=DetectorStatus.SKIPPED)]) is None
    verdict = model.verdict([result("contradiction", 1.0)])
    assert verdict is not None and verdict.probability > 0.98 and verdict.model_version == "test-1"


def test_features_are_relative_to_the_thresholds_the_model_was_trained_with():
    model = trusting("contradiction", thresholds={"contradiction": 0.25})
    policy_strict = result("contradiction", 0.25, threshold=0.9)  # a policy moved the detector's own threshold
    assert model.features([policy_strict])[0] == 0.5
    verdict = model.verdict([policy_strict])
    assert verdict is not None and verdict.probability == pytest.approx(0.5)


def test_calibration_moves_probabilities_keeping_their_order():
    raw = np.array([0.1, 0.5, 0.9])
    platt = PlattScaling(slope=1.5, intercept=-0.7)
    calibrated = platt.apply(raw)
    assert list(np.argsort(calibrated)) == [0, 1, 2] and calibrated[1] < 0.5
    assert np.allclose(PlattScaling().apply(raw), raw)
    assert [platt.apply_one(p) for p in raw] == pytest.approx(list(calibrated))


def test_one_call_at_a_time_gives_what_the_batch_gives():
    verdict = load_verdict_model()
    rows = [[0.7, 1.0, 0.2, 1.0, 0.9, 1.0, 0.0, 0.0, 0.0, 0.0], [0.1, 1.0, 0.0, 0.0, 0.3, 1.0, 0.0, 0.0, 0.0, 0.0]]
    batched = verdict.calibrated(np.array(rows))
    one_by_one = [verdict.calibration.apply_one(verdict.model.predict_row(row)) for row in rows]
    assert one_by_one == pytest.approx(list(batched))


def test_a_call_is_flagged_by_its_probability_or_by_a_fact():
    model = trusting("contradiction")
    assert judge_call([result("contradiction", 1.0)], model, 0.5).flagged
    assert not judge_call([result("contradiction", 0.0), result("grounding", 0.9)], model, 0.5).flagged
    fact = judge_call([result("contradiction", 0.0), result("tool_outcome", 1.0)], model, 0.5)
    assert fact.flagged and fact.verdict is not None and fact.verdict.probability < 0.5
    assert judge_call([result("grounding", 0.9)], None, 0.5).flagged  # no model: any flag
    assert not judge_call([result("sentinel", 1.0)], None, 0.5).flagged


def test_the_shipped_model_loads_calibrated_and_a_foreign_one_is_refused(tmp_path: Path):
    verdict = load_verdict_model()
    assert verdict.model.features == VERDICT_FEATURES and verdict.calibration != PlattScaling()
    assert verdict.thresholds and set(verdict.thresholds) <= set(VERDICT_DETECTORS)
    assert 0.0 < float(verdict.calibrated(np.zeros((1, len(VERDICT_FEATURES))))[0]) < 1.0
    other = tmp_path / "verdict.json"
    other.write_text(json.dumps({"model": {**verdict.model.to_dict(), "features": ["x"] * len(VERDICT_FEATURES)}}))
    with pytest.raises(ValueError, match=re.escape(str(other))):
        load_verdict_model(other)


def test_the_built_in_route_minimums_are_the_ones_train_chose_for_the_built_in_model():
    from importlib import resources

    from detectors.thresholds import load_thresholds

    document = json.loads(resources.files("detectors.data").joinpath("verdict.json").read_text("utf-8"))
    chosen = {route: entry["min_probability"] for route, entry in document["alert_probability"].items()}
    assert load_thresholds().alert_probability == chosen
    # Out of fold (no model, map or minimum saw the record's document): RAGTruth's calibration and pages.
    held = document["training"]["metrics"]["ragtruth"]["out_of_fold"]
    assert held["ece"] <= 0.08 and sum(b["records"] for b in held["reliability"]) == held["records"]
    assert held["paged_faithful"] <= 0.01 and held["alerted_faithful"] <= 0.02
