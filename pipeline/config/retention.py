"""How long stored data lives, and which call attributes an erasure can select by (the ``retention:`` section)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

SECONDS_PER_DAY = 86_400


class RetentionSettings(BaseModel):
    """Content expires first, the rows later; verdicts and review records are kept until deleted.

    Days may be fractional (a test's few seconds); ClickHouse's TTL takes them as whole seconds.
    A change takes effect at the next ``halluwatch migrate`` (or worker start), which reports it.
    """

    model_config = ConfigDict(extra="forbid")

    # The prompt, sources, answer and logprobs of llm_calls, and every finding's and alert's
    # summary and evidence (they quote them), are emptied this long after the call started.
    content_days: float = Field(default=30.0, gt=0)
    # The rows of llm_calls, findings and alerts (scores, probabilities, delivery history) are deleted this late.
    days: float = Field(default=180.0, gt=0)
    # Call attributes `halluwatch erase --key KEY=VALUE` can select by: the worker keeps their values as given in
    # llm_calls.erasable (attributes have PII masked in content modes other than "store"), as long as the row.
    # (enduser.id: the OpenTelemetry name before user.id.)
    erasable_keys: list[str] = Field(default_factory=lambda: ["user.id", "session.id", "enduser.id"])

    @model_validator(mode="after")
    def _rows_outlast_content(self) -> RetentionSettings:
        if self.content_days > self.days:
            raise ValueError(
                f"content_days ({self.content_days:g}) cannot exceed days ({self.days:g}): a row holds its content"
            )
        return self

    @property
    def content_seconds(self) -> int:
        """``content_days`` in whole seconds (at least one)."""
        return max(round(self.content_days * SECONDS_PER_DAY), 1)

    @property
    def row_seconds(self) -> int:
        """``days`` in whole seconds (at least one)."""
        return max(round(self.days * SECONDS_PER_DAY), 1)
