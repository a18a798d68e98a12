"""Small learned models, read from reviewable JSON: logistic regressions over named features.

Two shapes cover what the detectors learn (docs/operations.md):

* :class:`BinnedLogistic` — each continuous feature one-hot encoded into quantile bins, so
  a linear model can learn a non-monotone response (a cosine of 0.3 and of 0.9 are not
  "more" and "less" of one thing); binary features enter as they are.
* :class:`ScaledLogistic` — features standardised by the training mean and scale.

Both are plain numpy at run time: the worker never needs the training dependencies.  The
files are written by ``halluwatch train`` (:mod:`pipeline.offline.train`), which records
the data and metrics next to the coefficients.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from detectors.config import DEFAULT_PROFILE, Profile
from detectors.profiles import built_in_path, check_profile

Matrix = npt.NDArray[np.float64]


def sigmoid(z: Matrix) -> Matrix:
    """The logistic function, without overflow warnings for large |z|."""
    result: Matrix = 0.5 * (1.0 + np.tanh(0.5 * z))
    return result


@dataclass(frozen=True, slots=True)
class BinnedLogistic:
    """Logistic regression over quantile-binned features; ``edges[j]`` is None for a binary feature."""

    features: tuple[str, ...]
    edges: tuple[tuple[float, ...] | None, ...]
    coef: tuple[float, ...]
    intercept: float

    def design(self, x: Matrix) -> Matrix:
        """The model's inputs for raw feature rows ``x`` (one column per feature, in ``features`` order)."""
        return binned_design(x, self.edges)

    def predict(self, x: Matrix) -> Matrix:
        """The probability of the positive class for each row of raw features."""
        if len(x) == 0:
            return np.zeros(0)
        return sigmoid(self.design(x) @ np.asarray(self.coef) + self.intercept)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form."""
        return {"kind": "binned_logistic", "features": list(self.features),
                "edges": [list(e) if e is not None else None for e in self.edges],
                "coef": list(self.coef), "intercept": self.intercept}  # fmt: skip

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BinnedLogistic:
        """Read the JSON form; a ValueError names what does not fit."""
        model = cls(
            features=tuple(str(f) for f in data["features"]),
            edges=tuple(None if e is None else tuple(float(v) for v in e) for e in data["edges"]),
            coef=tuple(float(c) for c in data["coef"]),
            intercept=float(data["intercept"]),
        )
        width = sum(1 if e is None else len(e) + 1 for e in model.edges)
        if len(model.edges) != len(model.features) or len(model.coef) != width:
            raise ValueError(f"binned model: {len(model.features)} features, {len(model.coef)} coefficients")
        return model


@dataclass(frozen=True, slots=True)
class ScaledLogistic:
    """Logistic regression over standardised features."""

    features: tuple[str, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    coef: tuple[float, ...]
    intercept: float

    def predict(self, x: Matrix) -> Matrix:
        """The probability of the positive class for each row of raw features."""
        if len(x) == 0:
            return np.zeros(0)
        z = (x - np.asarray(self.mean)) / np.asarray(self.scale)
        return sigmoid(z @ np.asarray(self.coef) + self.intercept)

    def predict_row(self, row: Sequence[float]) -> float:
        """:meth:`predict` of one row in plain Python: a tenth of numpy's cost on ten features."""
        z = self.intercept + sum(
            c * (x - m) / s for x, m, s, c in zip(row, self.mean, self.scale, self.coef, strict=True)
        )
        return 0.5 * (1.0 + math.tanh(0.5 * z))

    def to_dict(self) -> dict[str, Any]:
        """The JSON form."""
        return {"kind": "scaled_logistic", "features": list(self.features), "mean": list(self.mean),
                "scale": list(self.scale), "coef": list(self.coef), "intercept": self.intercept}  # fmt: skip

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ScaledLogistic:
        """Read the JSON form; a ValueError names what does not fit."""
        model = cls(
            features=tuple(str(f) for f in data["features"]),
            mean=tuple(float(v) for v in data["mean"]),
            scale=tuple(float(v) for v in data["scale"]),
            coef=tuple(float(v) for v in data["coef"]),
            intercept=float(data["intercept"]),
        )
        if not len(model.features) == len(model.mean) == len(model.scale) == len(model.coef):
            raise ValueError(f"scaled model: {len(model.features)} features, {len(model.coef)} coefficients")
        if any(s <= 0 for s in model.scale):
            raise ValueError("scaled model: every scale must be positive")
        return model


def read_model_file(path: Path | None, built_in: str, profile: Profile = DEFAULT_PROFILE) -> dict[str, Any]:
    """A model file's JSON: the file at ``path``, or ``profile``'s built-in ``detectors/data/[<profile>/]<built_in>``.

    :class:`ProfileMismatch` when the file was trained for another profile's encoder (its
    ``profile``; a file without one predates profiles and was trained for ``accurate``).
    """
    where = path or built_in_path(profile, built_in)
    if path is not None:
        text = path.read_text("utf-8")
    else:
        text = resources.files("detectors.data").joinpath(built_in_path(profile, built_in)).read_text("utf-8")
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    check_profile(data.get("profile"), profile, str(where))
    return data


def binned_design(x: Matrix, edges: Sequence[tuple[float, ...] | None]) -> Matrix:
    """One-hot bin columns for binned features, the raw column for binary ones."""
    columns: list[Matrix] = []
    for j, cut in enumerate(edges):
        if cut is None:
            columns.append(x[:, j : j + 1])
            continue
        index = np.searchsorted(np.asarray(cut), x[:, j], side="right")
        one_hot = np.zeros((len(x), len(cut) + 1))
        one_hot[np.arange(len(x)), index] = 1.0
        columns.append(one_hot)
    return np.hstack(columns) if columns else np.zeros((len(x), 0))
