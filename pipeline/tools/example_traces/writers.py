"""One writer per instrumentation convention (docs/architecture.md): the spans and log records of an example's call.

Each convention's layout is written once here and the content once in examples.yaml, so
a new example shows up in every layout and a layout fix reaches every example.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, NamedTuple

from opentelemetry.trace import SpanKind

from pipeline.tools.example_traces.content import (
    answer_call_id,
    function_schema,
    openai_messages,
    system_prompt,
    token_logprobs,
    tool_call_id,
    usage,
    user_prompt,
)
from pipeline.tools.example_traces.examples import ConventionName, Example, ToolResult

Attributes = dict[str, Any]


class SpanSpec(NamedTuple):
    """A span to record: its name, kind and attributes, and the error it ended with (``None``: it did not)."""

    name: str
    kind: SpanKind
    attributes: Attributes
    error: str | None = None


SCOPES = {
    ConventionName.GENAI: "opentelemetry.instrumentation.openai_v2",
    ConventionName.GENAI_EVENTS: "opentelemetry.instrumentation.openai_v2",
    ConventionName.OPENLLMETRY: "opentelemetry.instrumentation.openai.v1",
    ConventionName.OPENINFERENCE: "openinference.instrumentation.openai",
    ConventionName.SEED: "halluwatch.examples",
}
"""ConventionName -> instrumentation scope of the library that writes it, for the LLM span's tracer."""


def _genai_input(example: Example) -> list[dict[str, Any]]:
    """The request's messages after the system prompt (kept apart), in GenAI parts form."""
    messages = []
    for message in openai_messages(example)[1:]:
        parts: list[dict[str, Any]] = [{"type": "text", "content": message["content"]}] if message["content"] else []
        parts += [
            {"type": "tool_call", "id": call["id"], "name": call["function"]["name"],
             "arguments": json.loads(call["function"]["arguments"])}
            for call in message.get("tool_calls", ())
        ]  # fmt: skip
        if message["role"] == "tool":
            parts = [{"type": "tool_call_response", "id": message["tool_call_id"], "response": message["content"]}]
        messages.append({"role": message["role"], "parts": parts})
    return messages


def _flat_input(prefix: str, call_fields: tuple[str, str, str], example: Example) -> Attributes:
    """The request's messages as indexed attributes.

    ``prefix`` (with ``{i}``) heads each message's keys; ``call_fields`` name a tool call's
    id, name and arguments under ``{prefix}.tool_calls.{j}``.
    """
    attributes: Attributes = {}
    for i, message in enumerate(openai_messages(example)):
        head = prefix.format(i=i)
        attributes[f"{head}.role"] = message["role"]
        if message["content"]:
            attributes[f"{head}.content"] = message["content"]
        if "tool_call_id" in message:
            attributes[f"{head}.tool_call_id"] = message["tool_call_id"]
        for j, call in enumerate(message.get("tool_calls", ())):
            values = (call["id"], call["function"]["name"], call["function"]["arguments"])
            attributes |= {
                f"{head}.tool_calls.{j}.{field}": value for field, value in zip(call_fields, values, strict=True)
            }
    return attributes


def _genai_llm(example: Example) -> SpanSpec:
    parts: list[dict[str, Any]] = [{"type": "text", "content": example.answer}] if example.answer else []
    parts += [
        {"type": "tool_call", "id": answer_call_id(i), "name": name, "arguments": json.loads(arguments)}
        for i, (name, arguments) in enumerate(example.tool_calls)
    ]
    # The GenAI conventions spell the tool-call finish reason in the singular.
    finish = "tool_call" if example.finish_reason == "tool_calls" else example.finish_reason
    prompt_tokens, completion_tokens = usage(example)
    attributes: Attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": example.model,
        "gen_ai.response.model": example.model,
        "gen_ai.response.id": f"chatcmpl-{example.name}",
        "gen_ai.response.finish_reasons": [finish],
        "gen_ai.usage.input_tokens": prompt_tokens,
        "gen_ai.usage.output_tokens": completion_tokens,
        "gen_ai.system_instructions": json.dumps([{"type": "text", "content": system_prompt(example)}]),
        "gen_ai.input.messages": json.dumps(_genai_input(example)),
        "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": parts, "finish_reason": finish}]),
    }
    if example.tools:
        attributes["gen_ai.tool.definitions"] = json.dumps(
            [{"type": "function", **function_schema(name)} for name in example.tools]
        )
    return SpanSpec(f"chat {example.model}", SpanKind.CLIENT, attributes)


def _openllmetry_llm(example: Example) -> SpanSpec:
    prompt_tokens, completion_tokens = usage(example)
    attributes: Attributes = {
        "llm.request.type": "chat",
        "gen_ai.system": "openai",
        "gen_ai.request.model": example.model,
        "gen_ai.response.model": example.model,
        "llm.is_streaming": False,
        "gen_ai.usage.prompt_tokens": prompt_tokens,
        "gen_ai.usage.completion_tokens": completion_tokens,
        "llm.usage.total_tokens": prompt_tokens + completion_tokens,
        "gen_ai.completion.0.role": "assistant",
        "gen_ai.completion.0.finish_reason": example.finish_reason,
    }
    attributes |= _flat_input("gen_ai.prompt.{i}", ("id", "name", "arguments"), example)
    if example.answer:
        attributes["gen_ai.completion.0.content"] = example.answer
    for j, (name, arguments) in enumerate(example.tool_calls):
        prefix = f"gen_ai.completion.0.tool_calls.{j}"
        attributes |= {f"{prefix}.id": answer_call_id(j), f"{prefix}.name": name, f"{prefix}.arguments": arguments}
    for i, name in enumerate(example.tools):
        schema = function_schema(name)
        attributes |= {
            f"llm.request.functions.{i}.name": name,
            f"llm.request.functions.{i}.description": schema["description"],
            f"llm.request.functions.{i}.parameters": json.dumps(schema["parameters"]),
        }
    return SpanSpec("openai.chat", SpanKind.CLIENT, attributes)


def _openinference_llm(example: Example) -> SpanSpec:
    tool_calls: list[dict[str, Any]] = [
        {"id": answer_call_id(j), "type": "function", "function": {"name": name, "arguments": arguments}}
        for j, (name, arguments) in enumerate(example.tool_calls)
    ]
    tools = [{"type": "function", "function": function_schema(name)} for name in example.tools]
    prompt_tokens, completion_tokens = usage(example)
    choice: dict[str, Any] = {
        "index": 0,
        "message": {"role": "assistant", "content": example.answer or None, "tool_calls": tool_calls or None},
        "finish_reason": example.finish_reason,
        "logprobs": {"content": token_logprobs(example)} if example.confidence is not None else None,
    }
    # OpenInference records the raw request and response; logprobs live only in the latter.
    request = {"model": example.model, "messages": openai_messages(example), "temperature": 0.2}
    if tools:
        request["tools"] = tools
    response = {
        "id": f"chatcmpl-{example.name}",
        "object": "chat.completion",
        "model": example.model,
        "choices": [choice],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }
    attributes: Attributes = {
        "openinference.span.kind": "LLM",
        "llm.system": "openai",
        "llm.provider": "openai",
        "llm.model_name": example.model,
        "llm.invocation_parameters": json.dumps({"model": example.model, "temperature": 0.2}),
        "input.value": json.dumps(request),
        "input.mime_type": "application/json",
        "output.value": json.dumps(response),
        "output.mime_type": "application/json",
        "llm.token_count.prompt": prompt_tokens,
        "llm.token_count.completion": completion_tokens,
        "llm.token_count.total": prompt_tokens + completion_tokens,
        "llm.output_messages.0.message.role": "assistant",
    }
    attributes |= _flat_input(
        "llm.input_messages.{i}.message",
        ("tool_call.id", "tool_call.function.name", "tool_call.function.arguments"),
        example,
    )
    if example.answer:
        attributes["llm.output_messages.0.message.content"] = example.answer
    for j, call in enumerate(tool_calls):
        prefix = f"llm.output_messages.0.message.tool_calls.{j}.tool_call"
        attributes |= {
            f"{prefix}.id": call["id"],
            f"{prefix}.function.name": call["function"]["name"],
            f"{prefix}.function.arguments": call["function"]["arguments"],
        }
    for i, tool in enumerate(tools):
        attributes[f"llm.tools.{i}.tool.json_schema"] = json.dumps(tool)
    return SpanSpec("ChatCompletion", SpanKind.INTERNAL, attributes)


def _seed_llm(example: Example) -> SpanSpec:
    attributes: Attributes = {
        "llm.operation": example.operation,
        "llm.model": example.model,
        # Not part of seed 000's layout; hand-instrumented apps record the prompt and the
        # standard finish reasons beside it, and truncation cannot be told apart without them.
        "llm.prompt": example.question,
        "gen_ai.response.finish_reasons": [example.finish_reason],
        "llm.response.content": example.answer,
    }
    if example.sources:
        attributes["rag.sources_json"] = json.dumps({str(n): text for n, (_, text) in enumerate(example.sources, 1)})
    if example.confidence is not None:
        attributes["llm.response.tokens_json"] = json.dumps(token_logprobs(example))
    return SpanSpec(f"llm.{example.operation}", SpanKind.INTERNAL, attributes)


_GENAI_CONTENT_ATTRIBUTES = (
    "gen_ai.system_instructions",
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.tool.definitions",
)


def _genai_events_llm(example: Example) -> SpanSpec:
    """The GenAI span without its content, which :func:`log_events` writes instead."""
    spec = _genai_llm(example)
    content_free = {key: value for key, value in spec.attributes.items() if key not in _GENAI_CONTENT_ATTRIBUTES}
    return spec._replace(attributes=content_free)


LLM_WRITERS: dict[ConventionName, Callable[[Example], SpanSpec]] = {
    ConventionName.GENAI: _genai_llm,
    ConventionName.GENAI_EVENTS: _genai_events_llm,
    ConventionName.OPENLLMETRY: _openllmetry_llm,
    ConventionName.OPENINFERENCE: _openinference_llm,
    ConventionName.SEED: _seed_llm,
}
"""ConventionName -> writer of the LLM span of an example's call."""


def log_events(example: Example) -> list[tuple[str, dict[str, Any]]]:
    """(event name, body) of the records openai-v2 logs for a call in its default mode."""
    choice = {"role": "assistant", "content": example.answer}
    return [
        ("gen_ai.system.message", {"content": system_prompt(example)}),
        ("gen_ai.user.message", {"content": user_prompt(example)}),
        ("gen_ai.choice", {"index": 0, "finish_reason": example.finish_reason, "message": choice}),
    ]


def tool_executions(example: Example) -> list[SpanSpec]:
    """The agent framework's ``execute_tool`` spans (GenAI conventions) for the tools run before the call."""
    return [_execute_tool(run, tool_call_id(example, i)) for i, run in enumerate(example.tool_results)]


def tool_call_executions(example: Example) -> list[SpanSpec]:
    """The ``execute_tool`` spans of the agent running the call's own tool calls, after it."""
    return [_execute_tool(run, answer_call_id(j)) for j, run in enumerate(example.tool_call_runs) if run is not None]


def _execute_tool(run: ToolResult, call_id: str) -> SpanSpec:
    return SpanSpec(
        f"execute_tool {run.name}",
        SpanKind.INTERNAL,
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": run.name,
            "gen_ai.tool.type": "function",
            "gen_ai.tool.call.id": call_id,
            "gen_ai.tool.call.arguments": run.arguments,
            "gen_ai.tool.call.result": run.result,
        }
        | ({"error.type": "tool_error"} if run.failed else {}),
        error=run.result if run.failed else None,
    )


def retrieval(example: Example) -> SpanSpec:
    """Describe the span that fetched the sources, in the layout of the example's convention."""
    if example.convention is ConventionName.GENAI:
        documents = [
            {"id": doc_id, "score": round(0.9 - 0.05 * i, 2), "content": text}
            for i, (doc_id, text) in enumerate(example.sources)
        ]
        return SpanSpec(
            "retrieval kb-articles",
            SpanKind.CLIENT,
            {
                "gen_ai.operation.name": "retrieval",
                "gen_ai.data_source.id": "kb-articles",
                "gen_ai.retrieval.query.text": example.question,
                "gen_ai.retrieval.documents": json.dumps(documents),
            },
        )
    if example.convention is ConventionName.OPENINFERENCE:
        attributes: Attributes = {"openinference.span.kind": "RETRIEVER", "input.value": example.question}
        for i, (doc_id, text) in enumerate(example.sources):
            prefix = f"retrieval.documents.{i}.document"
            attributes |= {
                f"{prefix}.id": doc_id,
                f"{prefix}.content": text,
                f"{prefix}.score": round(0.9 - 0.05 * i, 2),
            }
        return SpanSpec("retrieve", SpanKind.INTERNAL, attributes)
    return SpanSpec(
        "SELECT kb.chunks",
        SpanKind.CLIENT,
        {
            "db.system.name": "postgresql",
            "db.namespace": "kb",
            "db.collection.name": "chunks",
            "db.operation.name": "SELECT",
            "db.query.text": "SELECT id, body FROM chunks ORDER BY embedding <=> $1 LIMIT 5",
            "server.address": "pgvector.internal",
            "server.port": 5432,
        },
    )
