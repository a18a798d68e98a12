"""When uncertain calls go to the application's own model (the settings file's ``escalation:`` section).

The judge is the endpoint of ``consistency.llm`` asked with the claims detector's prompts and
limits (``consistency.claims``); this section says when it is asked, how long an alert waits for
its answer, and what each application may spend.  Kept apart from the modules that use it so
that loading settings imports neither ``openai`` nor the stream.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class JudgeBudgetConfig(BaseModel):
    """What one application's judge calls may cost, across every worker (None: no limit of that kind)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # Judge calls a minute (each is two requests), split over the workers by the input partitions they own.
    calls_per_minute: float | None = Field(default=10.0, ge=0)
    # Tokens a UTC day, reserved at an estimate when a call is sent and settled with what the endpoint reports.
    tokens_per_day: float | None = Field(default=500_000.0, ge=0)


class EscalationSettings(BaseModel):
    """Which calls the judge answers, how long their alert waits, and each application's budget."""

    model_config = ConfigDict(extra="forbid")

    # Off until the team's endpoint is set in consistency.llm: every judged call costs two requests.
    enabled: bool = False
    # An escalated call's alert waits this long for the judgment, then is decided without it.
    deadline_seconds: float = Field(default=180.0, gt=0, le=3600)
    # How often held decisions are checked against their deadline.
    release_check_seconds: float = Field(default=5.0, gt=0)
    # Share of calls the judge also answers where its answer changes nothing: the first the review queue
    # will serve (its seeded draw order), so that review verdicts measure the judge. Without verdicts on
    # judged calls its weight stays the shipped prior. Spent after the calls whose route it could change.
    weigh_share: float = Field(default=0.05, ge=0.0, le=1.0)
    # Every application's budget, unless `apps` names its own (an application is a policy's name).
    budget: JudgeBudgetConfig = Field(default_factory=JudgeBudgetConfig)
    apps: dict[str, JudgeBudgetConfig] = Field(default_factory=dict)
