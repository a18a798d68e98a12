"""Fitting logistic models in numpy: deterministic Newton steps, no scikit-learn at run time or here."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

from detectors.models.learned import Matrix, ScaledLogistic
from detectors.verdict import PlattScaling


def fit_logistic(
    x: Matrix, y: Matrix, weights: Matrix, l2: float, iterations: int = 50, offset: Matrix | None = None
) -> tuple[Matrix, float]:
    """L2-regularised logistic regression (intercept not penalised) by Newton's method.

    ``offset``: a known part of each row's logit, added and not fitted (evidence of a known weight).
    """
    design = np.hstack([x, np.ones((len(x), 1))])
    known = np.zeros(len(x)) if offset is None else offset
    w = np.zeros(design.shape[1])
    penalty = np.full(design.shape[1], l2)
    penalty[-1] = 0.0
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-np.clip(design @ w + known, -30, 30)))
        gradient = design.T @ (weights * (p - y)) + penalty * w
        hessian = (design * (weights * p * (1 - p))[:, None]).T @ design + np.diag(penalty + 1e-9)
        step = np.linalg.solve(hessian, gradient)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return w[:-1], float(w[-1])


def fit_platt(scores: Matrix, labels: Matrix) -> PlattScaling:
    """The Platt map (a logistic regression on the scores' logit) that best fits ``labels``."""
    clipped = np.clip(scores, 1e-6, 1 - 1e-6)
    logit = np.log(clipped / (1 - clipped))
    coef, intercept = fit_logistic(logit[:, None], labels, np.ones(len(labels)), 0.0)
    return PlattScaling(float(coef[0]), intercept)


def fit_scaled(x: Matrix, y: Matrix, datasets: Sequence[str], features: tuple[str, ...], l2: float) -> ScaledLogistic:
    """A standardised logistic regression in which each set weighs the same in total."""
    sizes = Counter(datasets)
    weights = np.array([len(datasets) / (len(sizes) * sizes[name]) for name in datasets])
    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale[scale == 0] = 1.0
    coef, intercept = fit_logistic((x - mean) / scale, y, weights, l2)
    return ScaledLogistic(features, tuple(float(v) for v in mean), tuple(float(v) for v in scale),
                          tuple(float(c) for c in coef), intercept)  # fmt: skip
