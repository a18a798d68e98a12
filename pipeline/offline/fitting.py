"""Fitting logistic models in numpy: deterministic Newton steps, no scikit-learn at run time or here."""

from __future__ import annotations

import numpy as np

from detectors.models.learned import Matrix
from detectors.verdict import PlattScaling


def fit_logistic(x: Matrix, y: Matrix, weights: Matrix, l2: float, iterations: int = 50) -> tuple[Matrix, float]:
    """L2-regularised logistic regression (intercept not penalised) by Newton's method."""
    design = np.hstack([x, np.ones((len(x), 1))])
    w = np.zeros(design.shape[1])
    penalty = np.full(design.shape[1], l2)
    penalty[-1] = 0.0
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-np.clip(design @ w, -30, 30)))
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
