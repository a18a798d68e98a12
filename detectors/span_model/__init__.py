"""Model-based span detection: a token classifier (an ONNX model you configure) marks unsupported answer spans.

Its settings and descriptor; the runtime is :mod:`detectors.span_model.detector` (docs/detectors.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from detectors.spec import Description, DetectorSpec, Runtime


class NliLabelOrder(BaseModel):
    """Which output index of the NLI model means which label (MNLI heads differ)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    contradiction: int = Field(default=0, ge=0)
    neutral: int = Field(default=1, ge=0)
    entailment: int = Field(default=2, ge=0)

    @model_validator(mode="after")
    def _check_distinct(self) -> NliLabelOrder:
        if len({self.contradiction, self.neutral, self.entailment}) != 3:
            raise ValueError("nli_labels: contradiction, neutral and entailment need distinct indices")
        return self


class SpanModelConfig(BaseModel):
    """Where the span model (and optional NLI explainer) live and how they are run.

    ``tokenizer_path`` defaults to ``tokenizer.json`` beside ``model_path`` (likewise for
    the NLI model).  ``stride_tokens`` is the overlap between neighbouring context windows.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    model_path: Path | None = None
    tokenizer_path: Path | None = None
    max_length_tokens: int = Field(default=512, ge=8)
    min_context_tokens: int = Field(default=128, ge=1)
    stride_tokens: int = Field(default=64, ge=0)
    max_chunks: int = Field(default=8, ge=1)
    batch_size: int = Field(default=16, ge=1)
    hallucination_label_index: int = Field(default=1, ge=0)
    token_threshold: float = Field(default=0.5, ge=0.0, le=1.0)
    aggregation: Literal["max_span", "noisy_or"] = "max_span"
    nli_model_path: Path | None = None
    nli_tokenizer_path: Path | None = None
    nli_labels: NliLabelOrder = Field(default_factory=NliLabelOrder)
    nli_max_length_tokens: int = Field(default=512, ge=8)
    threads: int = Field(default=1, ge=1)

    @model_validator(mode="after")
    def _check_windows(self) -> SpanModelConfig:
        if self.stride_tokens >= self.min_context_tokens:
            raise ValueError("stride_tokens must be below min_context_tokens, or windows would not advance")
        if self.min_context_tokens >= self.max_length_tokens:
            raise ValueError("min_context_tokens must be below max_length_tokens, leaving room for the answer")
        return self


def _runtime() -> Runtime:
    from detectors.span_model import detector

    return detector


DETECTOR = DetectorSpec(
    name="span_model",
    kind="content",
    config=SpanModelConfig,
    # Max span probability (or noisy-OR); used only when a span model is configured.
    threshold=0.5,
    runtime=_runtime,
    description=Description(
        checks="which answer tokens a token classifier marks as unsupported",
        blind_to="whatever its training data did not cover",
    ),
    structural_keys=frozenset({"nli", "aggregation", "label"}),
)
