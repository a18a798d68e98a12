"""The one mapping engine every convention shares.

A convention is a declarative table of rows ``(attribute key, draft path, converter)``.
Keys are exact attribute names or patterns with index placeholders
(``gen_ai.prompt.{i}.role``); the path names where the converted value lands in a
*draft*, a plain nested dict, with ``{0}``, ``{1}`` standing for the placeholders' indexes
(``input_messages.{0}.role``).  :mod:`pipeline.ingest.conventions.records` turns a draft into
``LLMCall`` fields, so flat indexed layouts (OpenLLMetry, OpenInference) and JSON-valued
ones (GenAI) end in the same shape.

Precedence is first-writer-wins: exact rows in table order (so ``gen_ai.response.model``
listed before ``gen_ai.request.model`` wins), then pattern rows, then span events.  A
converter returns ``None`` for a value it cannot use, and the field is skipped; one that
returns a dict for a node fills the fields the node does not have yet.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from pipeline.ingest.conventions import values
from pipeline.ingest.otlp_traces import any_value

logger = logging.getLogger(__name__)

Converter = Callable[[Any], Any]
Row = tuple[str, str, Converter]
Draft = dict[str | int, Any]
_PLACEHOLDER = re.compile(r"\{\w+\}")


@dataclass(frozen=True, slots=True)
class SpanMarkers:
    """What detection may look at: the span name and the raw, unconverted marker attributes.

    Only attributes under the convention prefixes are collected, and a value is converted
    only when a convention asks for it, so rejecting a non-LLM span stays cheap.
    """

    name: str
    keys: Mapping[str, AnyValue]
    event_names: frozenset[str]

    def value(self, key: str) -> Any:
        """Convert one marker attribute's value; ``None`` when absent."""
        raw = self.keys.get(key)
        return None if raw is None else any_value(raw)

    def has_prefix(self, prefixes: tuple[str, ...]) -> bool:
        """Whether any marker attribute key starts with one of ``prefixes``."""
        return any(key.startswith(prefixes) for key in self.keys)


def _path(target: str) -> tuple[str | int, ...]:
    return tuple(int(part) if part.isdigit() else part for part in target.split("."))


class Convention:
    """A named mapping table, its detection predicate and the span events it reads."""

    def __init__(
        self,
        name: str,
        rows: Iterable[Row],
        claims: Callable[[SpanMarkers], bool],
        message_events: Mapping[str, tuple[str, str]] | None = None,
        attribute_events: frozenset[str] = frozenset(),
    ) -> None:
        """Compile ``rows``; ``message_events`` maps an event name to (draft list, role).

        ``attribute_events`` are events whose attributes use the same keys as the span
        (``gen_ai.client.inference.operation.details``) and go through the same rows.
        """
        self.name = name
        self.claims = claims
        self.message_events = dict(message_events or {})
        self.attribute_events = attribute_events
        self.event_names = frozenset(self.message_events) | attribute_events
        self._exact: list[tuple[str, tuple[str | int, ...], Converter]] = []
        self._patterns: list[tuple[str, re.Pattern[str], str, Converter]] = []
        for key, target, convert in rows:
            if "{" in key:
                regex = re.compile(r"(\d+)".join(re.escape(part) for part in _PLACEHOLDER.split(key)))
                self._patterns.append((key[: key.index("{")], regex, target, convert))
            else:
                self._exact.append((key, _path(target), convert))

    def extract(self, attrs: Mapping[str, Any], events: Iterable[tuple[str, Mapping[str, Any]]] = ()) -> Draft:
        """Apply the table to span attributes, then to the span events, into a new draft."""
        draft: Draft = {}
        self._apply(draft, attrs)
        event_messages: dict[str, Draft] = {}
        for name, event_attrs in events:
            if name in self.attribute_events:
                self._apply(draft, event_attrs)
            elif name in self.message_events:
                target, role = self.message_events[name]
                message = values.event_message(event_attrs, role)
                if message is not None:
                    node = event_messages.setdefault(target, {})
                    index = values.integer(event_attrs.get("index"))
                    if index is None or index in node:
                        index = max((key for key in node if isinstance(key, int)), default=-1) + 1
                    node[index] = message
        for target, messages in event_messages.items():
            draft.setdefault(target, messages)
        return draft

    def _apply(self, draft: Draft, attrs: Mapping[str, Any]) -> None:
        for key, path, convert in self._exact:
            if key in attrs:
                _put(draft, path, _convert(convert, key, attrs[key]))
        if not self._patterns:
            return
        for key, value in attrs.items():
            for prefix, regex, target, convert in self._patterns:
                if key.startswith(prefix) and (match := regex.fullmatch(key)):
                    _put(draft, _path(target.format(*match.groups())), _convert(convert, key, value))
                    break


def _convert(convert: Converter, key: str, value: Any) -> Any:
    try:
        return convert(value)
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError):
        # Converters are meant to return None on bad input; this is the safety net.
        logger.debug("skipping attribute %s: converter failed", key, exc_info=True)
        return None


def _put(draft: Draft, path: tuple[str | int, ...], value: Any) -> None:
    if value is None:
        return
    node = draft
    for part in path[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            return  # a whole-value attribute already filled this field
        node = child
    existing = node.setdefault(path[-1], value)
    if existing is not value and isinstance(existing, dict) and isinstance(value, dict):
        for key, item in value.items():  # a converter filling several fields of one node
            existing.setdefault(key, item)
