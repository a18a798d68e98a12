"""Coverage: calls the content detectors could not really check, so their silence is not a clean bill.

Its settings and descriptor; the runtime is :mod:`detectors.coverage.detector` (docs/detectors.md).
Its flag means *unverified*, never *hallucinated*: the verdict, the agreement rule and the
evaluation leave it out, and the rate estimate counts such calls apart.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from detectors.spec import Description, DetectorSpec, Runtime


class CoverageConfig(BaseModel):
    """Which answer languages the embedding model covers, and when an answer is long enough to tell."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # ISO 639-1 codes of the languages the configured embedding model was trained on: the default,
    # all-MiniLM-L6-v2, English only. Set them with the model (a multilingual one covers many); empty: no check.
    languages: list[str] = Field(default_factory=lambda: ["en"])
    # Shorter answers are not language-checked: a few words identify a language too unreliably.
    min_language_chars: int = Field(default=40, ge=1)


def _runtime() -> Runtime:
    from detectors.coverage import detector

    return detector


DETECTOR = DetectorSpec(
    name="coverage",
    kind="content",
    config=CoverageConfig,
    # Its score is 1 when it found a reason the call is unverified, 0 otherwise: any reason flags.
    threshold=0.5,
    runtime=_runtime,
    description=Description(
        checks=(
            "whether the content detectors could read the whole call: the answer's language, "
            "sources past max_source_chars"
        ),
        blind_to="whether the answer is right: its flag means unverified, not hallucinated",
        ok="found that they could",
    ),
    structural_keys=frozenset({"reasons", "language"}),
)
