"""The per-model entropy baselines file of the confidence detector (docs/detectors.md).

Written by ``halluwatch baseline`` (:mod:`pipeline.offline.baseline`), read by every
process that runs the confidence detector::

    version: entropy-3f1c2a9b7d        # content hash: same statistics, same version
    created: "2026-11-22T10:00:00Z"
    source: "trace file good.jsonl"
    top_k: 5                           # the detector must run with the same top_k
    models:
      gpt-4o-mini: {mean: 0.412, stdev: 0.118, n: 1840}
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

import yaml
from pydantic import ValidationError

from detectors.config import DEFAULT_TOP_K, ModelBaseline

_VERSION_PREFIX = "entropy-"


class BaselineError(ValueError):
    """Baselines cannot be computed, read or written; the message says which input and why."""


def content_version(stats: Mapping[str, tuple[float, float, int]]) -> str:
    """A version (from model to mean, stdev and count) that changes exactly when the statistics do."""
    canonical = json.dumps(sorted((model, *values) for model, values in stats.items()))
    return _VERSION_PREFIX + hashlib.sha256(canonical.encode()).hexdigest()[:10]


def write_baselines(
    path: Path, baselines: Mapping[str, ModelBaseline], source_description: str, top_k: int = DEFAULT_TOP_K
) -> str:
    """Write the versioned baselines file (see the module docstring); returns its version."""
    if not baselines:
        raise BaselineError("no baselines to write")
    stats = {model: (b.mean, b.stdev, b.n) for model, b in baselines.items()}
    version = content_version(stats)
    document = {
        "version": version,
        "created": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "source": source_description,
        "top_k": top_k,
        "models": {model: {"mean": mean, "stdev": stdev, "n": n} for model, (mean, stdev, n) in sorted(stats.items())},
    }
    path.write_text(yaml.safe_dump(document, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return version


def load_baselines(path: Path) -> dict[str, ModelBaseline]:
    """Read a baselines file; each baseline carries the file's version.  Errors name file and field."""
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise BaselineError(f"cannot read baselines file {path}: {exc}") from exc
    if not isinstance(document, dict) or not document.get("version") or not isinstance(document.get("models"), dict):
        raise BaselineError(f"{path}: expected a mapping with 'version' and 'models'")
    version = str(document["version"])
    baselines = {}
    for model, entry in document["models"].items():
        try:
            baselines[str(model)] = ModelBaseline.model_validate({**entry, "version": version})
        except (ValidationError, TypeError) as exc:
            raise BaselineError(f"{path}: models.{model} is not a baseline: {exc}") from exc
    return baselines
