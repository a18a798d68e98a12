"""What the other spans of a trace say about its LLM calls (docs/architecture.md, trace-level facts).

In RAG and agent apps the evidence for an answer often sits beside the LLM span, not on it:

- a **retriever span** holds the documents (OpenInference ``RETRIEVER`` spans with
  ``retrieval.documents.N.document.{id,content,score}``; GenAI ``retrieval`` operations with
  ``gen_ai.retrieval.documents``, a JSON list of ``{id, content|text, score}``);
- a **tool execution span** holds a tool run and how it ended (GenAI ``execute_tool``
  operations: ``gen_ai.tool.name``, ``gen_ai.tool.call.id``, ``gen_ai.tool.call.arguments`` and
  ``.result``; OpenInference ``TOOL`` spans: ``tool.name``, ``tool_call.id``, ``input.value``,
  ``output.value``; the Vercel AI SDK's ``ai.toolCall`` spans: ``ai.toolCall.{name,id,args,result}``),
  failed when its status is ERROR, it has ``error.type``, or its recorded result reads as a
  failure: a tool that returns ``{"error": ...}`` ends its span well (LlamaIndex even says
  ``is_error: false``).  Its arguments and result also go to the ``tool_runs`` table for the
  triage pages.

:func:`attach_trace_facts` gives each LLM call the facts of its own trace that precede it (or,
for tool runs, ran inside it):

- a call whose span has no structured sources gets the documents of the retriever spans that
  ended before it started, preferring those under the same parent span (the same chain run),
  and its own prompt context as one more source (``prompt``: the model saw that, not the
  raw documents); ``LLMCall.retriever_span_ids`` names the spans and ``llm_calls.sources_from``
  says ``trace``;
- every call gets a small summary of the tool spans that ended before it started or ran
  inside it (:class:`~detectors.llm_call.ToolSpan`), which the tool outcome detector reads:
  a library that runs the tool loop within one model call (Google GenAI's automatic function
  calling) records the tools as spans that start after the call did and end before it ends;
  their recorded results are then the call's sources too (its messages never show them), and
  ``LLMCall.retriever_span_ids`` names those tool spans as well.

Spans that travel in the same message are joined here; facts in other messages of the trace
meet their calls in the join (:mod:`pipeline.log_join.join`), which stores them as
:func:`fact_dict` and hands them back to :func:`attach_trace_facts` when it releases a call.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from opentelemetry.proto.trace.v1.trace_pb2 import Status

from detectors.llm_call import LLMCall, Source, ToolSpan
from detectors.tool_runs import failure_reason
from pipeline.ingest.otlp_traces import SpanContext, attributes

MAX_DOCUMENTS = 20  # per retriever span and per call; the call's content cap still applies after
MAX_DOCUMENT_CHARS = 20_000  # per document, so a fact held for other messages stays small
MAX_TOOL_SPANS = 20  # per call, the latest
MAX_TOOL_VALUE_CHARS = 4_000  # a tool run's arguments and result, each: a fact held for other messages stays small
PROMPT_SOURCE_ID = "prompt"  # the source holding a trace-grounded call's own prompt context
_MAX_ERROR_CHARS = 300
_VERCEL_TOOL_NAME = "ai.toolCall.name"
_MARKER_KEYS = frozenset({"gen_ai.operation.name", "openinference.span.kind", _VERCEL_TOOL_NAME})
# Where each convention records a tool run's name, call id and result (the first found wins).
_TOOL_NAME_KEYS = ("gen_ai.tool.name", "tool.name", _VERCEL_TOOL_NAME)
_TOOL_CALL_ID_KEYS = ("gen_ai.tool.call.id", "tool_call.id", "ai.toolCall.id")
_TOOL_RESULT_KEYS = ("gen_ai.tool.call.result", "output.value", "ai.toolCall.result")
_TOOL_ARGUMENTS_KEYS = ("gen_ai.tool.call.arguments", "input.value", "ai.toolCall.args")


@dataclass(frozen=True, slots=True)
class Retrieval:
    """A retriever span's documents and where it sits in the trace."""

    trace_id: str
    span_id: str
    parent_span_id: str | None
    end_time_unix_nano: int
    documents: tuple[Source, ...]


@dataclass(frozen=True, slots=True)
class ToolExecution:
    """A tool execution span of a trace: its summary for the calls, what it was called with and returned (capped)."""

    trace_id: str
    tool: ToolSpan
    arguments: str = ""
    result: str = ""


Fact = Retrieval | ToolExecution


def fact_dict(fact: Fact) -> dict[str, Any]:
    """A JSON-ready dict of ``fact`` (for the join's table); :func:`fact_from_dict` reads it back."""
    if isinstance(fact, Retrieval):
        documents = [{"id": d.id, "text": d.text, "score": d.score} for d in fact.documents]
        return {"retrieval": {**{k: getattr(fact, k) for k in Retrieval.__dataclass_fields__}, "documents": documents}}
    tool = {k: getattr(fact.tool, k) for k in ToolSpan.__dataclass_fields__}
    return {"tool": {"trace_id": fact.trace_id, **tool}, "arguments": fact.arguments, "result": fact.result}


def fact_from_dict(data: dict[str, Any]) -> Fact:
    """The fact :func:`fact_dict` wrote, also after a JSON round trip."""
    if "retrieval" in data:
        retrieval = data["retrieval"]
        documents = tuple(Source(**document) for document in retrieval["documents"])
        return Retrieval(**{**retrieval, "documents": documents})
    tool = dict(data["tool"])
    trace_id = tool.pop("trace_id")
    # .get: facts a join table held from before tool runs kept their values
    return ToolExecution(trace_id, ToolSpan(**tool), data.get("arguments", ""), data.get("result", ""))


def fact_span_id(fact: Fact) -> str:
    """The id of the span a fact came from."""
    return fact.span_id if isinstance(fact, Retrieval) else fact.tool.span_id


def span_fact(ctx: SpanContext) -> Fact | None:
    """The fact a non-LLM span holds, or ``None`` (most spans: looked at by two keys only)."""
    span = ctx.span
    if not any(kv.key in _MARKER_KEYS for kv in span.attributes):
        return None
    attrs = attributes(span.attributes)
    operation, kind = attrs.get("gen_ai.operation.name"), attrs.get("openinference.span.kind")
    if operation == "retrieval" or kind == "RETRIEVER":
        documents = _genai_documents(attrs) if operation == "retrieval" else _openinference_documents(attrs)
        if not documents:
            return None
        parent = span.parent_span_id.hex() or None
        return Retrieval(ctx.trace_id, span.span_id.hex(), parent, span.end_time_unix_nano, documents)
    if operation == "execute_tool" or kind == "TOOL" or _VERCEL_TOOL_NAME in attrs:
        name = _first(attrs, _TOOL_NAME_KEYS)
        if not isinstance(name, str) or not name:
            return None
        call_id = _first(attrs, _TOOL_CALL_ID_KEYS)
        result = _first(attrs, _TOOL_RESULT_KEYS)
        result = (_tool_output(result) or result) if isinstance(result, str) else ""
        error = _error_message(ctx, attrs) if _ended_in_error(ctx, attrs) else failure_reason(result)
        tool = ToolSpan(
            span_id=span.span_id.hex(),
            name=name,
            call_id=str(call_id) if call_id else None,
            failed=error is not None,
            error=error or "",
            end_time_unix_nano=span.end_time_unix_nano,
            start_time_unix_nano=span.start_time_unix_nano,
        )
        arguments = _first(attrs, _TOOL_ARGUMENTS_KEYS)
        return ToolExecution(ctx.trace_id, tool, _value_text(arguments), result[:MAX_DOCUMENT_CHARS])
    return None


def _first(attrs: dict[str, Any], keys: tuple[str, ...]) -> Any:
    return next((attrs[key] for key in keys if attrs.get(key)), None)


def _ended_in_error(ctx: SpanContext, attrs: dict[str, Any]) -> bool:
    return ctx.span.status.code == Status.STATUS_CODE_ERROR or "error.type" in attrs


def _tool_output(result: str) -> str | None:
    """What the tool returned, inside LlamaIndex's ``ToolOutput`` (``raw_output``, ``is_error``)."""
    if len(result) > MAX_DOCUMENT_CHARS or not result.startswith('{"blocks"'):
        return None
    try:
        output = json.loads(result)
    except ValueError:
        return None
    if not isinstance(output, dict) or "raw_output" not in output:
        return None
    if output.get("is_error") is True:
        return f"Error: {output.get('raw_output')}"
    raw = output["raw_output"]
    return raw if isinstance(raw, str) else json.dumps(raw, ensure_ascii=False, default=str)


def attach_trace_facts(calls: Sequence[LLMCall], facts: Iterable[Fact]) -> list[LLMCall]:
    """The calls, each with the retriever documents and tool spans of its trace that precede it or ran inside it."""
    retrievals: dict[str, list[Retrieval]] = {}
    tools: dict[str, list[ToolExecution]] = {}
    for fact in facts:
        if isinstance(fact, Retrieval):
            retrievals.setdefault(fact.trace_id, []).append(fact)
        else:
            tools.setdefault(fact.trace_id, []).append(fact)
    return [_with_facts(call, retrievals.get(call.trace_id, ()), tools.get(call.trace_id, ())) for call in calls]


def _with_facts(call: LLMCall, retrievals: Sequence[Retrieval], tools: Sequence[ToolExecution]) -> LLMCall:
    ran = sorted((tool for tool in tools if _ran_for(call, tool.tool)), key=lambda t: t.tool.end_time_unix_nano)
    changes: dict[str, Any] = {"tool_spans": tuple(t.tool for t in ran[-MAX_TOOL_SPANS:])} if ran else {}
    if not call.sources:
        earlier = [r for r in retrievals if r.end_time_unix_nano <= call.start_time_unix_nano]
        siblings = [r for r in earlier if r.parent_span_id == call.parent_span_id]
        chosen = sorted(siblings or earlier, key=lambda r: r.end_time_unix_nano)
        # A tool loop inside this very call (Google GenAI's automatic function calling) never shows
        # its results in the call's messages: the tool spans' results are the call's context.
        inside = [t for t in ran if t.result and t.tool.start_time_unix_nano >= call.start_time_unix_nano]
        results = tuple(Source(t.tool.call_id or t.tool.span_id, t.result) for t in inside)
        documents = (tuple(document for r in chosen for document in r.documents) + results)[:MAX_DOCUMENTS]
        if documents:
            # What the model was given stays evidence too (its system prompt, pasted context, the
            # question): the retrieved documents add to the prompt, they never take its place.
            # Tool results alone stand as they do in a call's messages: the question is no evidence.
            prompt = call.grounding_text if chosen else ""
            given = (Source(PROMPT_SOURCE_ID, prompt),) if prompt.strip() else ()
            span_ids = tuple(r.span_id for r in chosen) + tuple(t.tool.span_id for t in inside)
            changes |= {"sources": documents + given, "retriever_span_ids": span_ids}
    return replace(call, **changes) if changes else call


def _ran_for(call: LLMCall, tool: ToolSpan) -> bool:
    """Whether ``tool`` ran before ``call`` began or inside it (a tool loop within one model call)."""
    inside = (
        call.start_time_unix_nano <= tool.start_time_unix_nano and tool.end_time_unix_nano <= call.end_time_unix_nano
    )
    return tool.end_time_unix_nano <= call.start_time_unix_nano or inside


def _genai_documents(attrs: dict[str, Any]) -> tuple[Source, ...]:
    value = attrs.get("gen_ai.retrieval.documents")
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return ()
    if not isinstance(value, list):
        return ()
    documents = []
    for position, item in enumerate(value, start=1):
        if not isinstance(item, dict):
            continue
        text = item.get("content", item.get("text"))
        if isinstance(text, str) and text:
            documents.append(
                Source(str(item.get("id") or position), text[:MAX_DOCUMENT_CHARS], _score(item.get("score")))
            )
    return tuple(documents[:MAX_DOCUMENTS])


def _openinference_documents(attrs: dict[str, Any]) -> tuple[Source, ...]:
    documents = []
    for position in range(MAX_DOCUMENTS):  # indexes are dense in practice; stop at the first gap
        prefix = f"retrieval.documents.{position}.document"
        text = attrs.get(f"{prefix}.content")
        if not isinstance(text, str):
            break
        if text:
            document_id = str(attrs.get(f"{prefix}.id") or position + 1)
            documents.append(Source(document_id, text[:MAX_DOCUMENT_CHARS], _score(attrs.get(f"{prefix}.score"))))
    return tuple(documents)


def _score(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _value_text(value: Any) -> str:
    """A tool run's arguments or result as text (JSON for structured values), at most ``MAX_TOOL_VALUE_CHARS``."""
    if value is None:
        return ""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text[:MAX_TOOL_VALUE_CHARS]


def _error_message(ctx: SpanContext, attrs: dict[str, Any]) -> str:
    """The status message, else the recorded exception's, else ``error.type``."""
    message = ctx.span.status.message
    if not message:
        for event in ctx.span.events:
            if event.name == "exception":
                found = attributes(event.attributes).get("exception.message")
                message = found if isinstance(found, str) else ""
                break
    message = message or str(attrs.get("error.type") or "error")
    return message[:_MAX_ERROR_CHARS]
