"""Tool facts detector (seed 003): tool calls for things that do not exist or are not allowed.

The schema & tool-call detector checks a call's *shape* against the tool's schema; this one
checks its *facts* against registries the operator declares (``detectors.tool_facts``,
:mod:`detectors.tool_registries`):

* **OpenAPI**: an HTTP-style tool's ``method`` and ``path`` (or full URL) must be an
  operation of the document, and its query parameters ones that operation declares; the
  closest real operation (or parameter) is the suggestion;
* **known values**: an argument (``customer_id``) must take a value the file lists; the
  closest listed value is the suggestion;
* **permissions**: the user of the call (``enduser.id`` / ``enduser.role`` span attributes)
  must be granted the tool; the tools they may call are listed.

Only the tool calls the model makes in this answer are checked.  Score 1.0 (severity 4) on
any finding, as a broken contract.  A registry that cannot be loaded never fails the
worker: the calls it covers are ``skipped`` with the reason, and it is tried again after
``refresh_seconds``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from functools import partial
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from rapidfuzz import fuzz, process, utils

from detectors.base import Detector, DetectorResult, checked_threshold
from detectors.llm_call import LLMCall, ToolCall
from detectors.schema_violation.detector import render_evidence as render_evidence  # the same violations shape
from detectors.spec import Ingredients
from detectors.tool_facts import DETECTOR, KnownValuesConfig, OpenAPIRegistryConfig, PermissionsConfig, ToolFactsConfig
from detectors.tool_registries import (
    OpenAPIDocument,
    Permissions,
    Refreshing,
    parse_openapi,
    query_known_values,
    read_known_values,
    read_location,
    read_permissions,
)

MAX_FINDINGS = 20
_SUGGESTION_MIN_SCORE = 60.0
_VALUE_CHARS = 200
_ALLOWED_LISTED = 5


@dataclass(frozen=True, slots=True)
class ToolFact:
    """One tool call that asks for something that does not exist or is not allowed."""

    kind: str  # unknown_endpoint, method_not_allowed, unknown_query_parameter, unknown_value, not_permitted
    message: str
    tool: str
    parameter: str | None = None
    value: str | None = None
    suggestion: str | None = None

    def to_evidence(self) -> dict[str, str]:
        """The JSON form stored with the result, absent fields left out."""
        return {key: value for key, value in asdict(self).items() if value is not None}


class ToolFactsDetector(Detector):
    """Checks tool-call arguments against the configured OpenAPI, known-value and permission registries."""

    name = "tool_facts"
    version = "1.0.0"

    def __init__(self, config: ToolFactsConfig, threshold: float) -> None:
        self._threshold = checked_threshold(threshold)
        every = config.refresh_seconds
        self._openapi = [
            (spec, Refreshing(f"openapi {spec.document}", partial(_openapi, spec, config.fetch_timeout_seconds), every))
            for spec in config.openapi
        ]
        self._known = [
            (
                spec,
                Refreshing(
                    f"known values {spec.source}", partial(_known_values, spec, config.fetch_timeout_seconds), every
                ),
            )
            for spec in config.known_values
        ]
        self._permissions = config.permissions and (
            config.permissions,
            Refreshing(
                f"permissions {config.permissions.file}", partial(read_permissions, config.permissions.file), every
            ),
        )

    def registries(self) -> dict[str, str]:
        """Load every registry now: its name and why it cannot be used (``""``: it loaded)."""
        held: list[Refreshing[Any]] = [registry for _, registry in self._openapi]
        held += [registry for _, registry in self._known]
        held += [self._permissions[1]] if self._permissions else []
        return {registry.name: registry.get()[1] for registry in held}

    def detect_batch(self, calls: Sequence[LLMCall]) -> list[DetectorResult]:
        """Check each call's tool calls; registries load (or reload) on the way, in this thread."""
        return [self._detect(call) for call in calls]

    def _detect(self, call: LLMCall) -> DetectorResult:
        tool_calls = call.output_tool_calls
        if not tool_calls:
            return self.skipped_result("no tool calls to check", self._threshold)
        findings: list[ToolFact] = []
        checked: list[str] = []
        unavailable: dict[str, str] = {}
        for tool_call in tool_calls:
            arguments = _arguments(tool_call)
            for registry, check in self._checks(tool_call.name, call):
                value, error = registry.get()
                if value is None:
                    unavailable[registry.name] = error
                    continue
                checked.append(registry.name)
                findings += check(value, tool_call, arguments)
        if not checked:
            if unavailable:
                reasons = "; ".join(f"{name}: {error}" for name, error in unavailable.items())
                return self.skipped_result(f"registries unavailable: {reasons}"[:500], self._threshold)
            return self.skipped_result("no registry covers these tools", self._threshold)
        evidence = {
            "violations": [finding.to_evidence() for finding in findings[:MAX_FINDINGS]],
            "violation_count": len(findings),
            "registries": sorted(set(checked)),
            "unavailable": unavailable,
        }
        more = f" (+{len(findings) - 1} more)" if len(findings) > 1 else ""
        summary = findings[0].message + more if findings else "every tool call names what exists and is allowed"
        return self.scored_result(
            1.0 if findings else 0.0, self._threshold, severity=4, summary=summary[:500], evidence=evidence
        )

    def _checks(self, tool: str, call: LLMCall) -> Iterable[tuple[Refreshing[Any], Any]]:
        """The registries that cover ``tool`` on this call, each with its check."""
        for api, document in self._openapi:
            if tool in api.tools:
                yield document, partial(_check_openapi, api)
        for listing, values in self._known:
            if tool in listing.tools:
                yield values, partial(_check_known, listing)
        if self._permissions:
            grants, permissions = self._permissions
            identity = _identity(call, grants)
            if identity:
                yield permissions, partial(_check_permission, identity)


def _known_values(spec: KnownValuesConfig, timeout: float) -> frozenset[str]:
    if spec.file is not None:
        return read_known_values(spec.file, spec.argument, spec.column)
    assert spec.clickhouse_dsn is not None and spec.query is not None  # noqa: S101 - the config's validator
    return query_known_values(spec.clickhouse_dsn.get_secret_value(), spec.query, timeout)


def _openapi(spec: OpenAPIRegistryConfig, timeout: float) -> OpenAPIDocument:
    return parse_openapi(read_location(spec.document, timeout), spec.document)


def _arguments(tool_call: ToolCall) -> dict[str, Any]:
    """The call's arguments as an object; anything else (the schema detector's business) as none."""
    try:
        arguments = json.loads(tool_call.arguments or "{}")
    except (ValueError, RecursionError):
        return {}
    return arguments if isinstance(arguments, dict) else {}


def _check_openapi(
    spec: OpenAPIRegistryConfig, document: OpenAPIDocument, call: ToolCall, arguments: Mapping[str, Any]
) -> list[ToolFact]:
    target = arguments.get(spec.path_argument)
    if not isinstance(target, str) or not target:
        return []
    method = str(arguments.get(spec.method_argument) or "GET").upper()
    parts = urlsplit(target)
    path = parts.path or "/"
    for base in document.base_paths:
        if path.startswith(base + "/"):
            path = path[len(base) :]
            break
    query = dict(parse_qsl(parts.query))
    given = arguments.get(spec.query_argument)
    query |= given if isinstance(given, dict) else {}
    request = f"{method} {path}"
    at_path = [operation for operation in document.operations if operation.pattern.fullmatch(path)]
    if not at_path:
        closest = _closest(request, [operation.label for operation in document.operations])
        return [
            ToolFact(
                "unknown_endpoint",
                f"tool {call.name!r}: no operation {request} in the API" + _hint(closest),
                call.name,
                spec.path_argument,
                _clip(target),
                closest,
            )
        ]
    operation = next((operation for operation in at_path if operation.method == method), None)
    if operation is None:
        allowed = ", ".join(sorted(operation.method for operation in at_path))
        return [
            ToolFact(
                "method_not_allowed",
                f"tool {call.name!r}: {request} is not allowed (allowed: {allowed})",
                call.name,
                spec.method_argument,
                method,
                f"{at_path[0].method} {at_path[0].template}",
            )
        ]
    facts = []
    for name in sorted(set(map(str, query)) - operation.query):
        closest = _closest(name, sorted(operation.query))
        message = f"tool {call.name!r}: {operation.label} has no query parameter {name!r}" + _hint(closest)
        facts.append(ToolFact("unknown_query_parameter", message, call.name, name, None, closest))
    return facts


def _check_known(
    spec: KnownValuesConfig, known: frozenset[str], call: ToolCall, arguments: Mapping[str, Any]
) -> list[ToolFact]:
    value = arguments.get(spec.argument)
    if value is None or isinstance(value, bool) or not isinstance(value, str | int | float):
        return []
    text = str(value)
    if text in known:
        return []
    closest = _closest(text, sorted(known))
    message = f"tool {call.name!r}: {spec.argument} {text!r} is not a known value" + _hint(closest)
    # The closest value stays in the message (content, as the content mode treats it): unlike an
    # operation or tool name, a customer id is the users' data, so not a structural suggestion.
    return [ToolFact("unknown_value", message, call.name, spec.argument, _clip(text))]


def _check_permission(
    identity: tuple[str, str], permissions: Permissions, call: ToolCall, arguments: Mapping[str, Any]
) -> list[ToolFact]:
    user, role = identity
    allowed = permissions.users.get(user, frozenset()) | permissions.roles.get(role, frozenset())
    if "*" in allowed or call.name in allowed:
        return []
    who = " ".join(part for part in (f"user {user}" if user else "", f"(role {role})" if role else "") if part)
    listed = sorted(allowed)[:_ALLOWED_LISTED]
    hint = f" (may call: {', '.join(listed)})" if listed else " (may call no tools)"
    return [
        ToolFact(
            "not_permitted",
            f"{who} may not call tool {call.name!r}{hint}",
            call.name,
            None,
            None,
            ", ".join(listed) or None,
        )
    ]


def _identity(call: LLMCall, spec: PermissionsConfig) -> tuple[str, str] | None:
    """(user, role) of the call from its span attributes; ``None`` when it carries neither."""
    user, role = call.attributes.get(spec.user_attribute), call.attributes.get(spec.role_attribute)
    identity = (str(user) if user else "", str(role) if role else "")
    return identity if any(identity) else None


def _closest(text: str, choices: Sequence[str]) -> str | None:
    match = process.extractOne(
        text, choices, scorer=fuzz.ratio, processor=utils.default_process, score_cutoff=_SUGGESTION_MIN_SCORE
    )
    return match[0] if match is not None else None


def _hint(closest: str | None) -> str:
    return f" (closest: {closest})" if closest else ""


def _clip(text: str) -> str:
    return text if len(text) <= _VALUE_CHARS else text[: _VALUE_CHARS - 1] + "…"


def build(ing: Ingredients) -> ToolFactsDetector:
    """The detector, from its settings and threshold."""
    return ToolFactsDetector(ing.config(DETECTOR), ing.threshold)
