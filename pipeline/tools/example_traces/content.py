"""What an example's call sends and gets back beyond its row: prompts, token counts, logprobs.

Every convention writer derives its attributes from these, so the conventions agree on the
content of one call.
"""

from __future__ import annotations

import math
import random
import re
from typing import Any

from pipeline.tools.example_traces.examples import APPS, TOOL_DEFINITIONS, App, Example


def app(example: Example) -> App:
    """The app that made the call: by its operation when it has its own, else a tools or a RAG app."""
    return APPS.get(example.operation) or APPS["tools" if example.tools else "rag"]


def system_prompt(example: Example) -> str:
    """The app's system prompt for the call."""
    return app(example).system_prompt


def user_prompt(example: Example) -> str:
    """Return the question with the context pasted in front, as most RAG apps do."""
    if not example.sources:
        return example.question
    context = "\n".join(f"[{n}] {text}" for n, (_, text) in enumerate(example.sources, 1))
    return f"Context:\n{context}\n\nQuestion: {example.question}"


def tool_call_id(example: Example, index: int) -> str:
    """The id of the agent's ``index``-th earlier tool call (answered by its tool message)."""
    return f"call_{example.name[:12]}_{index}"


def answer_call_id(index: int) -> str:
    """The id of the ``index``-th tool call the model makes in its answer."""
    return f"call_{index}"


def openai_messages(example: Example) -> list[dict[str, Any]]:
    """The request's chat messages in OpenAI's shape: system, user, then the agent's tool turn if any."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": system_prompt(example)},
        {"role": "user", "content": user_prompt(example)},
    ]
    if example.tool_results:
        calls = [
            {
                "id": tool_call_id(example, i),
                "type": "function",
                "function": {"name": run.name, "arguments": run.arguments},
            }
            for i, run in enumerate(example.tool_results)
        ]
        messages.append({"role": "assistant", "content": None, "tool_calls": calls})
        messages += [
            {"role": "tool", "tool_call_id": tool_call_id(example, i), "content": run.result}
            for i, run in enumerate(example.tool_results)
        ]
    return messages


def function_schema(name: str) -> dict[str, Any]:
    """The OpenAI function definition of the tool ``name``."""
    tool = TOOL_DEFINITIONS[name]
    return {"name": tool.name, "description": tool.description, "parameters": tool.parameters}


def _tokens(text: str) -> int:
    """Estimate tokens (about 4/3 per word) for the usage attributes."""
    return max(1, len(text.split()) * 4 // 3)


def usage(example: Example) -> tuple[int, int]:
    """Estimated (prompt tokens, completion tokens) of the call."""
    results = " ".join(run.result for run in example.tool_results)
    prompt = _tokens(system_prompt(example) + " " + user_prompt(example) + " " + results)
    return prompt, _tokens(example.answer + " ".join(args for _, args in example.tool_calls))


def token_logprobs(example: Example) -> list[dict[str, Any]]:
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
