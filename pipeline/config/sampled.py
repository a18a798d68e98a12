"""Configuration of the sampled detectors (the settings file's ``consistency:`` section, docs/detectors.md).

Self-consistency and the claims scorer ask an LLM endpoint for every call they judge, so
they run only on a deterministic sample of high-risk calls, off the hot path, under a
request and token budget.  Kept apart from the modules that use it so that loading
settings never imports the ``openai`` library.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

from detectors.registry import DETECTORS
from detectors.settings import with_detector_sections
from detectors.spec import SampledConfig


class RiskRule(BaseModel):
    """What makes a call high-risk: an attribute value, words in the prompt, or both.

    ``attribute`` is looked up in the call's routing attributes (its span attributes, and
    ``service.name``, ``service.namespace``, ``service.version`` and the deployment
    environment of its resource).  With ``values`` the attribute must hold one of them
    (case-insensitive), without them it only has to be present.  ``keywords`` are whole
    words or phrases of the user's prompt (case-insensitive).  A rule with both needs both.
    """

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    attribute: str = ""
    values: list[str] = Field(default_factory=list)
    keywords: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _says_something(self) -> RiskRule:
        if not self.attribute and not self.keywords:
            raise ValueError(f"risk rule {self.name!r} needs an attribute or keywords")
        if self.values and not self.attribute:
            raise ValueError(f"risk rule {self.name!r} has values but no attribute")
        return self


def default_risk_rules() -> list[RiskRule]:
    """Regulated domains, named by the app in an ``app.domain`` span attribute."""
    return [RiskRule(name="regulated-domain", attribute="app.domain", values=["medical", "financial", "legal"])]


class LLMEndpointConfig(BaseModel):
    """An OpenAI-compatible chat-completions endpoint, and what this worker may spend on it.

    The API key is a secret setting: ``HALLUWATCH_CONSISTENCY__LLM__API_KEY``, or the file
    ``halluwatch_consistency__llm__api_key`` in ``$HALLUWATCH_SECRETS_DIR`` (a mounted
    Kubernetes secret); unset, the openai library reads ``OPENAI_API_KEY``.  The budget is
    per worker process: a fleet of n workers may spend n times the limits.  The same endpoint
    judges escalated calls (``escalation``), under that section's own budget per application.
    """

    model_config = ConfigDict(extra="forbid")

    base_url: str = ""  # empty: the openai library's default (OPENAI_BASE_URL, else api.openai.com)
    model: str = ""  # empty: the model the traced call used
    api_key: SecretStr | None = None
    timeout_seconds: float = Field(default=30.0, gt=0)
    max_retries: int = Field(default=2, ge=0, description="retries on 429, 5xx, timeouts (the openai library's)")
    max_requests_per_minute: int = Field(default=60, ge=1)
    max_tokens_per_day: int = Field(default=2_000_000, ge=1)


class SharedConsistencySettings(BaseModel):
    """Sampling, endpoint, budget and the sampled detectors (self_consistency, claims)."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = False  # off until an endpoint is configured: every sampled call costs requests
    topic: str = "halluwatch.consistency"  # sampled calls, key = trace id
    # Share of high-risk traces sampled, chosen by a hash of the trace id: every worker and every replay agree.
    sample_rate: float = Field(default=0.01, ge=0.0, le=1.0)
    high_risk: list[RiskRule] = Field(default_factory=default_risk_rules)
    max_concurrency: int = Field(default=4, ge=1, description="sampled calls judged at once per worker")
    # Larger calls are not sampled: the whole call travels on the topic (Kafka's default limit is 1 MB).
    max_call_bytes: int = Field(default=512 * 1024, ge=1024)
    llm: LLMEndpointConfig = Field(default_factory=LLMEndpointConfig)

    @model_validator(mode="after")
    def _budget_fits_one_call(self) -> SharedConsistencySettings:
        needed = self.requests_per_call
        if self.enabled and not needed:
            raise ValueError("consistency is enabled but both self_consistency and claims are off")
        if self.llm.max_requests_per_minute < needed:
            raise ValueError(
                f"llm.max_requests_per_minute={self.llm.max_requests_per_minute} is below the {needed} requests "
                "one sampled call needs"
            )
        return self

    @property
    def requests_per_call(self) -> int:
        """Requests the enabled detectors make for one sampled call."""
        configs: list[SampledConfig] = [spec.config_in(self) for spec in DETECTORS if spec.kind == "sampled"]
        return sum(config.requests for config in configs if config.enabled)


# Each sampled detector's settings, named like it, after the fields above (see detectors/settings.py).
if TYPE_CHECKING:
    ConsistencySettings = SharedConsistencySettings
else:
    ConsistencySettings = with_detector_sections(SharedConsistencySettings, "ConsistencySettings", ("sampled",))
