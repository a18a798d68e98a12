"""The combined verdict: the learned model over every detector, and the maximum without one."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from detectors.base import DetectorResult, DetectorStatus
from detectors.models.learned import ScaledLogistic
from detectors.verdict import VERDICT_FEATURES, combined_verdict, load_verdict_model, verdict_features


def result(detector: str, score: float, threshold: float = 0.5, status: DetectorStatus = DetectorStatus.OK):
    return DetectorResult(detector, "1", score, score >= threshold, threshold, status)


def test_features_are_threshold_relative_scores_of_detectors_that_checked():
    row = verdict_features([result("contradiction", 0.25, 0.25), result("grounding", 0.9, 0.5, DetectorStatus.SKIPPED)])
    named = dict(zip(VERDICT_FEATURES, row, strict=True))
    assert named["contradiction.score"] == 0.5 and named["contradiction.checked"] == 1.0
    assert named["grounding.score"] == 0.0 and named["grounding.checked"] == 0.0


def test_the_model_decides_where_one_is_given_and_the_maximum_otherwise():
    trusts_contradiction = ScaledLogistic(
        VERDICT_FEATURES, (0.0,) * len(VERDICT_FEATURES), (1.0,) * len(VERDICT_FEATURES),
        tuple(8.0 if f == "contradiction.score" else 0.0 for f in VERDICT_FEATURES), -4.0,
    )  # fmt: skip
    results = [result("contradiction", 0.1), result("grounding", 0.95), result("sentinel", 1.0)]
    score, flagged = combined_verdict(results, trusts_contradiction)
    assert score < 0.5 and not flagged  # grounding alone does not convince this model
    assert combined_verdict(results) == (pytest.approx(0.95), True)  # the maximum: grounding decides


def test_the_shipped_model_loads_and_a_foreign_one_is_refused(tmp_path: Path):
    model = load_verdict_model()
    assert model.features == VERDICT_FEATURES
    assert 0.0 < float(model.predict(np.zeros((1, len(VERDICT_FEATURES))))[0]) < 1.0
    other = tmp_path / "verdict.json"
    other.write_text(json.dumps({"model": {**model.to_dict(), "features": ["x"] * len(VERDICT_FEATURES)}}))
    with pytest.raises(ValueError, match=re.escape(str(other))):
        load_verdict_model(other)
