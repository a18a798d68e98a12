"""Example traces for the demo, the tests and the benchmarks.

The spans are recorded with the real OpenTelemetry SDK and encoded with its OTLP
protobuf encoder, so they are exactly what a collector would put on Kafka.  Every
example is one row of :data:`EXAMPLES`; one writer per instrumentation convention
(SPEC §3) turns a row into span attributes, so each convention is written once and
the content is written once.  Rows carry their expected verdicts (``hallucinated``,
``schema_violation``) so tests and the demo can check the detectors against them.

:func:`mixed_traffic` clones SDK-recorded templates with fresh ids instead of running
the SDK per span: a benchmark needs ~100k spans in seconds.
"""

from __future__ import annotations

import json
import math
import random
import re
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from opentelemetry import trace
from opentelemetry._logs import Logger
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.logs.v1.logs_pb2 import LogsData
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span, TracesData
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

_MS = 1_000_000  # nanoseconds per millisecond


class Convention(StrEnum):
    """The attribute layouts of SPEC §3 the examples are written in."""

    GENAI = "genai"  # OpenTelemetry GenAI semantic conventions, current JSON-string form
    OPENLLMETRY = "openllmetry"  # Traceloop <= 0.52 flat gen_ai.prompt.N.* layout
    OPENINFERENCE = "openinference"  # Arize OpenInference
    SEED = "seed"  # the hand-written convention of seed 000 (llm.* span names)
    # openai-v2's default mode: a content-free GenAI span, the content in GenAI event log records
    GENAI_EVENTS = "genai-events"


@dataclass(frozen=True, slots=True)
class Example:
    """One example LLM request, its content, and what the detectors should say about it.

    ``sources`` are ``(document id, text)``; the prompt cites them as ``[1]``, ``[2]`` in
    order.  ``tool_calls`` are ``(tool name, raw JSON arguments)`` as the model produced
    them.  ``schema_violation`` says why a schema & tool-call detector must flag the call
    (``None``: it must not); ``hallucinated`` is the ground truth about the content.
    """

    name: str
    convention: Convention
    service: str
    question: str
    answer: str = ""
    sources: tuple[tuple[str, str], ...] = ()
    tools: tuple[str, ...] = ()
    tool_calls: tuple[tuple[str, str], ...] = ()
    operation: str = "chat"
    finish_reason: str = "stop"
    model: str = "gpt-4o-mini"
    # Mean probability of the sampled tokens; ``None``: the span carries no logprobs.
    confidence: float | None = None
    hallucinated: bool = False
    schema_violation: str | None = None


_TOOL_DEFINITIONS: dict[str, tuple[str, dict[str, Any]]] = {
    "search_docs": (
        "Search the product documentation and return the best matching passages.",
        {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What to search for."},
                "top_k": {"type": "integer", "minimum": 1, "maximum": 20},
            },
            "required": ["query"],
            "additionalProperties": False,
        },
    ),
    "create_ticket": (
        "Open a support ticket for the current customer.",
        {
            "type": "object",
            "properties": {
                "title": {"type": "string"},
                "priority": {"type": "string", "enum": ["low", "normal", "high"]},
                "customer_id": {"type": "integer"},
            },
            "required": ["title", "priority"],
            "additionalProperties": False,
        },
    ),
    "get_weather": (
        "Current weather for a city.",
        {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
            "additionalProperties": False,
        },
    ),
}

EXAMPLE_OUTPUT_SCHEMAS: dict[str, dict[str, Any]] = {
    "extract_order": {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "Order extracted from a customer email",
        "type": "object",
        "properties": {
            "sku": {"type": "string", "minLength": 3},
            "quantity": {"type": "integer", "minimum": 1},
            "currency": {"type": "string", "enum": ["EUR", "USD", "GBP"]},
            "ship_to": {"type": "string"},
        },
        "required": ["sku", "quantity", "currency", "ship_to"],
        "additionalProperties": False,
    },
}
"""Operation name -> JSON Schema (Draft 2020-12) of its structured output, for the demo config."""

_EIFFEL = (
    (
        "eiffel-1",
        "The Eiffel Tower was built between 1887 and 1889 as the entrance arch to the 1889 World's Fair in Paris.",
    ),
    (
        "eiffel-2",
        "The tower is 330 m tall including its antennas and was the tallest man-made "
        "structure in the world until 1930.",
    ),
)
_REFUNDS = (
    (
        "policy-12",
        "Customers can return unused items within 30 days of delivery for a full refund. "
        "Refunds are issued to the original payment method within 5 business days.",
    ),
)
_X200 = (
    (
        "x200-spec",
        "The Acme X200 headphones offer up to 12 hours of battery life with noise "
        "cancelling on and charge fully in 2 hours over USB-C.",
    ),
    ("x200-warranty", "All Acme audio products carry a 1-year limited warranty."),
)
_VACATION = (
    ("hr-leave-3", "Employees accrue 25 days of paid vacation per year, prorated in the first year."),
    (
        "hr-leave-4",
        "Up to 5 unused vacation days can be carried over to the next calendar year; "
        "other unused days expire and are not paid out.",
    ),
)
_ORDER_EMAIL = "Extract the order from this email: "

EXAMPLES: tuple[Example, ...] = (
    Example(
        "genai_rag_grounded",
        Convention.GENAI,
        "travel-guide",
        "When was the Eiffel Tower built and how tall is it?",
        "The Eiffel Tower was built between 1887 and 1889 for the World's Fair in Paris, "
        "and it is 330 m tall including its antennas [1][2].",
        sources=_EIFFEL,
    ),
    Example(
        "genai_rag_invented_facts",
        Convention.GENAI,
        "travel-guide",
        "How tall is the Eiffel Tower and when was it finished?",
        "The Eiffel Tower was completed in 1950 after a decade of construction and is 500 m "
        "tall, which makes it the tallest structure in Europe.",
        sources=_EIFFEL,
        hallucinated=True,
    ),
    Example(
        "genai_tool_valid",
        Convention.GENAI,
        "docs-assistant",
        "How do I rotate my API key?",
        tools=("search_docs", "create_ticket"),
        tool_calls=(("search_docs", '{"query": "rotate API key", "top_k": 5}'),),
        finish_reason="tool_calls",
    ),
    Example(
        "genai_tool_unknown_name",
        Convention.GENAI,
        "docs-assistant",
        "Find the docs about webhook retries.",
        tools=("search_docs", "create_ticket"),
        tool_calls=(("search_documents", '{"query": "webhook retries"}'),),
        finish_reason="tool_calls",
        hallucinated=True,
        schema_violation="unknown tool 'search_documents' (closest: search_docs)",
    ),
    Example(
        "openllmetry_rag_grounded",
        Convention.OPENLLMETRY,
        "support-bot",
        "Can I still return the headphones I got 3 weeks ago?",
        "Yes. Unused items can be returned within 30 days of delivery, so three weeks is within "
        "the window; the refund goes to your original payment method within 5 business days.",
        sources=_REFUNDS,
        model="gpt-4o",
    ),
    Example(
        "openllmetry_tool_missing_required",
        Convention.OPENLLMETRY,
        "support-bot",
        "What's the weather in Paris right now?",
        tools=("get_weather",),
        tool_calls=(("get_weather", '{"location": "Paris", "unit": "celsius"}'),),
        finish_reason="tool_calls",
        model="gpt-4o",
        hallucinated=True,
        schema_violation="get_weather: missing required 'city', unknown parameter 'location'",
    ),
    Example(
        "openllmetry_tool_not_in_enum",
        Convention.OPENLLMETRY,
        "support-bot",
        "Weather in Oslo, in kelvin please.",
        tools=("get_weather",),
        tool_calls=(("get_weather", '{"city": "Oslo", "unit": "kelvin"}'),),
        finish_reason="tool_calls",
        model="gpt-4o",
        hallucinated=True,
        schema_violation="get_weather: unit 'kelvin' not in enum [celsius, fahrenheit]",
    ),
    Example(
        "openinference_rag_invented_facts",
        Convention.OPENINFERENCE,
        "product-qa",
        "How long does the X200 battery last and what's the warranty?",
        "The Acme X200 lasts up to 30 hours on a charge with noise cancelling on, and it comes with a 5-year warranty.",
        sources=_X200,
        confidence=0.55,
        hallucinated=True,
    ),
    Example(
        "openinference_tool_valid",
        Convention.OPENINFERENCE,
        "product-qa",
        "The login page shows an error 500, please open a ticket, it's urgent.",
        tools=("search_docs", "create_ticket"),
        tool_calls=(("create_ticket", '{"title": "Login page returns HTTP 500", "priority": "high"}'),),
        finish_reason="tool_calls",
        confidence=0.97,
    ),
    Example(
        "openinference_tool_bad_arguments",
        Convention.OPENINFERENCE,
        "product-qa",
        "SSO with Okta is broken for our whole team, look it up and file a ticket.",
        tools=("search_docs", "create_ticket"),
        tool_calls=(
            ("search_docs", '{"query": "Okta SAML single sign-on", "top_k": 500}'),
            ("create_ticket", '{"title": "SSO broken for Okta users", "priority": "high", "customer_id": "ACME-4411"}'),
        ),
        finish_reason="tool_calls",
        hallucinated=True,
        schema_violation="search_docs: top_k 500 above maximum 20; "
        "create_ticket: customer_id 'ACME-4411' is not an integer",
    ),
    Example(
        "seed_rag_cited_grounded",
        Convention.SEED,
        "hr-assistant",
        "How many vacation days do I get and can I carry them over?",
        "You accrue 25 paid vacation days per year [1]. Up to 5 unused days can be carried "
        "over into the next calendar year [2].",
        sources=_VACATION,
        operation="answer_question",
        confidence=0.93,
    ),
    Example(
        "seed_rag_cited_invented",
        Convention.SEED,
        "hr-assistant",
        "Do unused vacation days get paid out?",
        "Unused vacation days are paid out at 150% of your daily salary every December [2]. "
        "You can also sell up to 10 days back to the company [3].",
        sources=_VACATION,
        operation="answer_question",
        confidence=0.48,
        hallucinated=True,
    ),
    Example(
        "seed_extract_valid",
        Convention.SEED,
        "order-intake",
        _ORDER_EMAIL + "'Hi, please send 3 boxes of A4 paper (SKU PAP-A4-500) to our Leeds office, invoice in GBP.'",
        '{"sku": "PAP-A4-500", "quantity": 3, "currency": "GBP", "ship_to": "Leeds office"}',
        operation="extract_order",
        confidence=0.96,
    ),
    Example(
        "seed_extract_schema_violation",
        Convention.SEED,
        "order-intake",
        _ORDER_EMAIL + "'Two HP 305 toner cartridges please, we pay in pounds.'",
        '{"sku": "TON-HP-305", "quantity": "two", "currency": "GBX"}',
        operation="extract_order",
        confidence=0.81,
        hallucinated=True,
        schema_violation="extract_order: quantity 'two' is not an integer, currency 'GBX' not in "
        "enum, missing required 'ship_to'",
    ),
    Example(
        "seed_extract_truncated",
        Convention.SEED,
        "order-intake",
        _ORDER_EMAIL + "'Twelve ergonomic chairs (CHR-ERG-01) to the Berlin office, "
        "Friedrichstrasse 68, 3rd floor, reception desk, billed in EUR.'",
        '{"sku": "CHR-ERG-01", "quantity": 12, "currency": "EUR", "ship_to": "Berlin office, Friedrichstra',
        operation="extract_order",
        finish_reason="length",
        confidence=0.9,
        hallucinated=True,
        schema_violation="extract_order: truncated JSON (finish_reason=length)",
    ),
)
"""The demo set: one row per trace, in the order :func:`example_traces` returns them."""

LOG_EVENT_EXAMPLES: tuple[Example, ...] = (
    Example(
        "genai_events_rag_invented_policy",
        Convention.GENAI_EVENTS,
        "hr-assistant",
        "Can I carry over my unused vacation days?",
        "Yes, you can carry over up to 15 unused vacation days [2]. Any other remaining days are "
        "paid out at 150% of your daily rate, as the compensation handbook explains [3].",
        sources=_VACATION,
        hallucinated=True,
    ),
)
"""Calls whose content travels only in log records (:func:`example_log_event_telemetry`)."""

_SCOPES = {
    Convention.GENAI: "opentelemetry.instrumentation.openai_v2",
    Convention.GENAI_EVENTS: "opentelemetry.instrumentation.openai_v2",
    Convention.OPENLLMETRY: "opentelemetry.instrumentation.openai.v1",
    Convention.OPENINFERENCE: "openinference.instrumentation.openai",
    Convention.SEED: "halluwatch.examples",
}
_SYSTEM_PROMPTS = {
    "rag": "Answer only from the numbered context. Cite sources as [n]. Say so when the context "
    "does not contain the answer.",
    "tools": "You are a support assistant. Call a tool when it helps; never invent tool results.",
    "extract_order": "Return the order as one JSON object with sku, quantity, currency and ship_to.",
}

Attributes = dict[str, Any]


def _system_prompt(example: Example) -> str:
    if example.operation in _SYSTEM_PROMPTS:
        return _SYSTEM_PROMPTS[example.operation]
    return _SYSTEM_PROMPTS["tools" if example.tools else "rag"]


def _user_prompt(example: Example) -> str:
    """Return the question with the context pasted in front, as most RAG apps do."""
    if not example.sources:
        return example.question
    context = "\n".join(f"[{n}] {text}" for n, (_, text) in enumerate(example.sources, 1))
    return f"Context:\n{context}\n\nQuestion: {example.question}"


def _tokens(text: str) -> int:
    """Estimate tokens (about 4/3 per word) for the usage attributes."""
    return max(1, len(text.split()) * 4 // 3)


def _token_logprobs(example: Example) -> list[dict[str, Any]]:
    """OpenAI-style ``logprobs.content`` for the answer, jittered around ``confidence``."""
    assert example.confidence is not None  # noqa: S101 - narrowing: callers pass examples with logprobs only
    rng = random.Random(example.name)  # noqa: S311 - reproducible demo jitter, not a secret
    positions = []
    for token in re.findall(r"\s*\S+", example.answer):
        p = min(0.999, max(0.05, example.confidence + rng.uniform(-0.08, 0.08)))
        top = [(token, p), (" the", (1 - p) * 0.7), (" a", (1 - p) * 0.2)]
        positions.append(
            {
                "token": token,
                "logprob": round(math.log(p), 4),
                "top_logprobs": [{"token": t, "logprob": round(math.log(q), 4)} for t, q in top],
            }
        )
    return positions


def _function_schema(name: str) -> dict[str, Any]:
    description, parameters = _TOOL_DEFINITIONS[name]
    return {"name": name, "description": description, "parameters": parameters}


def _openai_messages(example: Example) -> list[dict[str, str]]:
    return [{"role": "system", "content": _system_prompt(example)}, {"role": "user", "content": _user_prompt(example)}]


def _usage(example: Example) -> tuple[int, int]:
    prompt = _tokens(_system_prompt(example) + " " + _user_prompt(example))
    return prompt, _tokens(example.answer + " ".join(args for _, args in example.tool_calls))


# --- one writer per convention: (span name, span kind, attributes) of the LLM span ---------


def _genai_llm(example: Example) -> tuple[str, SpanKind, Attributes]:
    parts: list[dict[str, Any]] = [{"type": "text", "content": example.answer}] if example.answer else []
    parts += [
        {"type": "tool_call", "id": f"call_{i}", "name": name, "arguments": json.loads(arguments)}
        for i, (name, arguments) in enumerate(example.tool_calls)
    ]
    # The GenAI conventions spell the tool-call finish reason in the singular.
    finish = "tool_call" if example.finish_reason == "tool_calls" else example.finish_reason
    prompt_tokens, completion_tokens = _usage(example)
    attributes: Attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": example.model,
        "gen_ai.response.model": example.model,
        "gen_ai.response.id": f"chatcmpl-{example.name}",
        "gen_ai.response.finish_reasons": [finish],
        "gen_ai.usage.input_tokens": prompt_tokens,
        "gen_ai.usage.output_tokens": completion_tokens,
        "gen_ai.system_instructions": json.dumps([{"type": "text", "content": _system_prompt(example)}]),
        "gen_ai.input.messages": json.dumps(
            [{"role": "user", "parts": [{"type": "text", "content": _user_prompt(example)}]}]
        ),
        "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": parts, "finish_reason": finish}]),
    }
    if example.tools:
        attributes["gen_ai.tool.definitions"] = json.dumps(
            [{"type": "function", **_function_schema(name)} for name in example.tools]
        )
    return f"chat {example.model}", SpanKind.CLIENT, attributes


def _openllmetry_llm(example: Example) -> tuple[str, SpanKind, Attributes]:
    prompt_tokens, completion_tokens = _usage(example)
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
    for i, message in enumerate(_openai_messages(example)):
        attributes[f"gen_ai.prompt.{i}.role"] = message["role"]
        attributes[f"gen_ai.prompt.{i}.content"] = message["content"]
    if example.answer:
        attributes["gen_ai.completion.0.content"] = example.answer
    for j, (name, arguments) in enumerate(example.tool_calls):
        prefix = f"gen_ai.completion.0.tool_calls.{j}"
        attributes |= {f"{prefix}.id": f"call_{j}", f"{prefix}.name": name, f"{prefix}.arguments": arguments}
    for i, name in enumerate(example.tools):
        schema = _function_schema(name)
        attributes |= {
            f"llm.request.functions.{i}.name": name,
            f"llm.request.functions.{i}.description": schema["description"],
            f"llm.request.functions.{i}.parameters": json.dumps(schema["parameters"]),
        }
    return "openai.chat", SpanKind.CLIENT, attributes


def _openinference_llm(example: Example) -> tuple[str, SpanKind, Attributes]:
    tool_calls: list[dict[str, Any]] = [
        {"id": f"call_{j}", "type": "function", "function": {"name": name, "arguments": arguments}}
        for j, (name, arguments) in enumerate(example.tool_calls)
    ]
    tools = [{"type": "function", "function": _function_schema(name)} for name in example.tools]
    prompt_tokens, completion_tokens = _usage(example)
    choice: dict[str, Any] = {
        "index": 0,
        "message": {"role": "assistant", "content": example.answer or None, "tool_calls": tool_calls or None},
        "finish_reason": example.finish_reason,
        "logprobs": {"content": _token_logprobs(example)} if example.confidence is not None else None,
    }
    # OpenInference records the raw request and response; logprobs live only in the latter.
    request = {"model": example.model, "messages": _openai_messages(example), "temperature": 0.2}
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
    for i, message in enumerate(_openai_messages(example)):
        attributes[f"llm.input_messages.{i}.message.role"] = message["role"]
        attributes[f"llm.input_messages.{i}.message.content"] = message["content"]
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
    return "ChatCompletion", SpanKind.INTERNAL, attributes


def _seed_llm(example: Example) -> tuple[str, SpanKind, Attributes]:
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
        attributes["llm.response.tokens_json"] = json.dumps(_token_logprobs(example))
    return f"llm.{example.operation}", SpanKind.INTERNAL, attributes


_GENAI_CONTENT_ATTRIBUTES = (
    "gen_ai.system_instructions",
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.tool.definitions",
)


def _genai_events_llm(example: Example) -> tuple[str, SpanKind, Attributes]:
    """The GenAI span without its content, which :func:`_log_events` writes instead."""
    name, kind, attributes = _genai_llm(example)
    return name, kind, {key: value for key, value in attributes.items() if key not in _GENAI_CONTENT_ATTRIBUTES}


def _log_events(example: Example) -> list[tuple[str, dict[str, Any]]]:
    """(event name, body) of the records openai-v2 logs for a call in its default mode."""
    choice = {"role": "assistant", "content": example.answer}
    return [
        ("gen_ai.system.message", {"content": _system_prompt(example)}),
        ("gen_ai.user.message", {"content": _user_prompt(example)}),
        ("gen_ai.choice", {"index": 0, "finish_reason": example.finish_reason, "message": choice}),
    ]


_LLM_WRITERS = {
    Convention.GENAI: _genai_llm,
    Convention.GENAI_EVENTS: _genai_events_llm,
    Convention.OPENLLMETRY: _openllmetry_llm,
    Convention.OPENINFERENCE: _openinference_llm,
    Convention.SEED: _seed_llm,
}


def _retrieval(example: Example) -> tuple[str, SpanKind, Attributes]:
    """Describe the span that fetched the sources, in the layout of the example's convention."""
    if example.convention is Convention.GENAI:
        documents = [
            {"id": doc_id, "score": round(0.9 - 0.05 * i, 2), "content": text}
            for i, (doc_id, text) in enumerate(example.sources)
        ]
        return (
            "retrieval kb-articles",
            SpanKind.CLIENT,
            {
                "gen_ai.operation.name": "retrieval",
                "gen_ai.data_source.id": "kb-articles",
                "gen_ai.retrieval.query.text": example.question,
                "gen_ai.retrieval.documents": json.dumps(documents),
            },
        )
    if example.convention is Convention.OPENINFERENCE:
        attributes: Attributes = {"openinference.span.kind": "RETRIEVER", "input.value": example.question}
        for i, (doc_id, text) in enumerate(example.sources):
            prefix = f"retrieval.documents.{i}.document"
            attributes |= {
                f"{prefix}.id": doc_id,
                f"{prefix}.content": text,
                f"{prefix}.score": round(0.9 - 0.05 * i, 2),
            }
        return "retrieve", SpanKind.INTERNAL, attributes
    return (
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


def _route(example: Example) -> str:
    if example.operation == "extract_order":
        return "/v1/orders/extract"
    return "/v1/assistant/chat" if example.tools else "/v1/ask"


class _Recorder:
    """Records traces and logs with private SDK pipelines (the global providers are never set)."""

    def __init__(self) -> None:
        self._exporter = InMemorySpanExporter()
        self._log_exporter = InMemoryLogRecordExporter()  # type: ignore[no-untyped-call]
        self._providers: dict[str, tuple[TracerProvider, LoggerProvider]] = {}

    def _providers_of(self, service: str) -> tuple[TracerProvider, LoggerProvider]:
        if service not in self._providers:
            resource = Resource.create(
                {"service.name": service, "service.version": "1.4.2", "deployment.environment.name": "demo"}
            )
            tracer_provider = TracerProvider(resource=resource, shutdown_on_exit=False)
            tracer_provider.add_span_processor(SimpleSpanProcessor(self._exporter))
            logger_provider = LoggerProvider(resource=resource, shutdown_on_exit=False)
            logger_provider.add_log_record_processor(SimpleLogRecordProcessor(self._log_exporter))
            self._providers[service] = (tracer_provider, logger_provider)
        return self._providers[service]

    def tracer(self, service: str, scope: str) -> trace.Tracer:
        """Return a tracer of ``scope`` whose spans carry ``service`` as their resource."""
        return self._providers_of(service)[0].get_tracer(scope)

    def logger(self, service: str, scope: str) -> Logger:
        """Return a logger of ``scope`` whose records carry ``service`` as their resource."""
        return self._providers_of(service)[1].get_logger(scope)

    def collect_logs(self) -> LogsData:
        """Every log record since the last call, as one OTLP ``LogsData``."""
        request = encode_logs(self._log_exporter.get_finished_logs())
        self._log_exporter.clear()
        # ExportLogsServiceRequest and LogsData are wire-identical (field 1, ResourceLogs).
        logs = LogsData()
        logs.ParseFromString(request.SerializeToString())
        return logs

    def collect(self) -> TracesData:
        """Everything recorded since the last call, as one OTLP ``TracesData``."""
        request = encode_spans(self._exporter.get_finished_spans())
        self._exporter.clear()
        # ExportTraceServiceRequest and TracesData are wire-identical (field 1, ResourceSpans).
        traces = TracesData()
        traces.ParseFromString(request.SerializeToString())
        return traces


def _span(
    tracer: trace.Tracer,
    spec: tuple[str, SpanKind, Attributes],
    parent: trace.Span | None,
    start_ns: int,
    duration_ns: int,
) -> trace.Span:
    name, kind, attributes = spec
    context = trace.set_span_in_context(parent) if parent is not None else None
    span = tracer.start_span(name, context=context, kind=kind, attributes=attributes, start_time=start_ns)
    span.end(end_time=start_ns + duration_ns)
    return span


def _record_example(recorder: _Recorder, example: Example, start_ns: int) -> None:
    """Record one request: HTTP server root, the retrieval when there are sources, the LLM call."""
    web = recorder.tracer(example.service, "opentelemetry.instrumentation.fastapi")
    llm = recorder.tracer(example.service, _SCOPES[example.convention])
    llm_ms = 300 + 25 * _tokens(example.answer + " ".join(args for _, args in example.tool_calls))
    retrieval_ms = 35 if example.sources else 0
    root = web.start_span(
        f"POST {_route(example)}",
        kind=SpanKind.SERVER,
        start_time=start_ns,
        attributes={
            "http.request.method": "POST",
            "http.route": _route(example),
            "url.path": _route(example),
            "url.scheme": "https",
            "server.address": f"{example.service}.example.com",
            "http.response.status_code": 200,
        },
    )
    if example.sources:
        # GenAI and OpenInference retrievals come from the LLM framework's instrumentation,
        # the others are plain database queries.
        if example.convention in (Convention.GENAI, Convention.OPENINFERENCE):
            retriever = llm
        else:
            retriever = recorder.tracer(example.service, "opentelemetry.instrumentation.psycopg")
        _span(retriever, _retrieval(example), root, start_ns + 5 * _MS, 30 * _MS)
    llm_start_ns = start_ns + (10 + retrieval_ms) * _MS
    llm_span = _span(llm, _LLM_WRITERS[example.convention](example), root, llm_start_ns, llm_ms * _MS)
    if example.convention is Convention.GENAI_EVENTS:
        logger = recorder.logger(example.service, _SCOPES[example.convention])
        in_call = trace.set_span_in_context(llm_span)
        for name, body in _log_events(example):
            logger.emit(timestamp=llm_start_ns, context=in_call, event_name=name, body=body)
    root.end(end_time=start_ns + (20 + retrieval_ms + llm_ms) * _MS)


def _recorded(examples: Sequence[Example], start_ns: int, recorder: _Recorder | None = None) -> list[TracesData]:
    """One ``TracesData`` per example, a second apart from ``start_ns``."""
    recorder = recorder or _Recorder()
    traces = []
    for i, example in enumerate(examples):
        _record_example(recorder, example, start_ns + i * 1_000 * _MS)
        traces.append(recorder.collect())
    return traces


def example_traces() -> list[TracesData]:
    """Record the demo set: one ``TracesData`` per row of :data:`EXAMPLES`, a second apart, ending now."""
    return _recorded(EXAMPLES, time.time_ns() - len(EXAMPLES) * 1_000 * _MS)


def example_log_event_telemetry() -> tuple[list[TracesData], LogsData]:
    """Record :data:`LOG_EVENT_EXAMPLES`, ending now: one ``TracesData`` per row, and all their log records."""
    recorder = _Recorder()
    traces = _recorded(LOG_EVENT_EXAMPLES, time.time_ns() - len(LOG_EVENT_EXAMPLES) * 1_000 * _MS, recorder)
    return traces, recorder.collect_logs()


# --- mixed traffic for the benchmarks ---------------------------------------------------------

_INFRA_SPANS: tuple[tuple[str, SpanKind, Attributes, int], ...] = (
    (
        "SELECT shop.orders",
        SpanKind.CLIENT,
        {
            "db.system.name": "postgresql",
            "db.namespace": "shop",
            "db.collection.name": "orders",
            "db.operation.name": "SELECT",
            "db.query.text": "SELECT * FROM orders WHERE customer_id = $1",
            "server.address": "pg-primary.internal",
            "server.port": 5432,
        },
        4,
    ),
    (
        "GET",
        SpanKind.CLIENT,
        {
            "db.system.name": "redis",
            "db.namespace": "0",
            "db.operation.name": "GET",
            "db.query.text": "GET session:?",
            "server.address": "redis.internal",
            "server.port": 6379,
        },
        1,
    ),
    (
        "POST",
        SpanKind.CLIENT,
        {
            "http.request.method": "POST",
            "url.full": "https://payments.internal/v1/authorize",
            "http.response.status_code": 200,
            "server.address": "payments.internal",
            "server.port": 443,
        },
        45,
    ),
    (
        "orders publish",
        SpanKind.PRODUCER,
        {
            "messaging.system": "kafka",
            "messaging.destination.name": "orders",
            "messaging.operation.type": "send",
            "messaging.kafka.message.key": "customer-8812",
        },
        2,
    ),
    ("render order_detail.html", SpanKind.INTERNAL, {"code.function.name": "render_template"}, 6),
)


@dataclass(frozen=True, slots=True)
class _Template:
    """A recorded span with the envelope it needs, ready to be cloned with fresh ids."""

    resource_spans: ResourceSpans  # resource and schema url; its own spans are ignored
    scope_spans: ScopeSpans
    span: Span


def _templates(traces: TracesData) -> list[_Template]:
    return [_Template(rs, ss, span) for rs in traces.resource_spans for ss in rs.scope_spans for span in ss.spans]


def _infra_templates(start_ns: int) -> tuple[_Template, list[_Template]]:
    """Record an HTTP server root and one child of each infrastructure kind with the SDK."""
    recorder = _Recorder()
    tracer = recorder.tracer("shop-web", "opentelemetry.instrumentation.django")
    root = tracer.start_span(
        "GET /api/v1/orders/{order_id}",
        kind=SpanKind.SERVER,
        start_time=start_ns,
        attributes={
            "http.request.method": "GET",
            "http.route": "/api/v1/orders/{order_id}",
            "url.path": "/api/v1/orders/8812",
            "url.scheme": "https",
            "http.response.status_code": 200,
            "server.address": "shop.example.com",
            "client.address": "10.2.3.4",
            "user_agent.original": "Mozilla/5.0",
        },
    )
    for name, kind, attributes, duration_ms in _INFRA_SPANS:
        _span(tracer, (name, kind, attributes), root, start_ns + _MS, duration_ms * _MS)
    root.end(end_time=start_ns + 120 * _MS)
    templates = _templates(recorder.collect())
    roots = [t for t in templates if not t.span.parent_span_id]
    return roots[0], [t for t in templates if t.span.parent_span_id]


def _llm_templates(start_ns: int) -> list[_Template]:
    """Record the examples and keep their LLM spans (the spans the convention writers produced)."""
    llm_names = {_LLM_WRITERS[e.convention](e)[0] for e in EXAMPLES}
    return [t for traces in _recorded(EXAMPLES, start_ns) for t in _templates(traces) if t.span.name in llm_names]


def _envelope(out: TracesData, template: _Template) -> ScopeSpans:
    """Append the template's resource and scope to ``out``; return the scope to add spans to."""
    resource_spans = out.resource_spans.add()
    resource_spans.resource.CopyFrom(template.resource_spans.resource)
    resource_spans.schema_url = template.resource_spans.schema_url
    scope_spans: ScopeSpans = resource_spans.scope_spans.add()
    scope_spans.scope.CopyFrom(template.scope_spans.scope)
    scope_spans.schema_url = template.scope_spans.schema_url
    return scope_spans


def _stamp(span: Span, template: Span, ids: tuple[bytes, bytes, bytes], start_ns: int) -> None:
    """Make ``span`` a copy of ``template`` with (trace, span, parent) ids, moved to ``start_ns``."""
    span.CopyFrom(template)
    span.trace_id, span.span_id, span.parent_span_id = ids
    span.start_time_unix_nano = start_ns
    span.end_time_unix_nano = start_ns + template.end_time_unix_nano - template.start_time_unix_nano


def mixed_traffic(
    n_traces: int, spans_per_trace: int = 20, llm_spans_per_trace: int = 1, seed: int = 0
) -> Iterator[TracesData]:
    """Benchmark traffic: mostly HTTP/DB/cache spans, a few LLM spans from :data:`EXAMPLES`.

    Each trace is one ``TracesData`` with ``spans_per_trace`` spans under an HTTP server
    root, ``llm_spans_per_trace`` of them LLM spans; trace and span ids are random from
    ``seed`` (same seed, same ids), timestamps start now, 10 ms apart.  Templates are
    recorded with the SDK once and cloned per span, which is what makes it fast.
    """
    if n_traces < 0:
        raise ValueError(f"n_traces must be >= 0, got {n_traces}")
    if not 0 <= llm_spans_per_trace < spans_per_trace:
        raise ValueError(
            f"llm_spans_per_trace must be >= 0 and below spans_per_trace ({spans_per_trace}) "
            f"so every trace keeps its HTTP root span, got {llm_spans_per_trace}"
        )
    rng = random.Random(seed)  # noqa: S311 - reproducible benchmark traffic, not a secret
    base_ns = time.time_ns()
    root, children = _infra_templates(base_ns)
    llm_spans = _llm_templates(base_ns)
    infra_children = spans_per_trace - 1 - llm_spans_per_trace
    for i in range(n_traces):
        trace_start_ns = base_ns + i * 10 * _MS
        trace_id, root_id = rng.randbytes(16), rng.randbytes(8)
        out = TracesData()
        infra = _envelope(out, root)
        _stamp(infra.spans.add(), root.span, (trace_id, root_id, b""), trace_start_ns)
        for _ in range(infra_children):
            _stamp(
                infra.spans.add(),
                rng.choice(children).span,
                (trace_id, rng.randbytes(8), root_id),
                trace_start_ns + _MS + rng.randrange(50 * _MS),
            )
        for _ in range(llm_spans_per_trace):
            template = rng.choice(llm_spans)
            _stamp(
                _envelope(out, template).spans.add(),
                template.span,
                (trace_id, rng.randbytes(8), root_id),
                trace_start_ns + 2 * _MS,
            )
        yield out
