"""Versioned detector thresholds (docs/operations.md): loaded once at start, recorded with every finding.

Each detector's built-in threshold is its descriptor's (``DETECTOR.threshold``); the built-in
file (``detectors/data/thresholds.yaml``) and a thresholds file from ``halluwatch calibrate``
override them detector by detector.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from detectors.config import DEFAULT_PROFILE, Profile
from detectors.profiles import built_in_path, check_profile
from detectors.registry import DETECTORS

BUILTIN_THRESHOLDS = "thresholds.yaml"


class ThresholdsError(ValueError):
    """The thresholds file is unusable; the message names the file and the field."""


@dataclass(frozen=True, slots=True)
class Thresholds:
    """Per-detector decision thresholds and the version of the file they came from."""

    version: str
    by_detector: dict[str, float]
    # Detectors the file has no entry for, which keep their built-in threshold: a file
    # calibrated before a detector was added stays usable.
    inherited: tuple[str, ...] = ()
    # Thresholds fitted for one application's policy (its ``policies:`` section), by policy name.
    by_policy: dict[str, dict[str, float]] = field(default_factory=dict)
    # By alert route: the lowest p_hallucination its rules need to keep false alarms under the route's target.
    alert_probability: dict[str, float] = field(default_factory=dict)
    # By policy: (slope, intercept) of the Platt map its human verdicts fitted over the global p_hallucination.
    recalibration: dict[str, tuple[float, float]] = field(default_factory=dict)

    @property
    def own(self) -> dict[str, float]:
        """The thresholds the file itself sets, without those inherited from the built-in file."""
        return {name: value for name, value in self.by_detector.items() if name not in self.inherited}

    def for_detector(self, name: str) -> float:
        """The threshold of ``name``; a missing entry is a configuration error, not a default."""
        try:
            return self.by_detector[name]
        except KeyError:
            raise ThresholdsError(
                f"thresholds file version {self.version!r} has no entry for detector {name!r}"
            ) from None


def load_thresholds(path: Path | None = None, profile: Profile = DEFAULT_PROFILE) -> Thresholds:
    """Read a thresholds file, or ``profile``'s built-in defaults when ``path`` is None.

    Detectors a file does not name keep their built-in threshold (listed in ``inherited``):
    ``profile``'s built-in file's, else their descriptor's.  A file whose ``models.profile``
    names another profile is refused: its thresholds were chosen on another encoder's scores.
    """
    built_in = built_in_path(profile, BUILTIN_THRESHOLDS)
    text = resources.files("detectors.data").joinpath(built_in).read_text("utf-8")
    builtin = _parse(yaml.safe_load(text), f"built-in {built_in}")
    defaults = {spec.name: spec.threshold for spec in DETECTORS}
    builtin = replace(builtin, by_detector={**defaults, **builtin.by_detector})
    if path is None:
        return builtin
    try:
        text = path.read_text("utf-8")
    except OSError as exc:
        raise ThresholdsError(f"cannot read thresholds file {path}: {exc}") from exc
    document = yaml.safe_load(text)
    own = _parse(document, str(path))
    check_profile((document.get("models") or {}).get("profile"), profile, str(path))
    inherited = tuple(name for name in builtin.by_detector if name not in own.by_detector)
    merged = {**own.by_detector, **{n: builtin.by_detector[n] for n in inherited}}
    # Routes a file does not calibrate keep the built-in minimum, as detectors keep their threshold.
    probability = {**builtin.alert_probability, **own.alert_probability}
    return Thresholds(own.version, merged, inherited, own.by_policy, probability, own.recalibration)


def _parse(document: Any, origin: str) -> Thresholds:
    if not isinstance(document, dict) or not document.get("version"):
        raise ThresholdsError(f"{origin}: expected a mapping with a 'version'")
    by_detector = _fractions(document.get("detectors"), "threshold", origin, "detectors")
    policies = document.get("policies") or {}
    if not isinstance(policies, dict):
        raise ThresholdsError(f"{origin}: 'policies' must map policy names to their detectors")
    by_policy = {
        str(name): _fractions((group or {}).get("detectors"), "threshold", origin, f"policies.{name}.detectors")
        for name, group in policies.items()
    }
    return Thresholds(
        version=str(document["version"]),
        by_detector=by_detector,
        by_policy=by_policy,
        alert_probability=_fractions(
            document.get("alert_probability") or {}, "min_probability", origin, "alert_probability"
        ),
        recalibration={
            str(name): _platt(group["calibration"], origin, f"policies.{name}.calibration")
            for name, group in policies.items()
            if isinstance(group, dict) and group.get("calibration") is not None
        },
    )


def _platt(entry: Any, origin: str, where: str) -> tuple[float, float]:
    slope = entry.get("slope") if isinstance(entry, dict) else None
    intercept = entry.get("intercept") if isinstance(entry, dict) else None
    if not isinstance(slope, int | float) or not isinstance(intercept, int | float) or slope <= 0:
        raise ThresholdsError(f"{origin}: {where} needs a positive slope and an intercept")
    return float(slope), float(intercept)


def _fractions(entries: Any, key: str, origin: str, where: str) -> dict[str, float]:
    """``{name: {key: value}}`` as ``{name: value}``, every value a number in [0, 1]."""
    if not isinstance(entries, dict):
        raise ThresholdsError(f"{origin}: '{where}' must map names to settings")
    values: dict[str, float] = {}
    for name, entry in entries.items():
        value = entry.get(key) if isinstance(entry, dict) else None
        if not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
            raise ThresholdsError(f"{origin}: {where}.{name}.{key} must be a number in [0, 1]")
        values[str(name)] = float(value)
    return values
