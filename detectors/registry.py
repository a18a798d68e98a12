"""Every detector, in one ordered list.

A new detector is its package (with its ``DETECTOR``), its test and one line in :data:`DETECTORS`.
The suites (:mod:`detectors.build`), the settings sections (:mod:`detectors.settings`), the
built-in thresholds (:mod:`detectors.thresholds`), the alert renderings and the content
policy's structural keys are derived from this list. Light: only the detector packages'
``__init__`` modules (pydantic models and descriptors), never their runtimes.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from detectors import (
    claims,
    confidence,
    contradiction,
    coverage,
    grounding,
    schema_violation,
    self_consistency,
    sentinel,
    span_model,
    tool_facts,
    tool_outcome,
    unsupported_spans,
)
from detectors.spec import DetectorSpec

# Structural detectors first, then the sentinel that gates the content detectors, these
# cheapest first, then those the sampled stage runs.
DETECTORS: tuple[DetectorSpec[Any], ...] = (
    schema_violation.DETECTOR,
    tool_facts.DETECTOR,
    tool_outcome.DETECTOR,
    sentinel.DETECTOR,
    contradiction.DETECTOR,
    confidence.DETECTOR,
    grounding.DETECTOR,
    unsupported_spans.DETECTOR,
    span_model.DETECTOR,
    coverage.DETECTOR,
    self_consistency.DETECTOR,
    claims.DETECTOR,
)

# Detectors whose flag is a fact about the call (a schema it breaks, a tool result it misreports,
# an endpoint that does not exist), checked rather than guessed: never a probability.
FACT_DETECTORS = frozenset(spec.name for spec in DETECTORS if spec.kind == "structural")


@cache
def structural_evidence_keys() -> frozenset[str]:
    """Evidence keys that hold no content, of every detector."""
    return frozenset().union(*(spec.structural_keys for spec in DETECTORS))
