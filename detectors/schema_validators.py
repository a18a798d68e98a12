"""JSON Schema validators that are safe on untrusted schemas, for the schema & tool-call detector.

Spans carry the tool definitions the model saw, so a schema may come from anyone:

* Validators get an empty ``referencing`` registry: a span-supplied ``$ref`` to a URL must
  never make the worker fetch it (jsonschema would, by default).
* ``pattern`` and ``patternProperties`` are matched with RE2, in time linear in the text:
  ``^(a+)+$`` against 40 characters would hold Python's backtracking engine for hours.  A
  pattern RE2 cannot read (backreferences, lookarounds) matches nothing and checks nothing.
* A tool's top-level schema that lists ``properties`` and has no keyword that could admit
  more (``additionalProperties``, ``patternProperties``, composition, ``$ref``) rejects
  undeclared top-level arguments: the invented-parameter hallucination.
* A span-supplied schema that cannot be used (invalid, or combining ``patternProperties``
  with ``unevaluatedProperties``, which jsonschema matches with code outside our reach)
  gets no validator: "cannot check", never an error.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Iterator, Mapping
from typing import Any

import re2
from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import ValidationError
from referencing import Registry

logger = logging.getLogger(__name__)

_PATTERN_CACHE_SIZE = 512
_SPAN_SCHEMA_CACHE_SIZE = 512
_NO_REMOTE_REFS: Registry[Any] = Registry()
# Keywords that can admit top-level properties not listed in ``properties``.
_OPEN_KEYWORDS = frozenset(
    {
        "additionalProperties",
        "patternProperties",
        "unevaluatedProperties",
        "allOf",
        "anyOf",
        "oneOf",
        "if",
        "dependentSchemas",
        "$ref",
        "$dynamicRef",
    }
)
_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # an unreadable pattern is reported by us, not printed to stderr


class SchemaValidators:
    """Builds the validators; remembers compiled patterns and span schemas, which recur across calls."""

    def __init__(self) -> None:
        self._patterns = functools.lru_cache(maxsize=_PATTERN_CACHE_SIZE)(_re2)
        self._span_tools = functools.lru_cache(maxsize=_SPAN_SCHEMA_CACHE_SIZE)(self._span_tool_from_json)
        # The keywords that match regexes, as jsonschema has them, with RE2 instead of Python's re.
        self._validator_class = validators.extend(
            Draft202012Validator,
            {
                "pattern": self._pattern,
                "patternProperties": self._pattern_properties,
                "additionalProperties": self._additional_properties,
            },
        )

    def output(self, schema: Mapping[str, Any]) -> Any:
        """The validator of an answer's schema (from the config: already checked)."""
        return self._validator_class(schema, registry=_NO_REMOTE_REFS)

    def tool(self, parameters: Mapping[str, Any]) -> Any:
        """The validator of a configured tool's arguments, undeclared top-level ones rejected."""
        return self.output(_closed(parameters))

    def span_tool(self, parameters: Mapping[str, Any]) -> Any:
        """The validator of a span-supplied tool schema, or ``None`` when it is unusable.

        Cached by the schema's canonical JSON text: spans repeat the same few definitions.
        """
        try:
            key = json.dumps(parameters, sort_keys=True, default=_jsonable)
        except (TypeError, ValueError, RecursionError):
            return None
        if '"patternProperties"' in key and '"unevaluatedProperties"' in key:  # see the module docstring
            return None
        return self._span_tools(key)

    def extra_keys(self, instance: Mapping[str, Any], schema: Mapping[str, Any]) -> list[str]:
        """Keys neither declared nor matched by a pattern: what ``additionalProperties`` rejects."""
        declared = schema.get("properties", {})
        patterns = list(schema.get("patternProperties", {}))
        return [key for key in instance if key not in declared and not any(self._matches(p, key) for p in patterns)]

    def clear(self) -> None:
        """Forget the compiled patterns and span schemas."""
        self._patterns.cache_clear()
        self._span_tools.cache_clear()

    def _span_tool_from_json(self, schema_json: str) -> Any:
        try:
            schema = json.loads(schema_json)
            Draft202012Validator.check_schema(schema)
            return self.output(_closed(schema) if isinstance(schema, dict) else schema)
        except Exception:  # untrusted input: any failure means "cannot check arguments"
            logger.debug("unusable tool schema from a span: %.200s", schema_json)
            return None

    def _matches(self, pattern: Any, text: str) -> bool:
        compiled = self._patterns(pattern) if isinstance(pattern, str) else None
        return compiled is not None and compiled.search(text) is not None

    def _pattern(self, validator: Any, pattern: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
        readable = isinstance(pattern, str) and self._patterns(pattern) is not None
        if readable and validator.is_type(instance, "string") and not self._matches(pattern, instance):
            yield ValidationError(f"{instance!r} does not match {pattern!r}")

    def _pattern_properties(
        self, validator: Any, patterns: Any, instance: Any, schema: Any
    ) -> Iterator[ValidationError]:
        if validator.is_type(instance, "object"):
            for pattern, subschema in patterns.items():
                for key, value in instance.items():
                    if self._matches(pattern, key):
                        yield from validator.descend(value, subschema, path=key, schema_path=pattern)

    def _additional_properties(
        self, validator: Any, additional: Any, instance: Any, schema: Any
    ) -> Iterator[ValidationError]:
        if not validator.is_type(instance, "object"):
            return
        extras = self.extra_keys(instance, schema)
        if validator.is_type(additional, "object"):
            for extra in extras:
                yield from validator.descend(instance[extra], additional, path=extra)
        elif additional is False and extras:
            yield ValidationError(f"additional properties are not allowed ({', '.join(map(repr, extras))} unexpected)")


def _re2(pattern: str) -> Any:
    try:
        return re2.compile(pattern, _RE2_OPTIONS)
    except re2.error:
        logger.debug("pattern RE2 cannot read, not checked: %.200r", pattern)
        return None


def _closed(parameters: Mapping[str, Any]) -> Mapping[str, Any]:
    """Reject undeclared top-level arguments when the schema cannot admit them anyway."""
    if "properties" in parameters and not _OPEN_KEYWORDS.intersection(parameters):
        return {**parameters, "additionalProperties": False}
    return parameters


def _jsonable(value: object) -> object:
    """Serialize what ``json.dumps`` cannot: mappings that are not dicts (frozen views), else text."""
    return dict(value) if isinstance(value, Mapping) else str(value)
