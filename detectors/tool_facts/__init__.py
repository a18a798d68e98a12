"""Tool facts detector: tool calls for endpoints, values or permissions its registries do not have.

Its settings and descriptor; the runtime is :mod:`detectors.tool_facts.detector` (docs/detectors.md).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

from detectors.spec import Description, DetectorSpec, Runtime


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


def _runtime() -> Runtime:
    from detectors.tool_facts import detector

    return detector


DETECTOR = DetectorSpec(
    name="tool_facts",
    kind="structural",
    config=ToolFactsConfig,
    # Its score is 1.0 when a tool call names an endpoint, value or permission its registries do not have.
    threshold=0.5,
    runtime=_runtime,
    description=Description(
        checks="tool call arguments against the registries declared for them",
        blind_to="anything no registry declares",
    ),
    structural_keys=frozenset({"kind", "tool", "parameter", "path", "suggestion", "registries"}),
)
