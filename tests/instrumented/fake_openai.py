"""A tiny OpenAI-compatible chat-completions server on 127.0.0.1 (stdlib only).

Real instrumentation libraries wrap the real ``openai`` client; pointing the client at
this server makes them record real attribute layouts without any network access.  The
reply depends on the request: ``tools`` gets a call of the first tool offered, ``logprobs`` gets
per-token logprobs, a conversation ending in a failed tool result gets an over-eager claim
that the action succeeded, anything else a plain text answer.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL = "gpt-4o-mini-2024-07-18"
ANSWER = "The Eiffel Tower was completed in 1889 [1]."
CLAIMED_SUCCESS = "Done! Your table for two at 19:30 is booked."
TOOL_CALL_ID = "call_abc123"
TOOL_ARGUMENTS = '{"city": "Paris", "unit": "celsius"}'
# The arguments the model "chooses" for each tool it may be offered first.
ARGUMENTS_BY_TOOL = {"get_weather": TOOL_ARGUMENTS, "book_table": '{"people": 2, "time": "19:30"}'}
LOGPROB_TOKENS = [
    ("Paris", -0.01, [("Paris", -0.01), ("Lyon", -4.6)]),
    (".", -0.2, [(".", -0.2), ("!", -1.7)]),
]


def _logprobs() -> dict[str, Any]:
    return {
        "content": [
            {
                "token": token,
                "logprob": logprob,
                "bytes": list(token.encode()),
                "top_logprobs": [{"token": t, "logprob": lp, "bytes": list(t.encode())} for t, lp in top],
            }
            for token, logprob, top in LOGPROB_TOKENS
        ],
        "refusal": None,
    }


def completion(request: dict[str, Any]) -> dict[str, Any]:
    """The chat-completion body answering ``request``."""
    message: dict[str, Any] = {"role": "assistant", "content": ANSWER, "refusal": None}
    finish_reason = "stop"
    logprobs = None
    if request.get("tools"):
        name = request["tools"][0]["function"]["name"]
        message = {
            "role": "assistant",
            "content": None,
            "refusal": None,
            "tool_calls": [
                {
                    "id": TOOL_CALL_ID,
                    "type": "function",
                    "function": {"name": name, "arguments": ARGUMENTS_BY_TOOL.get(name, "{}")},
                }
            ],
        }
        finish_reason = "tool_calls"
    elif _ends_in_failed_tool(request.get("messages") or []):
        message["content"] = CLAIMED_SUCCESS
    elif request.get("logprobs"):
        message["content"] = "".join(token for token, _, _ in LOGPROB_TOKENS)
        logprobs = _logprobs()
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 1_750_000_000,
        "model": MODEL,
        "system_fingerprint": "fp_test",
        "choices": [{"index": 0, "message": message, "logprobs": logprobs, "finish_reason": finish_reason}],
        "usage": {"prompt_tokens": 42, "completion_tokens": 7, "total_tokens": 49},
    }


def _ends_in_failed_tool(messages: list[dict[str, Any]]) -> bool:
    last = messages[-1] if messages else {}
    return last.get("role") == "tool" and '"error"' in str(last.get("content"))


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        request = json.loads(self.rfile.read(length) or b"{}")
        body = json.dumps(completion(request)).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        """Keep test output quiet."""


def start() -> ThreadingHTTPServer:
    """Serve on a free port in a daemon thread; ``server.server_address`` tells where."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server
