"""A scripted model behind three provider APIs, for recording real instrumentation libraries.

One local server answers OpenAI chat completions (``/v1/chat/completions``, also streamed)
and responses (``/v1/responses``), Anthropic
messages (``/v1/messages``) and Gemini ``generateContent`` (``/v1beta/models/M:generateContent``)
from one script, so every library plays the same five scenarios.  The scenario is the
user's question, found anywhere in the request; the reply depends only on the question,
the tools offered and whether a tool result (or a framework's retry prompt) already came
back in this turn:

- ``faithful``: a RAG question, answered with the context's own numbers;
- ``contradicted``: a RAG question, answered with numbers the context contradicts;
- ``failed_tool``: ``book_table`` is called, fails (no table at 19:30), the answer claims it is booked;
- ``undefined_tool``: ``order_taxi`` is called, a tool no request defines;
- ``wrong_type``: ``book_table`` is called with ``"people": "four"`` (the schema wants an integer).

Stdlib only (with :mod:`tests.servers`): the recording venv holds the libraries, not halluwatch.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tests.servers import Reply, Request, ScriptedServer

CONTEXT = (
    "The Eiffel Tower in Paris was completed in 1889. It is 330 metres tall and was the tallest "
    "man-made structure in the world for 41 years."
)
SYSTEM_PROMPT = f"Answer from this context only.\n\nContext:\n{CONTEXT}"
BOOKING_INSTRUCTIONS = "You are a restaurant concierge. Use the tools to act for the guest."

QUESTIONS = {
    "faithful": "When was the Eiffel Tower completed, and how tall is it?",
    "contradicted": "How tall is the Eiffel Tower, and when was it completed?",
    "failed_tool": "Book a table for two at 19:30 tonight.",
    "undefined_tool": "Order a taxi to the restaurant for 19:00.",
    "wrong_type": "Book a table for four at 20:00 tonight.",
}
FAITHFUL_ANSWER = "The Eiffel Tower was completed in 1889 and is 330 metres tall."
CONTRADICTED_ANSWER = "The Eiffel Tower was completed in 1925 and is 520 metres tall."
CLAIMED_SUCCESS = "Done! Your table for two at 19:30 is booked."
TAXI_REFUSED = "Sorry, I cannot order a taxi for you."
WRONG_TYPE_ANSWER = "Sorry, I could not book the table for four at 20:00."

BOOKING_ERROR = "no seats left at 19:30"
# What each scenario's model asks for first: (tool, arguments).
TOOL_REQUESTS: dict[str, tuple[str, dict[str, Any]]] = {
    "failed_tool": ("book_table", {"people": 2, "time": "19:30"}),
    "undefined_tool": ("order_taxi", {"pickup_time": "19:00"}),
    "wrong_type": ("book_table", {"people": "four", "time": "20:00"}),
}
FINAL_ANSWERS = {
    "faithful": FAITHFUL_ANSWER,
    "contradicted": CONTRADICTED_ANSWER,
    "failed_tool": CLAIMED_SUCCESS,
    "undefined_tool": TAXI_REFUSED,
    "wrong_type": WRONG_TYPE_ANSWER,
}
BOOK_TABLE_SCHEMA = {
    "type": "object",
    "properties": {"people": {"type": "integer"}, "time": {"type": "string"}},
    "required": ["people", "time"],
}
USAGE = (42, 7)  # input, output tokens of every reply
OPENAI_MODEL = "gpt-4o-mini-2024-07-18"
ANTHROPIC_MODEL = "claude-sonnet-4-5-20250929"
GEMINI_MODEL = "gemini-2.5-flash"


def book_table(people: int, time: str) -> dict[str, Any]:
    """Reserve a table at the restaurant."""
    if time == "19:30":
        return {"error": BOOKING_ERROR}
    return {"status": "confirmed", "people": people, "time": time}


@dataclass(frozen=True)
class Turn:
    """What the script looks at in a request, whatever the API."""

    text: str  # the whole request as JSON: the scenario's question is in it somewhere
    answered: bool  # a tool result (or a retry prompt) came back after the question
    tools: Sequence[str] = field(default_factory=tuple)


@dataclass(frozen=True)
class Answer:
    """The script's reply: text, or one tool call."""

    text: str | None = None
    tool: str | None = None
    arguments: Mapping[str, Any] = field(default_factory=dict)


def scenario(text: str) -> str:
    """The scenario whose question ``text`` holds."""
    return next((name for name, question in QUESTIONS.items() if question in text), "faithful")


def answer(turn: Turn) -> Answer:
    """The scripted reply to one request."""
    name = scenario(turn.text)
    if name in TOOL_REQUESTS and turn.tools and not turn.answered:
        tool, arguments = TOOL_REQUESTS[name]
        return Answer(tool=tool, arguments=arguments)
    return Answer(text=FINAL_ANSWERS[name])


# --- OpenAI chat completions ------------------------------------------------------------------


def _openai(body: Mapping[str, Any]) -> dict[str, Any]:
    messages = body.get("messages") or []
    turn = Turn(
        json.dumps(body),
        answered=any(m.get("role") in ("tool", "function") for m in messages),
        tools=[tool.get("function", tool).get("name") for tool in body.get("tools") or []],
    )
    reply = answer(turn)
    message: dict[str, Any] = {"role": "assistant", "content": reply.text, "refusal": None}
    if reply.tool:
        message["tool_calls"] = [
            {
                "id": f"call_{reply.tool}_1",
                "type": "function",
                "function": {"name": reply.tool, "arguments": json.dumps(reply.arguments)},
            }
        ]
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": 1_750_000_000,
        "model": OPENAI_MODEL,
        "choices": [
            {"index": 0, "message": message, "logprobs": None, "finish_reason": "tool_calls" if reply.tool else "stop"}
        ],
        "usage": {"prompt_tokens": USAGE[0], "completion_tokens": USAGE[1], "total_tokens": sum(USAGE)},
    }


def _openai_stream(completion: Mapping[str, Any]) -> str:
    """The same completion as server-sent chunks: the whole message, the finish reason, the usage."""
    choice = completion["choices"][0]
    delta = {key: value for key, value in choice["message"].items() if value is not None}
    if "tool_calls" in delta:
        delta["tool_calls"] = [{"index": i, **call} for i, call in enumerate(delta["tool_calls"])]
    base = {key: completion[key] for key in ("id", "created", "model")} | {"object": "chat.completion.chunk"}
    chunks = [
        base | {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
        base | {"choices": [{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}]},
        base | {"choices": [], "usage": completion["usage"]},
    ]
    return "".join(f"data: {json.dumps(chunk)}\n\n" for chunk in chunks) + "data: [DONE]\n\n"


def _openai_responses(body: Mapping[str, Any]) -> dict[str, Any]:
    """The Responses API (the OpenAI Agents SDK's default)."""
    items = body.get("input") if isinstance(body.get("input"), list) else []
    turn = Turn(
        json.dumps(body),
        answered=any(isinstance(item, Mapping) and item.get("type") == "function_call_output" for item in items),
        tools=[tool.get("name") for tool in body.get("tools") or [] if tool.get("type") == "function"],
    )
    reply = answer(turn)
    output: dict[str, Any] = (
        {
            "type": "function_call",
            "id": "fc_scripted",
            "call_id": f"call_{reply.tool}_1",
            "name": reply.tool,
            "arguments": json.dumps(reply.arguments),
            "status": "completed",
        }
        if reply.tool
        else {
            "type": "message",
            "id": "msg_scripted",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": reply.text, "annotations": []}],
        }
    )
    return {
        "id": "resp_scripted",
        "object": "response",
        "created_at": 1_750_000_000,
        "status": "completed",
        "model": OPENAI_MODEL,
        "output": [output],
        "instructions": body.get("instructions"),  # echoed, as OpenAI's API does
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": body.get("tools") or [],
        "usage": {
            "input_tokens": USAGE[0],
            "output_tokens": USAGE[1],
            "total_tokens": sum(USAGE),
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        },
    }


# --- Anthropic messages ---------------------------------------------------------------------------


def _anthropic(body: Mapping[str, Any]) -> dict[str, Any]:
    blocks = [
        block
        for message in body.get("messages") or []
        if isinstance(message.get("content"), list)
        for block in message["content"]
    ]
    turn = Turn(
        json.dumps(body),
        answered=any(isinstance(block, Mapping) and block.get("type") == "tool_result" for block in blocks),
        tools=[tool.get("name") for tool in body.get("tools") or []],
    )
    reply = answer(turn)
    content: list[dict[str, Any]] = (
        [{"type": "tool_use", "id": f"toolu_{reply.tool}_1", "name": reply.tool, "input": dict(reply.arguments)}]
        if reply.tool
        else [{"type": "text", "text": reply.text}]
    )
    return {
        "id": "msg_scripted",
        "type": "message",
        "role": "assistant",
        "model": ANTHROPIC_MODEL,
        "content": content,
        "stop_reason": "tool_use" if reply.tool else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": USAGE[0], "output_tokens": USAGE[1]},
    }


# --- Gemini generateContent -----------------------------------------------------------------------


def _gemini(body: Mapping[str, Any]) -> dict[str, Any]:
    parts = [part for content in body.get("contents") or [] for part in content.get("parts") or []]
    declarations = [
        declaration for tool in body.get("tools") or [] for declaration in tool.get("functionDeclarations") or []
    ]
    turn = Turn(
        json.dumps(body),
        answered=any("functionResponse" in part for part in parts),
        tools=[declaration.get("name") for declaration in declarations],
    )
    reply = answer(turn)
    part = {"functionCall": {"name": reply.tool, "args": dict(reply.arguments)}} if reply.tool else {"text": reply.text}
    return {
        "candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {
            "promptTokenCount": USAGE[0],
            "candidatesTokenCount": USAGE[1],
            "totalTokenCount": sum(USAGE),
        },
        "modelVersion": GEMINI_MODEL,
        "responseId": "scripted",
    }


_GEMINI_PATH = re.compile(r"/v1\w*/models/[^/:]+:generateContent")


def respond(request: Request) -> Reply:
    """Answer one request in its API's shape."""
    body = request.body if isinstance(request.body, dict) else {}
    path = request.path.split("?", 1)[0]
    if path.endswith("/chat/completions"):
        completion = _openai(body)
        if body.get("stream"):
            return Reply(200, {"Content-Type": "text/event-stream"}, _openai_stream(completion))
        return Reply(200, body=completion)
    if path.endswith("/responses"):
        return Reply(200, body=_openai_responses(body))
    if path.endswith("/messages"):
        return Reply(200, body=_anthropic(body))
    if _GEMINI_PATH.search(path):
        return Reply(200, body=_gemini(body))
    return Reply(404, body={"error": f"no scripted API at {path}"})


class ScriptedModelServer(ScriptedServer):
    """The three APIs on one local port; ``url`` is the base URL each client is pointed at."""

    def __init__(self) -> None:
        super().__init__(respond)

    def __enter__(self) -> ScriptedModelServer:
        super().__enter__()
        return self
