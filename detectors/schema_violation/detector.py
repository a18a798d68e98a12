"""Schema & tool-call violation detector (docs/detectors.md).

The cheapest detector and the one with the fewest false positives, so it always runs.
It checks two contracts the application itself declared:

* **Structured output**: when a JSON Schema is registered for the call's operation, the
  answer must parse as JSON (a fenced ```json block is tolerated, as common extractors
  do) and validate against it (Draft 2020-12).  An answer cut off by the token limit is
  named as truncated rather than as malformed: the fix is a different one.
* **Tool calls**: every call must name a tool the app offered and pass arguments valid
  under that tool's parameter schema.  The registry is the config's tools plus the tool
  definitions recorded on the span itself (zero config for most users); the span wins a
  name clash because it is what the model actually saw.

Design choices, stated because each trades recall for precision or cost:

* The score is binary (1.0 on any violation).  A violation is a broken contract, not a
  probability: downstream code fails or silently drops fields either way.  The count and
  details are in the evidence.
* Function-calling schemas rarely say ``additionalProperties: false``, yet an argument the
  app never declared is exactly the invented-parameter hallucination.  So when a tool's
  top-level schema lists ``properties`` and has no keyword that could admit more
  (``additionalProperties``, ``patternProperties``, composition, ``$ref``), extra
  top-level arguments are reported.  An explicit ``additionalProperties`` is respected.
* Span-supplied schemas are untrusted input: validators never fetch a remote ``$ref`` and
  match patterns with RE2 (:mod:`detectors.schema_validators`).  A schema that cannot be
  evaluated (unresolvable ``$ref``, invalid regex, invalid span schema) means "cannot
  check", never an error or a flag.
* ``format`` is an annotation, as Draft 2020-12 defines it by default.
* An empty answer is not checked against the output schema: with content capture off the
  span carries no text, and a missing text is not a malformed one.  Likewise tool-call
  arguments recorded as absent (``None``) are not checked; an empty string means ``{}``.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from enum import StrEnum
from itertools import islice
from typing import Any

from jsonschema.exceptions import ValidationError
from rapidfuzz import fuzz, process, utils

from detectors.base import Detector, DetectorResult, checked_threshold
from detectors.llm_call import LLMCall, ToolCall
from detectors.schema_validators import SchemaValidators
from detectors.schema_violation import DETECTOR, SchemaViolationConfig
from detectors.spec import Ingredients
from detectors.text import evidence as shown
from detectors.text.passages import clip
from detectors.text.prose import JSON_FENCE

logger = logging.getLogger(__name__)

MAX_VIOLATIONS = 20  # per call, so evidence rows stay small
_MAX_VALUE_CHARS = 200
_MAX_KNOWN_TOOLS_LISTED = 5
_SUGGESTION_MIN_SCORE = 60.0  # rapidfuzz ratio: search_documents vs search_docs scores 81
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_BOUND_PHRASES = {
    "minimum": "is below the minimum",
    "maximum": "is above the maximum",
    "exclusiveMinimum": "must be greater than",
    "exclusiveMaximum": "must be less than",
}
_JSON_TYPES: tuple[tuple[type, str], ...] = (
    (bool, "boolean"),  # before int: bool is an int subclass
    (int, "integer"),
    (float, "number"),
    (str, "string"),
    (list, "array"),
    (dict, "object"),
)


class ViolationKind(StrEnum):
    """What broke the contract; stable names, they are stored and aggregated on."""

    UNKNOWN_TOOL = "unknown_tool"
    INVALID_ARGUMENTS_JSON = "invalid_arguments_json"
    UNKNOWN_PARAMETER = "unknown_parameter"
    MISSING_PARAMETER = "missing_parameter"
    WRONG_TYPE = "wrong_type"
    OUT_OF_RANGE = "out_of_range"
    NOT_IN_ENUM = "not_in_enum"
    OTHER = "other"
    OUTPUT_NOT_JSON = "output_not_json"
    OUTPUT_TRUNCATED = "output_truncated"
    OUTPUT_SCHEMA = "output_schema"


@dataclass(frozen=True, slots=True)
class Violation:
    """One contract violation.

    ``message`` is a complete human line; ``path`` locates the offending value as a JSON
    path into the answer or the tool's arguments; ``value`` is that value as compact JSON
    text (the raw text of unparseable arguments), truncated, so evidence is always
    serializable and small.
    """

    kind: ViolationKind
    message: str
    tool: str | None = None
    parameter: str | None = None
    path: str | None = None
    suggestion: str | None = None
    value: str | None = None

    def to_evidence(self) -> dict[str, str]:
        """Return the JSON form stored with the result, absent fields left out."""
        return {key: str(value) for key, value in asdict(self).items() if value is not None}


class SchemaViolationDetector(Detector):
    """Flags answers that break their output schema and tool calls that break their tool's."""

    name = "schema_violation"
    version = "1.0.0"

    def __init__(self, config: SchemaViolationConfig, threshold: float) -> None:
        self._threshold = checked_threshold(threshold)
        self._schemas = SchemaValidators()
        self._output_validators = {op: self._schemas.output(schema) for op, schema in config.output_schemas.items()}
        self._config_tools: dict[str, Any] = {
            tool.name: None if tool.parameters is None else self._schemas.tool(tool.parameters) for tool in config.tools
        }

    def close(self) -> None:
        """Drop the compiled patterns and span schemas."""
        self._schemas.clear()

    def detect_batch(self, calls: Sequence[LLMCall]) -> list[DetectorResult]:
        """Check each call; pure CPU work with nothing to gain from batching further."""
        return [self._detect(call) for call in calls]

    def _detect(self, call: LLMCall) -> DetectorResult:
        violations: list[Violation] = []
        output_checked = False
        validator = self._output_validators.get(call.operation, self._output_validators.get(call.span_name))
        if validator is not None:
            output_violations = _check_output(call.answer, call.finish_reason, validator, self._schemas)
            output_checked = output_violations is not None
            violations += output_violations or []
        tool_calls = call.output_tool_calls
        registry = self._tool_registry(call) if tool_calls else {}
        tool_calls_checked = len(tool_calls) if registry else 0
        if registry:
            for tool_call in tool_calls:
                violations += _check_tool_call(tool_call, registry, self._schemas)
        if not output_checked and not tool_calls_checked:
            summary = "nothing to check: no answer under an output schema, no tool calls against known tools"
            return self.skipped_result(summary, self._threshold)
        evidence = {
            "violations": [violation.to_evidence() for violation in violations[:MAX_VIOLATIONS]],
            "violation_count": len(violations),
            "checked": {"output_schema": output_checked, "tool_calls": tool_calls_checked},
        }
        more = f" (+{len(violations) - 1} more)" if len(violations) > 1 else ""
        summary = violations[0].message + more if violations else "no violations"
        score = 1.0 if violations else 0.0
        return self.scored_result(score, self._threshold, severity=4, summary=summary, evidence=evidence)

    def _tool_registry(self, call: LLMCall) -> dict[str, Any]:
        """Map tool name to argument validator (``None``: name known, arguments uncheckable)."""
        registry = dict(self._config_tools)
        for definition in call.tool_definitions:
            parameters = definition.parameters
            registry[definition.name] = None if parameters is None else self._schemas.span_tool(parameters)
        return registry


def _check_output(
    answer: str, finish_reason: str | None, validator: Any, schemas: SchemaValidators
) -> list[Violation] | None:
    """Check the answer against the output schema; ``None`` when it could not be checked."""
    text = answer.strip()
    if not text:
        return None
    try:
        instance = _parse_answer(text)
    except ValueError as exc:
        if finish_reason == "length":
            return [Violation(ViolationKind.OUTPUT_TRUNCATED, "answer: truncated JSON (finish_reason=length)")]
        return [Violation(ViolationKind.OUTPUT_NOT_JSON, f"answer: not valid JSON ({exc})")]
    errors = _schema_errors(validator, instance)
    if errors is None:
        return None
    return [
        replace(found, kind=ViolationKind.OUTPUT_SCHEMA, parameter=None, message=f"answer: {found.message}")
        for found in _translate(errors, "property", schemas)
    ]


def _parse_answer(text: str) -> Any:
    """Parse ``text`` as JSON, or its first fenced block when the text itself is not JSON."""
    try:
        return _loads(text)
    except ValueError:
        fenced = JSON_FENCE.search(text)
        if fenced is None:
            raise
        return _loads(fenced.group(1))


def _loads(text: str) -> Any:
    """``json.loads`` whose only failure is a ValueError with a short reason."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise ValueError("nested too deeply") from None


def _check_tool_call(call: ToolCall, registry: Mapping[str, Any], schemas: SchemaValidators) -> list[Violation]:
    """Check one tool call against a non-empty registry."""
    if call.name not in registry:
        return [_unknown_tool(call.name, registry)]
    validator = registry[call.name]
    if validator is None or call.arguments is None:
        return []
    subject = f"tool {call.name!r}"
    try:
        arguments = _loads(call.arguments) if call.arguments.strip() else {}
        if not isinstance(arguments, dict):
            raise ValueError(f"got a JSON {_json_type(arguments)}")
    except ValueError as exc:
        return [
            Violation(
                ViolationKind.INVALID_ARGUMENTS_JSON,
                f"{subject}: arguments are not a JSON object ({exc})",
                tool=call.name,
                value=clip(call.arguments, _MAX_VALUE_CHARS),
            )
        ]
    return [
        replace(found, tool=call.name, message=f"{subject}: {found.message}")
        for found in _translate(_schema_errors(validator, arguments) or [], "parameter", schemas)
    ]


def _unknown_tool(name: str, registry: Mapping[str, Any]) -> Violation:
    """Report an unknown tool, suggesting the closest known name when one is close."""
    match = process.extractOne(
        name,
        registry.keys(),
        scorer=fuzz.ratio,
        processor=utils.default_process,
        score_cutoff=_SUGGESTION_MIN_SCORE,
    )
    suggestion = match[0] if match is not None else None
    if suggestion is not None:
        hint = f"did you mean {suggestion!r}?"
    else:
        known = sorted(registry)
        listed = known[:_MAX_KNOWN_TOOLS_LISTED] + (["..."] if len(known) > _MAX_KNOWN_TOOLS_LISTED else [])
        hint = "known: " + ", ".join(listed)
    return Violation(
        ViolationKind.UNKNOWN_TOOL, f"tool {name!r} is not defined ({hint})", tool=name, suggestion=suggestion
    )


def _schema_errors(validator: Any, instance: Any) -> list[ValidationError] | None:
    """Return the first validation errors, or ``None`` when the schema cannot be evaluated."""
    try:
        return list(islice(validator.iter_errors(instance), MAX_VIOLATIONS))
    except Exception:  # unresolvable $ref, invalid regex in "pattern", pathological nesting
        logger.debug("schema could not be evaluated", exc_info=True)
        return None


def _translate(errors: Iterable[ValidationError], noun: str, schemas: SchemaValidators) -> list[Violation]:
    """Turn jsonschema errors into violations whose message lacks only its subject.

    ``required`` and ``additionalProperties`` errors point at the enclosing object, so they
    are re-pointed at the missing or extra key itself, one violation per key.
    """
    found: list[Violation] = []
    for error in errors:
        location: list[str | int] = list(error.absolute_path)
        instance = error.instance
        if error.validator == "required" and isinstance(instance, dict):
            found += [
                _located(ViolationKind.MISSING_PARAMETER, [*location, key], f"missing required {noun} {key!r}")
                for key in error.validator_value
                if key not in instance
            ]
        elif error.validator == "additionalProperties" and isinstance(instance, dict):
            found += [
                _located(
                    ViolationKind.UNKNOWN_PARAMETER,
                    [*location, key],
                    f"unknown {noun} {key!r}",
                    instance[key],
                )
                for key in schemas.extra_keys(instance, error.schema)
            ]
        else:
            kind, detail = _describe(error)
            found.append(_located(kind, location, f"{_json_path(location)} {detail}", instance))
    # jsonschema yields one "required" error per missing key, and each was expanded to all of them.
    return list(dict.fromkeys(found))


def _located(kind: ViolationKind, location: list[str | int], message: str, *value: Any) -> Violation:
    """Build a violation at ``location``; its parameter is the top-level argument it sits under."""
    return Violation(
        kind,
        message,
        parameter=location[0] if location and isinstance(location[0], str) else None,
        path=_json_path(location),
        value=_render(value[0]) if value else None,
    )


def _describe(error: ValidationError) -> tuple[ViolationKind, str]:
    """Classify an error with a short detail; jsonschema's own message repeats the whole instance."""
    keyword, expected = error.validator, error.validator_value
    if keyword == "type":
        wanted = " or ".join(expected) if isinstance(expected, list) else str(expected)
        return ViolationKind.WRONG_TYPE, f"should be {wanted}, got {_json_type(error.instance)}"
    if keyword in _BOUND_PHRASES:
        return ViolationKind.OUT_OF_RANGE, f"= {_render(error.instance)} {_BOUND_PHRASES[keyword]} {expected}"
    if keyword in ("enum", "const"):
        allowed = expected if keyword == "enum" else [expected]
        return ViolationKind.NOT_IN_ENUM, f"= {_render(error.instance)} is not one of {_render(allowed)}"
    return ViolationKind.OTHER, f"violates {keyword!r}: {clip(error.message, _MAX_VALUE_CHARS)}"


def _json_path(location: Iterable[str | int]) -> str:
    parts = ["$"]
    for part in location:
        if isinstance(part, int):
            parts.append(f"[{part}]")
        elif _IDENTIFIER.fullmatch(part):
            parts.append(f".{part}")
        else:
            parts.append(f"[{json.dumps(part, ensure_ascii=False)}]")
    return "".join(parts)


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    return next((name for kind, name in _JSON_TYPES if isinstance(value, kind)), type(value).__name__)


def _render(value: Any) -> str:
    """Render a value as compact JSON text, truncated: safe to store whatever the model produced."""
    try:
        return clip(json.dumps(value, ensure_ascii=False, default=str, separators=(",", ":")), _MAX_VALUE_CHARS)
    except (ValueError, RecursionError):  # circular or too deep to show anyway
        return "…"


def render_evidence(evidence: Mapping[str, Any]) -> list[str]:
    """Its evidence as lines for people, in alerts."""
    messages = [message for message in map(_violation_line, shown.records(evidence.get("violations"))) if message]
    return messages[: shown.EVIDENCE_ITEMS] + shown.more(len(messages), shown.EVIDENCE_ITEMS, "violation(s)")


def _violation_line(violation: Mapping[str, Any]) -> str:
    """The violation's message, or (when the content mode withheld it) what and where it was."""
    message = shown.word(violation.get("message"))
    if message:
        return message
    where = [
        f"{name} {shown.word(violation.get(name))}" for name in ("tool", "path") if shown.word(violation.get(name))
    ]
    return " ".join([shown.word(violation.get("kind")), *where]).strip()


def build(ing: Ingredients) -> SchemaViolationDetector:
    """The detector, from its settings and threshold."""
    return SchemaViolationDetector(ing.config(DETECTOR), ing.threshold)
