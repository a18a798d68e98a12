"""Turning a convention draft (see :mod:`pipeline.ingest.conventions.engine`) into ``LLMCall`` fields.

A draft list is either a JSON-parsed list or a sparse ``{index: item}`` dict filled from
flat indexed attributes; both are read in index order.  Items that lack what a record
needs (a tool without a name, a token without a logprob) are dropped one by one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from detectors.llm_call import Message, Source, TokenLogprob, ToolCall, ToolDefinition, TopLogprob, Usage
from pipeline.ingest.conventions import values

# OpenAI's words for every convention: OpenLLMetry says ``tool_call``, Anthropic ``tool_use``,
# ``end_turn`` and ``max_tokens`` (Gemini ``MAX_TOKENS``); the Vercel AI SDK spells with dashes.
_FINISH_REASONS = {"tool_call": "tool_calls", "tool_use": "tool_calls", "end_turn": "stop", "max_tokens": "length"}


def build(draft: Mapping[str | int, Any]) -> dict[str, Any]:
    """Build the ``LLMCall`` keyword arguments a convention draft supplies."""
    inputs = _tool_result_messages(_items(draft.get("input_messages")))
    finish_reasons = draft.get("finish_reasons") or []
    usage = draft.get("usage")
    if not isinstance(usage, Mapping):
        usage = {}
    return {
        "model": _str(draft.get("model")),
        "provider": _str(draft.get("provider")),
        "operation": _str(draft.get("operation")),
        "system_instructions": _str(draft.get("system_instructions")),
        "input_messages": tuple(_message(item, "user", None) for item in inputs),
        "output_messages": tuple(
            _message(item, "assistant", finish_reasons[i] if i < len(finish_reasons) else None)
            for i, item in enumerate(_with_function_calls(_items(draft.get("output_messages")), draft))
        ),
        "sources": _sources(draft.get("sources")) + _tool_results(inputs),
        "tool_definitions": tuple(
            ToolDefinition(item["name"], item.get("description") or "", item.get("parameters"))
            for item in _items(draft.get("tool_definitions"))
            if isinstance(item.get("name"), str) and item["name"]
        ),
        "logprobs": tuple(token for item in _items(draft.get("logprobs")) if (token := _token(item))),
        "usage": Usage(values.integer(usage.get("input_tokens")), values.integer(usage.get("output_tokens"))),
    }


def normalize_finish_reason(reason: str | None) -> str | None:
    """Lowercase a finish reason and map convention spellings to the common one."""
    if not reason:
        return None
    reason = reason.lower().replace("-", "_")
    return _FINISH_REASONS.get(reason, reason)


def _items(node: Any) -> list[Mapping[str, Any]]:
    if isinstance(node, Mapping):
        node = [node[key] for key in sorted(key for key in node if isinstance(key, int))]
    return [item for item in node if isinstance(item, Mapping)] if isinstance(node, list) else []


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _texts(node: Any) -> list[str]:
    if isinstance(node, Mapping):
        node = [node[key] for key in sorted(key for key in node if isinstance(key, int))]
    return [item for item in node if isinstance(item, str)] if isinstance(node, list) else []


def _message(item: Mapping[str, Any], default_role: str, finish_reason: Any) -> Message:
    body = item.get("text")
    return Message(
        role=_str(item.get("role")) or default_role,
        text=body if isinstance(body, str) else "\n".join(_texts(item.get("parts"))),
        tool_calls=tuple(
            ToolCall(call["name"], values.text(call.get("arguments")), values.text(call.get("id")))
            for call in _items(item.get("tool_calls"))
            if isinstance(call.get("name"), str) and call["name"]
        ),
        tool_call_id=values.text(item.get("tool_call_id")),
        finish_reason=normalize_finish_reason(values.text(item.get("finish_reason")) or values.text(finish_reason)),
    )


def _with_function_calls(outputs: list[Mapping[str, Any]], draft: Mapping[str | int, Any]) -> list[Mapping[str, Any]]:
    """Output messages with the calls a convention recorded beside them (``function_calls.{i}``)."""
    calls = draft.get("function_calls")
    if not isinstance(calls, Mapping):
        return outputs
    merged = list(outputs)
    for index in sorted(key for key in calls if isinstance(key, int)):
        call = calls[index]
        if not isinstance(call, Mapping) or index > len(merged):  # indexes come from the span: never trust them
            continue
        if index == len(merged):
            merged.append({})
        if not _items(merged[index].get("tool_calls")):
            merged[index] = {**merged[index], "tool_calls": [call]}
    return merged


def _tool_result_messages(messages: list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Messages made only of tool results become one ``tool`` message per result.

    Anthropic's API, Gemini's and the libraries built on them (pydantic-ai, OpenLLMetry)
    send tool results back in a ``user`` message; read as the user speaking, it would start
    a new turn right after the tool calls it answers.
    """
    expanded: list[Mapping[str, Any]] = []
    for item in messages:
        results = _items(item.get("results"))
        if results and len(_texts(item.get("parts"))) == len(results) and not _items(item.get("tool_calls")):
            expanded += [
                {"role": "tool", "text": result["text"], "tool_call_id": result.get("id"), "results": [result]}
                for result in results
            ]
        else:
            expanded.append(item)
    return expanded


def _sources(node: Any) -> tuple[Source, ...]:
    return tuple(
        Source(
            _str(values.json_text(item.get("id"))) or str(position),
            item["text"],
            values.number(item.get("score")),
        )
        for position, item in enumerate(_items(node), start=1)
        if isinstance(item.get("text"), str)
    )


def _tool_results(messages: list[Mapping[str, Any]]) -> tuple[Source, ...]:
    """Tool results in the input are the RAG context of function calling (HaluGate)."""
    found: list[Source] = []
    for item in messages:
        results = _items(item.get("results"))
        if not results and item.get("role") == "tool":
            message = _message(item, "tool", None)
            results = [{"id": message.tool_call_id or item.get("name"), "text": message.text}]
        for result in results:
            if isinstance(result.get("text"), str) and result["text"]:
                found.append(Source(_str(result.get("id")) or f"tool-{len(found) + 1}", result["text"]))
    return tuple(found)


def _token(item: Mapping[str, Any]) -> TokenLogprob | None:
    token, logprob = item.get("token"), values.number(item.get("logprob"))
    if not isinstance(token, str) or logprob is None:
        return None
    top = (
        TopLogprob(alt["token"], alt_logprob)
        for alt in _items(item.get("top_logprobs"))
        if isinstance(alt.get("token"), str) and (alt_logprob := values.number(alt.get("logprob"))) is not None
    )
    return TokenLogprob(token, logprob, tuple(top))
