"""The JSON-read models: what they predict, and files that do not fit are refused by name."""

from __future__ import annotations

import json

import numpy as np
import pytest

from detectors.models.learned import BinnedLogistic, ScaledLogistic, binned_design


def test_binned_design_one_hots_continuous_features_and_passes_binary_ones():
    x = np.array([[0.1, 1.0], [0.5, 0.0], [0.9, 1.0]])
    design = binned_design(x, [(0.3, 0.7), None])
    assert design.tolist() == [[1, 0, 0, 1], [0, 1, 0, 0], [0, 0, 1, 1]]


def test_binned_model_learns_a_non_monotone_response_and_survives_json():
    # Only the middle bin is positive: no single linear weight on the raw value could say that.
    model = BinnedLogistic(("cosine",), ((0.3, 0.7),), (-3.0, 3.0, -3.0), 0.0)
    again = BinnedLogistic.from_dict(json.loads(json.dumps(model.to_dict())))
    p = again.predict(np.array([[0.1], [0.5], [0.9]]))
    assert p[1] > 0.9 and p[0] < 0.1 and p[2] < 0.1
    assert again == model


def test_scaled_model_standardises_before_the_weights():
    model = ScaledLogistic(("a", "b"), (10.0, 0.0), (2.0, 1.0), (1.0, 0.0), 0.0)
    p = ScaledLogistic.from_dict(model.to_dict()).predict(np.array([[10.0, 5.0], [14.0, -5.0]]))
    assert p[0] == pytest.approx(0.5)
    assert p[1] == pytest.approx(1 / (1 + np.exp(-2.0)))
    assert model.predict(np.zeros((0, 2))).shape == (0,)


@pytest.mark.parametrize(
    ("kind", "data", "message"),
    [
        (BinnedLogistic, {"features": ["a"], "edges": [[0.5]], "coef": [1.0], "intercept": 0}, "1 coefficients"),
        (ScaledLogistic, {"features": ["a"], "mean": [0], "scale": [0], "coef": [1], "intercept": 0}, "positive"),
        (ScaledLogistic, {"features": ["a", "b"], "mean": [0], "scale": [1], "coef": [1], "intercept": 0}, "2 feat"),
    ],
)
def test_files_that_do_not_fit_are_refused(kind, data, message):
    with pytest.raises(ValueError, match=message):
        kind.from_dict(data)
