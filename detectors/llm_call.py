"""The normalized, convention-independent view of one LLM span (docs/architecture.md).

Every instrumentation convention is mapped onto these frozen records, so detectors,
storage and alerting never look at raw span attributes again.  Records are immutable
on purpose: they cross thread boundaries into the detector pool.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A function call the model asked for; ``arguments`` is the raw JSON text it produced."""

    name: str
    arguments: str | None = None
    id: str | None = None


@dataclass(frozen=True, slots=True)
class Message:
    """One chat message: input (system/user/assistant/tool) or an output choice."""

    role: str
    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    # Output messages only; normalized (``tool_calls``, ``stop``, ``length``, ...).
    finish_reason: str | None = None


@dataclass(frozen=True, slots=True)
class Source:
    """A piece of grounding context: a retrieved document or a tool result."""

    id: str
    text: str
    score: float | None = None


@dataclass(frozen=True, slots=True)
class ToolSpan:
    """A tool execution span of the same trace that ran before the call or inside its tool loop.

    A small summary, never the result: ``failed`` when the span ended in error or its recorded
    result reads as a failure; ``error`` then says why (the status message, the exception's,
    or a quote of the result).  ``start_time_unix_nano`` is 0 for spans summarized before it
    was recorded.
    """

    span_id: str
    name: str
    call_id: str | None = None
    failed: bool = False
    error: str = ""
    end_time_unix_nano: int = 0
    start_time_unix_nano: int = 0


@dataclass(frozen=True, slots=True)
class ToolDefinition:
    """A tool the application offered the model; ``parameters`` is a JSON Schema."""

    name: str
    description: str = ""
    parameters: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class TopLogprob:
    """One alternative token at a position, with its log probability."""

    token: str
    logprob: float


@dataclass(frozen=True, slots=True)
class TokenLogprob:
    """The sampled token at one output position, and the top alternatives."""

    token: str
    logprob: float
    top: tuple[TopLogprob, ...] = ()


@dataclass(frozen=True, slots=True)
class Usage:
    """Token usage as reported by the instrumentation (``None`` when absent)."""

    input_tokens: int | None = None
    output_tokens: int | None = None


class ContentSource(StrEnum):
    """Where an LLM call's content (messages, instructions, tool definitions) came from."""

    SPAN = "span"  # the span's own attributes and events
    LOGS = "logs"  # OpenTelemetry log records joined to the span (pipeline/log_join/join.py)
    # A content-free span whose log records never came: only content-free checks can judge it.
    ABSENT = "absent"


@dataclass(frozen=True, slots=True)
class LLMCall:
    """One LLM span, normalized.

    Ids are lowercase hex (32 chars for traces, 16 for spans), as every trace UI shows them.
    ``attributes`` keeps the raw span and resource attributes needed for routing
    (risk/domain rules); content-heavy attributes are not copied into it.
    """

    trace_id: str
    span_id: str
    parent_span_id: str | None
    service: str
    span_name: str
    start_time_unix_nano: int
    end_time_unix_nano: int
    convention: str
    model: str = ""
    provider: str = ""
    operation: str = ""
    system_instructions: str = ""
    input_messages: tuple[Message, ...] = ()
    output_messages: tuple[Message, ...] = ()
    sources: tuple[Source, ...] = ()
    tool_definitions: tuple[ToolDefinition, ...] = ()
    logprobs: tuple[TokenLogprob, ...] = ()
    usage: Usage = field(default_factory=Usage)
    attributes: Mapping[str, Any] = field(default_factory=dict)
    content_source: ContentSource = ContentSource.SPAN
    # Fields cut to the per-call content cap (pipeline/config/content_policy.py), named in every finding's evidence.
    truncated: tuple[str, ...] = ()
    # Other spans of the trace (pipeline/ingest/trace_facts.py): the retriever spans whose
    # documents became ``sources`` (the call's own span had none), and the tool runs before it.
    retriever_span_ids: tuple[str, ...] = ()
    tool_spans: tuple[ToolSpan, ...] = ()

    @property
    def sources_from(self) -> str:
        """Where the grounding text comes from: ``span``, ``trace`` (retriever spans) or ``prompt``."""
        if self.retriever_span_ids:
            return "trace"
        return "span" if self.sources else "prompt"

    @property
    def has_content(self) -> bool:
        """Whether any prompt, instruction or answer (text or tool call) was captured."""
        return bool(self.system_instructions) or any(
            message.text or message.tool_calls for message in (*self.input_messages, *self.output_messages)
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (for state tables); :meth:`from_dict` reads it back."""
        # By hand: dataclasses.asdict deep-copies every value, 10x slower on this hot path.
        return {
            **_fields(self),
            "input_messages": [_message_dict(message) for message in self.input_messages],
            "output_messages": [_message_dict(message) for message in self.output_messages],
            "sources": [_fields(source) for source in self.sources],
            "tool_definitions": [_fields(tool) for tool in self.tool_definitions],
            "logprobs": [{**_fields(t), "top": [_fields(top) for top in t.top]} for t in self.logprobs],
            "usage": _fields(self.usage),
            "attributes": dict(self.attributes),
            "content_source": str(self.content_source),
            "tool_spans": [_fields(tool) for tool in self.tool_spans],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LLMCall:
        """The call :meth:`to_dict` wrote, also after a JSON round trip (lists for tuples)."""
        return cls(
            **{
                **data,
                "input_messages": tuple(_message(m) for m in data["input_messages"]),
                "output_messages": tuple(_message(m) for m in data["output_messages"]),
                "sources": tuple(Source(**source) for source in data["sources"]),
                "tool_definitions": tuple(ToolDefinition(**tool) for tool in data["tool_definitions"]),
                "logprobs": tuple(
                    TokenLogprob(t["token"], t["logprob"], tuple(TopLogprob(**top) for top in t["top"]))
                    for t in data["logprobs"]
                ),
                "usage": Usage(**data["usage"]),
                "content_source": ContentSource(data["content_source"]),
                "truncated": tuple(data.get("truncated", ())),
                # .get: calls written to a join table before these fields existed
                "retriever_span_ids": tuple(data.get("retriever_span_ids", ())),
                "tool_spans": tuple(ToolSpan(**tool) for tool in data.get("tool_spans", ())),
            }
        )

    @property
    def answer(self) -> str:
        """The text the user saw: the first output choice (multi-choice calls are rare)."""
        return self.output_messages[0].text if self.output_messages else ""

    @property
    def finish_reason(self) -> str | None:
        """Finish reason of the first output choice."""
        return self.output_messages[0].finish_reason if self.output_messages else None

    @property
    def output_tool_calls(self) -> tuple[ToolCall, ...]:
        """Tool calls the model made in its answer, over all output choices."""
        return tuple(call for message in self.output_messages for call in message.tool_calls)

    @property
    def prompt(self) -> str:
        """The last user message: the question the answer should address."""
        for message in reversed(self.input_messages):
            if message.role == "user":
                return message.text
        return ""

    @property
    def grounding_text(self) -> str:
        """Context the answer must be grounded in.

        Structured sources (retrieved documents, tool results) when the span has any;
        otherwise the prompt context itself (system instructions and user turns), since
        many RAG apps paste their documents straight into the prompt.
        """
        if self.sources:
            return "\n\n".join(source.text for source in self.sources)
        prompt_parts = [self.system_instructions] if self.system_instructions else []
        prompt_parts += [m.text for m in self.input_messages if m.role in ("system", "user") and m.text]
        return "\n\n".join(prompt_parts)


def _fields(record: Any) -> dict[str, Any]:
    return {name: getattr(record, name) for name in record.__dataclass_fields__}


def _message_dict(message: Message) -> dict[str, Any]:
    return {**_fields(message), "tool_calls": [_fields(call) for call in message.tool_calls]}


def _message(data: Mapping[str, Any]) -> Message:
    return Message(**{**data, "tool_calls": tuple(ToolCall(**call) for call in data["tool_calls"])})
