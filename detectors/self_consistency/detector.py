"""Self-consistency (docs/detectors.md, seed 000): ask again, and see whether the answers agree.

The call's own conversation is sent to an OpenAI-compatible endpoint ``samples`` times at
a temperature above zero; the answers are embedded with the grounding detector's model
and their mean pairwise cosine measured.  A model that knows the answer says the same
thing each time; one that makes it up tends to say something different each time.

* **Score** = 1 - mean pairwise cosine, clipped to [0, 1]; flagged at the calibrated
  threshold (the seed's "divergent below 0.65" is the built-in 0.35).  Evidence: the most
  divergent pair of answers, and how close the answer the user saw is to the re-asked ones.
* **Blind spots** (seed 000): a model consistently wrong says the same wrong thing each
  time; and cosine similarity sees different topics better than different numbers.
* **Tool turns** are replayed as text: the endpoint does not have the app's tools, and
  tool-call ids from a trace would not match anything there.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from detectors.base import DetectorResult, SampledDetector, checked_threshold
from detectors.llm_call import LLMCall
from detectors.models.chat import USAGE_KEY, ChatMessage, ChatModel, Completion, estimate_tokens, usage_evidence
from detectors.models.embeddings import Vectors
from detectors.self_consistency import DETECTOR, SelfConsistencyConfig
from detectors.spec import Ingredients, required
from detectors.text import evidence as shown
from detectors.text.passages import clip

Embed = Callable[[Sequence[str]], Awaitable[Vectors]]  # texts -> L2-normalised rows, off the event loop

_EVIDENCE_CHARS = 500
_CHAT_ROLES = ("system", "user", "assistant")


def replay_messages(call: LLMCall) -> list[ChatMessage]:
    """The call's conversation as chat messages: instructions, then its input turns."""
    messages: list[ChatMessage] = []
    if call.system_instructions:
        messages.append({"role": "system", "content": call.system_instructions})
    for message in call.input_messages:
        text = message.text
        text += "".join(f"\n[called {c.name}({c.arguments or ''})]" for c in message.tool_calls)
        if message.role not in _CHAT_ROLES:
            text = f"[{message.role} result]\n{text}"
        if text:
            messages.append({"role": message.role if message.role in _CHAT_ROLES else "user", "content": text})
    return messages


class SelfConsistencyDetector(SampledDetector):
    """Re-asks a sampled call and measures how much the answers agree."""

    name = "self_consistency"
    version = "1"

    def __init__(self, config: SelfConsistencyConfig, threshold: float, model: ChatModel, embed: Embed) -> None:
        self.config = config
        self.threshold = checked_threshold(threshold)
        self._model = model
        self._embed = embed

    def estimated_tokens(self, call: LLMCall) -> int:
        """Every sample costs the whole conversation plus at most ``max_tokens`` of answer."""
        prompt = sum(estimate_tokens(m["content"]) for m in replay_messages(call))
        return self.config.samples * (prompt + self.config.max_tokens)

    async def evaluate(self, call: LLMCall) -> DetectorResult:
        """Ask ``samples`` times, embed the answers, score their agreement."""
        messages = replay_messages(call)
        if not any(m["role"] == "user" for m in messages):
            return self.skipped_result("no user turn to ask again", self.threshold)
        if not call.answer.strip():
            return self.skipped_result("the call answered with tool calls only: no text to compare", self.threshold)
        c = self.config
        completions = await _all_or_none(
            self._model.complete(
                messages, model=call.model, temperature=c.temperature, max_tokens=c.max_tokens, json_mode=False
            )
            for _ in range(c.samples)
        )
        unusable = self.unusable(completions)
        if unusable:
            return self.error_result(unusable, {USAGE_KEY: usage_evidence(completions)})
        answers = [completion.text for completion in completions]
        vectors = await self._embed([*answers, call.answer])
        return self.score(answers, vectors[:-1], vectors[-1], completions)

    def unusable(self, completions: Sequence[Completion]) -> str | None:
        """Why the samples cannot be compared, if they cannot.

        Blank answers embed alike, and so do answers stopped a few tokens in because the
        conversation all but filled the endpoint's context window: either would read as
        agreement. Answers cut at ``max_tokens`` are compared as they are.
        """
        n = len(completions)
        empty = sum(1 for completion in completions if not completion.text.strip())
        if empty:
            return f"the endpoint answered {empty} of {n} samples with no text: nothing to compare"
        short = [c.completion_tokens for c in completions if c.out_of_room(self.config.max_tokens)]
        if short:
            return (
                f"the endpoint's context window cut {len(short)} of {n} answers short (after {min(short)} of "
                f"max_tokens={self.config.max_tokens} tokens): the conversation nearly fills it"
            )
        return None

    def score(
        self, answers: Sequence[str], vectors: Vectors, answer_vector: Vectors, completions: Sequence[Completion]
    ) -> DetectorResult:
        """The result for re-asked ``answers`` (rows of ``vectors``) and the original answer's vector."""
        similarity = vectors @ vectors.T
        first, second = np.triu_indices(len(answers), k=1)
        pairs = similarity[first, second]
        mean = float(pairs.mean())
        worst = int(pairs.argmin())
        score = min(max(1.0 - mean, 0.0), 1.0)
        to_answer = float((vectors @ answer_vector).mean())
        evidence: dict[str, Any] = {
            "samples": len(answers),
            "mean_similarity": round(mean, 4),
            "answer_similarity": round(to_answer, 4),  # the answer the user saw vs the re-asked ones
            "most_divergent": {
                "similarity": round(float(pairs[worst]), 4),
                "answers": [
                    clip(answers[int(first[worst])], _EVIDENCE_CHARS),
                    clip(answers[int(second[worst])], _EVIDENCE_CHARS),
                ],
            },
            USAGE_KEY: usage_evidence(completions),
        }
        verdict = "diverge" if score >= self.threshold else "agree"
        return self.scored_result(
            score,
            self.threshold,
            severity=2,  # disagreement, not a contradiction of the context
            summary=f"{len(answers)} answers to the same prompt {verdict}: mean similarity {mean:.2f} "
            f"(least similar pair {float(pairs[worst]):.2f})",
            evidence=evidence,
        )


def render_evidence(evidence: Mapping[str, Any]) -> list[str]:
    """Its evidence as lines for people, in alerts."""
    pair = evidence.get("most_divergent")
    answers = pair.get("answers") if isinstance(pair, Mapping) else None
    if not isinstance(pair, Mapping) or not isinstance(answers, list):
        return []
    similarity = shown.number(pair.get("similarity"))
    scored = f" (similarity {similarity:.2f})" if similarity is not None else ""
    return [f"least similar re-asked answer{scored}: {shown.quoted(answer)}" for answer in answers[:2]]


def build(ing: Ingredients) -> SelfConsistencyDetector | None:
    """The detector, or None when its settings turn it off."""
    config = ing.config(DETECTOR)
    if not config.enabled:
        return None
    return SelfConsistencyDetector(
        config, ing.threshold, required(ing.chat, "an LLM endpoint"), required(ing.embed, "an embedding function")
    )


async def _all_or_none(requests: Iterable[Coroutine[Any, Any, Completion]]) -> list[Completion]:
    """Every sample, or the first failure with the other requests cancelled.

    One failed sample spoils the set; the others, still running, would be paid for and thrown away.
    """
    tasks = [asyncio.ensure_future(request) for request in requests]
    try:
        return await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        raise
