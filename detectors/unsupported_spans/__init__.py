"""Unsupported-spans detector: which words of the answer no source supports, and where.

Its settings and descriptor; the runtime is :mod:`detectors.unsupported_spans.detector` (docs/detectors.md).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from detectors.spec import Description, DetectorSpec, Runtime


class UnsupportedSpansConfig(BaseModel):
    """Where the learned word and call models live, and how much text is read."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model_path: Path | None = Field(default=None, description="model JSON from `halluwatch train`; None: built-in")
    max_answer_chars: int = Field(default=20_000, ge=1)
    # A long document costs one model window per ~1,000 characters; answers rarely draw on more.
    max_support_chars: int = Field(default=40_000, ge=1, description="per source; the rest is not read")
    max_evidence_spans: int = Field(default=20, ge=1)


def _runtime() -> Runtime:
    from detectors.unsupported_spans import detector

    return detector


DETECTOR = DetectorSpec(
    name="unsupported_spans",
    kind="content",
    config=UnsupportedSpansConfig,
    # The call model's probability that the answer is hallucinated (halluwatch train). At 0.6:
    # P 0.64 / R 0.64 on RAGTruth's training documents (0.66 / 0.59 on its held-out ones).
    threshold=0.6,
    runtime=_runtime,
    description=Description(
        checks="which answer words no source supports",
        blind_to="claims the sources state in other words, and sources it was not given",
    ),
    structural_keys=frozenset({"source_id"}),
)
