"""GenAI content carried by OpenTelemetry log records, merged into the span's ``LLMCall``.

Two record shapes (see :mod:`pipeline.ingest.otlp_logs`):

- deprecated per-message events (``gen_ai.system.message``, ``gen_ai.user.message``,
  ``gen_ai.assistant.message``, ``gen_ai.tool.message``, ``gen_ai.choice``) with the
  content in the *body* (``{content}``, ``{content, id}``, ``{tool_calls}``,
  ``{index, finish_reason, message: {role, content | tool_calls}}``) where the span-event
  form has it in attributes;
- ``gen_ai.client.inference.operation.details`` with ``gen_ai.input.messages`` and
  friends in attributes, structured or JSON strings, exactly as on a span.

Both go through the GenAI convention's own event handling, so a log record and the span
event it replaces are read by the same code.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from detectors.llm_call import ContentSource, LLMCall
from pipeline.ingest.conventions import values
from pipeline.ingest.conventions.gen_ai import DETAILS_EVENTS, GEN_AI, MESSAGE_EVENTS
from pipeline.ingest.conventions.records import build
from pipeline.ingest.otlp_logs import GenAIRecord

# The LLMCall fields log records can supply; everything else comes from the span.
CONTENT_FIELDS = ("system_instructions", "input_messages", "output_messages", "sources", "tool_definitions")
_DETAILS_EVENT = next(iter(DETAILS_EVENTS))


def is_complete(records: Iterable[GenAIRecord]) -> bool:
    """Whether the records hold a whole call: a details record has it all in one record.

    Deprecated events come one per message with no end marker, so they never are.
    """
    return any(record.event_name in DETAILS_EVENTS for record in records)


def log_content(records: Iterable[GenAIRecord]) -> dict[str, Any]:
    """The ``LLMCall`` content fields the records supply (empty values where none)."""
    # Emission order is message order; records may arrive shuffled across Kafka partitions.
    ordered = sorted(records, key=lambda record: record.time_unix_nano)
    draft = GEN_AI.extract({}, [_as_event(record) for record in ordered])
    fields = build(draft)
    return {name: fields[name] for name in CONTENT_FIELDS}


def merge_log_content(call: LLMCall, records: Iterable[GenAIRecord]) -> LLMCall:
    """``call`` with the content fields it lacks taken from its log records.

    The result says where its content came from: ``logs``, or ``absent`` when the records
    carried none either (content capture off still emits the events, empty).
    """
    found = {name: value for name, value in log_content(records).items() if value and not getattr(call, name)}
    merged = replace(call, **found)
    return replace(merged, content_source=ContentSource.LOGS if merged.has_content else ContentSource.ABSENT)


def _as_event(record: GenAIRecord) -> tuple[str, Mapping[str, Any]]:
    """The (event name, attributes) pair the GenAI convention reads span events as."""
    body = _body(record.body)
    if record.event_name in MESSAGE_EVENTS:
        return record.event_name, {**record.attributes, **body}
    # Details records, and unnamed records recognised by their gen_ai.* attributes.
    return _DETAILS_EVENT, {**body, **record.attributes}


def _body(body: Any) -> Mapping[str, Any]:
    parsed = values.json_object(body)
    if parsed is not None:
        return parsed
    # Some emitters log a message's text as the bare body.
    return {"content": body} if isinstance(body, str) and body else {}
