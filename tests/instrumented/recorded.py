"""The committed recordings of agent frameworks and provider SDKs (``make record-instrumentations``).

One folder per setup under ``recordings/``: ``spans.bin``, ``logs.bin`` when the library logs
content, ``versions.json``; each holds the five scenarios of :mod:`tests.instrumented.scripted_model`.
"""

from __future__ import annotations

from pathlib import Path

RECORDINGS = Path(__file__).with_name("recordings")
# Model calls per scenario: RAG answers take one; an agent asks for a tool, then answers.
AGENT_CALLS = {"failed_tool": 2, "undefined_tool": 2, "wrong_type": 2}
EXPECTED_CALLS: dict[str, dict[str, int]] = {
    "pydantic_ai": AGENT_CALLS,
    "llama_index": AGENT_CALLS,
    # The Agents SDK raises ModelBehaviorError on an undefined tool: no second call.
    "openai_agents": AGENT_CALLS | {"undefined_tool": 1},
    "anthropic_openinference": AGENT_CALLS,
    "anthropic_openllmetry": AGENT_CALLS,
    # Automatic function calling: one span for the whole tool loop.
    "google_genai_auto": {"failed_tool": 1, "undefined_tool": 1, "wrong_type": 1},
    "google_genai_manual": AGENT_CALLS,
    "litellm": AGENT_CALLS,
    "vercel_ai": AGENT_CALLS,
}
SETUPS = tuple(EXPECTED_CALLS)
