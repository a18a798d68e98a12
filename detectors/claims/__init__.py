"""The claims scorer: an LLM judge checks each claim of the answer (sampled calls only, off by default).

Its settings and descriptor; the runtime is :mod:`detectors.claims.detector` (docs/detectors.md).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from detectors.spec import Description, DetectorSpec, Runtime


class ClaimsConfig(BaseModel):
    """The judge's limits."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = False
    max_claims: int = Field(default=20, ge=1, description="claims judged per answer; the rest are left out")
    max_context_chars: int = Field(default=12_000, ge=100, description="context sent to the judge, cut beyond")
    max_tokens: int = Field(default=800, ge=1, description="per judge answer")
    json_mode: bool = Field(default=True, description="ask for response_format json_object (turn off if refused)")

    @property
    def requests(self) -> int:
        """Requests per sampled call: claim extraction, then verdicts."""
        return 2


def _runtime() -> Runtime:
    from detectors.claims import detector

    return detector


DETECTOR = DetectorSpec(
    name="claims",
    kind="sampled",
    config=ClaimsConfig,
    # Share of the answer's claims the judge found contradicted or unsupported (off by default):
    # 0.3 flags about one claim in three. Not yet calibrated on labelled data.
    threshold=0.3,
    runtime=_runtime,
    description=Description(
        checks="each claim of the answer against the context, as an LLM judge sees it",
        blind_to="what the judge itself gets wrong",
    ),
    structural_keys=frozenset({"verdict"}),
)
