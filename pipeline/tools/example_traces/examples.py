"""The example requests and what their apps declare, loaded once from examples.yaml and schemas.yaml."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from importlib import resources
from typing import Any, NamedTuple

from pipeline.tools.example_traces.data import ExampleDataError, Row, read, typed


class ConventionName(StrEnum):
    """The attribute layouts (conventions, docs/architecture.md) the examples are written in."""

    GENAI = "genai"  # OpenTelemetry GenAI semantic conventions, current JSON-string form
    OPENLLMETRY = "openllmetry"  # Traceloop <= 0.52 flat gen_ai.prompt.N.* layout
    OPENINFERENCE = "openinference"  # Arize OpenInference
    SEED = "seed"  # the hand-written convention of seed 000 (llm.* span names)
    # openai-v2's default mode: a content-free GenAI span, the content in GenAI event log records
    GENAI_EVENTS = "genai-events"


Sources = tuple[tuple[str, str], ...]
# The layouts whose writers record an agent's earlier tool calls and results in the request.
TOOL_TURN_CONVENTIONS = frozenset({ConventionName.GENAI, ConventionName.OPENLLMETRY, ConventionName.OPENINFERENCE})


class ToolResult(NamedTuple):
    """A tool an agent ran: raw JSON arguments, the result text, whether it failed."""

    name: str
    arguments: str
    result: str
    failed: bool = False


@dataclass(frozen=True, slots=True)
class Example:
    """One example LLM request, its content, and what the detectors should say about it.

    ``sources`` are ``(document id, text)``; the prompt cites them as ``[1]``, ``[2]`` in
    order.  ``tool_calls`` are ``(tool name, raw JSON arguments)`` as the model produced
    them.  ``tool_results`` are the tools an agent ran before this call: the request
    carries them as an assistant tool-call message and its tool messages.  ``schema_violation`` says why a schema &
    tool-call detector must flag the call (``None``: it must not); ``hallucinated`` is the
    ground truth about the content.
    """

    name: str
    convention: ConventionName
    service: str
    question: str
    answer: str = ""
    sources: Sources = ()
    tools: tuple[str, ...] = ()
    tool_calls: tuple[tuple[str, str], ...] = ()
    tool_results: tuple[ToolResult, ...] = ()
    # The agent's run of each of ``tool_calls``, after the call (None: the row gives no result, not run).
    tool_call_runs: tuple[ToolResult | None, ...] = ()
    # (enduser.id, enduser.role) of the person the app acts for, on the LLM span; None: not recorded.
    user: tuple[str, str] | None = None
    operation: str = "chat"
    finish_reason: str = "stop"
    model: str = "gpt-4o-mini"
    # Mean probability of the sampled tokens; ``None``: the span carries no logprobs.
    confidence: float | None = None
    hallucinated: bool = False
    schema_violation: str | None = None


@dataclass(frozen=True, slots=True)
class Tool:
    """A function an app offers the model; ``parameters`` is the JSON Schema of its arguments."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True, slots=True)
class App:
    """What the app around a call adds to the user's question: its HTTP route and system prompt."""

    route: str
    system_prompt: str


def _tools(rows: dict[str, Any]) -> dict[str, Tool]:
    tools = {}
    for name, value in rows.items():
        with Row(value, f"schemas.yaml tools.{name}") as row:
            tools[name] = Tool(name, row.need("description", str), row.need("parameters", dict))
    return tools


def _output_schemas(rows: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        operation: typed(schema, dict, f"schemas.yaml output_schemas.{operation}") for operation, schema in rows.items()
    }


def _apps(rows: dict[str, Any]) -> dict[str, App]:
    apps = {}
    for kind, value in rows.items():
        with Row(value, f"examples.yaml apps.{kind}") as row:
            apps[kind] = App(row.need("route", str), row.need("system_prompt", str))
    if not {"rag", "tools"} <= apps.keys():
        raise ExampleDataError("examples.yaml apps: 'rag' and 'tools' are the fallbacks and must be there")
    return apps


def _pair(value: object, where: str, first: str, second: str) -> tuple[str, str]:
    """The two string fields of a small mapping: a source's (id, text), a tool call's (name, arguments), a user's."""
    with Row(value, where) as row:
        return row.need(first, str), row.need(second, str)


def _tool_call(value: object, where: str) -> tuple[tuple[str, str], ToolResult | None]:
    """A tool call the model made (name, raw arguments), and the agent's run of it when the row gives its result."""
    with Row(value, where) as row:
        name, arguments = row.need("name", str), row.need("arguments", str)
        result = row.get("result", str, None)
        ran = ToolResult(name, arguments, result, row.get("failed", bool, False)) if result is not None else None
        return (name, arguments), ran


def _tool_result(value: object, where: str) -> ToolResult:
    with Row(value, where) as row:
        return ToolResult(
            row.need("name", str), row.need("arguments", str), row.need("result", str), row.get("failed", bool, False)
        )


def _sources(rows: dict[str, Any]) -> dict[str, Sources]:
    sets = {}
    for name, documents in rows.items():
        where = f"examples.yaml sources.{name}"
        sets[name] = tuple(
            _pair(document, f"{where}[{i}]", "id", "text") for i, document in enumerate(typed(documents, list, where))
        )
    return sets


def _example(row: Row, sources: Mapping[str, Sources], tools: Mapping[str, Tool]) -> Example:
    source_set = row.get("sources", str, None)
    if source_set is not None and source_set not in sources:
        raise ExampleDataError(f"{row.where}.sources: no source set {source_set!r}")
    offered = tuple(typed(name, str, f"{row.where}.tools") for name in row.get("tools", list, []))
    if not set(offered) <= tools.keys():
        raise ExampleDataError(f"{row.where}.tools: {sorted(set(offered) - tools.keys())} not in schemas.yaml")
    convention = row.need("convention", str)
    if convention not in {c.value for c in ConventionName}:
        raise ExampleDataError(f"{row.where}.convention: {convention!r} is none of {[c.value for c in ConventionName]}")
    calls = [_tool_call(call, f"{row.where}.tool_calls[{i}]") for i, call in enumerate(row.get("tool_calls", list, []))]
    results = row.get("tool_results", list, [])
    if results and convention not in TOOL_TURN_CONVENTIONS:
        raise ExampleDataError(f"{row.where}.tool_results: not written in the {convention} layout")
    return Example(
        name=row.need("name", str),
        convention=ConventionName(convention),
        service=row.need("service", str),
        question=row.need("question", str),
        answer=row.get("answer", str, ""),
        sources=sources[source_set] if source_set is not None else (),
        tools=offered,
        # Arguments stay the raw string the model wrote: odd or invalid JSON is what some examples are about.
        tool_calls=tuple(call for call, _ in calls),
        tool_call_runs=tuple(run for _, run in calls),
        tool_results=tuple(_tool_result(result, f"{row.where}.tool_results[{i}]") for i, result in enumerate(results)),
        user=_pair(user, f"{row.where}.user", "id", "role") if (user := row.get("user", dict, None)) else None,
        operation=row.get("operation", str, "chat"),
        finish_reason=row.get("finish_reason", str, "stop"),
        model=row.get("model", str, "gpt-4o-mini"),
        confidence=row.get("confidence", float, None),
        hallucinated=row.get("hallucinated", bool, False),
        schema_violation=row.get("schema_violation", str, None),
    )


def _examples(
    rows: list[Any], key: str, sources: Mapping[str, Sources], tools: Mapping[str, Tool]
) -> tuple[Example, ...]:
    examples = []
    for i, value in enumerate(rows):
        with Row(value, f"examples.yaml {key}[{i}]") as row:
            examples.append(_example(row, sources, tools))
    return tuple(examples)


def _load_schemas() -> tuple[dict[str, Tool], dict[str, dict[str, Any]]]:
    with read("schemas.yaml") as document:
        return _tools(document.need("tools", dict)), _output_schemas(document.need("output_schemas", dict))


def _load_examples(tools: Mapping[str, Tool]) -> tuple[dict[str, App], tuple[Example, ...], tuple[Example, ...]]:
    with read("examples.yaml") as document:
        apps = _apps(document.need("apps", dict))
        sources = _sources(document.need("sources", dict))
        examples = _examples(document.need("examples", list), "examples", sources, tools)
        log_events = _examples(document.need("log_event_examples", list), "log_event_examples", sources, tools)
    names = [example.name for example in examples + log_events]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ExampleDataError(f"examples.yaml: example names must be unique, repeated: {repeated}")
    return apps, examples, log_events


# TOOL_DEFINITIONS: tool name -> the function the example apps offer under that name.
# EXAMPLE_OUTPUT_SCHEMAS: operation -> JSON Schema (Draft 2020-12) of its structured output, for the demo config.
TOOL_DEFINITIONS, EXAMPLE_OUTPUT_SCHEMAS = _load_schemas()
# APPS: kind of app (an operation, else "tools" or "rag") -> its route and system prompt.
# EXAMPLES: the demo set, one row per trace in the order example_traces() returns them.
# LOG_EVENT_EXAMPLES: calls whose content travels only in log records (example_log_event_telemetry()).
APPS, EXAMPLES, LOG_EVENT_EXAMPLES = _load_examples(TOOL_DEFINITIONS)


def example_registries() -> dict[str, Any]:
    """The demo apps' tool facts registries (``detectors.tool_facts``): their API and who may call what."""
    here = resources.files("pipeline.tools.example_traces")
    return {
        "openapi": [{"tools": ["http_request"], "document": str(here.joinpath("shop_api.yaml"))}],
        "permissions": {"file": str(here.joinpath("permissions.yaml"))},
    }
