"""Schema & tool-call violation detector: answers and tool calls checked against their JSON Schemas.

Its settings and descriptor; the runtime is :mod:`detectors.schema_violation.detector` (docs/detectors.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from detectors.spec import Description, DetectorSpec, Runtime


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


def _check_schema(schema: Mapping[str, Any], what: str) -> None:
    """Raise a ValueError naming ``what`` when ``schema`` is not valid Draft 2020-12."""
    # Imported here: settings without schemas must not pay for jsonschema.
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        raise ValueError(f"invalid JSON Schema for {what}: {exc.message}") from exc


def _runtime() -> Runtime:
    from detectors.schema_violation import detector

    return detector


DETECTOR = DetectorSpec(
    name="schema_violation",
    kind="structural",
    config=SchemaViolationConfig,
    # Its score is 1.0 when any schema or tool-call violation was found.
    threshold=0.5,
    runtime=_runtime,
    description=Description(
        checks="tool calls and structured answers against their definitions",
        blind_to="meaning: a well-formed call or answer with a wrong value passes",
    ),
    structural_keys=frozenset({"kind", "tool", "parameter", "path", "suggestion"}),
)
