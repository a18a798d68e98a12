"""Self-consistency with the real embedding model and the real openai library against a local server."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from pydantic import SecretStr

from detectors.base import DetectorResult, DetectorStatus
from detectors.config import EmbeddingConfig
from detectors.llm_call import Message, ToolCall
from detectors.models.chat import USAGE_KEY
from detectors.models.embeddings import Embedder, Vectors
from detectors.self_consistency import SelfConsistencyConfig
from detectors.self_consistency.detector import SelfConsistencyDetector, replay_messages
from pipeline.alerting.alert import DetectorEvidence
from pipeline.alerting.render import evidence_lines
from pipeline.config.sampled import LLMEndpointConfig
from pipeline.sampled.llm_client import LLMClient
from tests.calls import make_llm_call
from tests.openai_server import CHAT_PATH, OpenAIServer

pytestmark = pytest.mark.usefixtures("exported_model")

QUESTION = "When was the Eiffel Tower built?"
ANSWER = "The Eiffel Tower was built between 1887 and 1889."
CONSISTENT = [
    "The Eiffel Tower was built between 1887 and 1889.",
    "It was built from 1887 to 1889.",
    "Construction of the Eiffel Tower took place between 1887 and 1889.",
    "The Eiffel Tower was constructed between 1887 and 1889 for the World's Fair.",
]
DIVERGENT = [
    "The Eiffel Tower was built between 1887 and 1889.",
    "Bananas are rich in potassium and grow in tropical climates.",
    "I cannot help with questions about train timetables.",
    "Quantum computers use qubits that can be in superposition.",
]


@pytest.fixture(scope="module")
def embedder(model_cache_dir: Path) -> Embedder:
    return Embedder(EmbeddingConfig(cache_dir=model_cache_dir))


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer(ANSWER) as server:
        yield server


def evaluate(
    server: OpenAIServer,
    embedder: Embedder,
    call=None,
    threshold: float = 0.35,
    config: SelfConsistencyConfig | None = None,
) -> DetectorResult:
    async def run() -> DetectorResult:
        client = LLMClient(LLMEndpointConfig(base_url=server.base_url, api_key=SecretStr("test")))
        with ThreadPoolExecutor(1) as pool:

            async def embed(texts: Sequence[str]) -> Vectors:
                return await asyncio.get_running_loop().run_in_executor(pool, embedder.encode, list(texts))

            detector = SelfConsistencyDetector(config or SelfConsistencyConfig(), threshold, client, embed)
            try:
                return await detector.evaluate(call or make_llm_call(ANSWER, QUESTION, model="gpt-4o-mini"))
            finally:
                await client.close()

    return asyncio.run(run())


def test_consistent_answers_are_not_flagged(server: OpenAIServer, embedder: Embedder) -> None:
    server.answer(*CONSISTENT)
    result = evaluate(server, embedder)
    assert result.status is DetectorStatus.OK and not result.flagged and result.severity == 0
    assert result.evidence["mean_similarity"] > 0.75
    assert result.score == pytest.approx(1 - result.evidence["mean_similarity"], abs=1e-3)
    assert result.evidence["answer_similarity"] > 0.75
    assert result.evidence[USAGE_KEY]["requests"] == 4 and result.evidence[USAGE_KEY]["tokens"] > 0
    requests = server.requests(CHAT_PATH)
    assert len(requests) == 4
    assert all(r.body["temperature"] == 0.7 and r.body["model"] == "gpt-4o-mini" for r in requests)
    assert all(r.body["messages"] == [{"role": "user", "content": QUESTION}] for r in requests)


def test_divergent_answers_are_flagged_with_the_most_divergent_pair(server: OpenAIServer, embedder: Embedder) -> None:
    server.answer(*DIVERGENT)
    result = evaluate(server, embedder)
    assert result.flagged and result.severity == 2
    assert result.evidence["mean_similarity"] < 0.3
    pair = result.evidence["most_divergent"]
    assert set(pair["answers"]) <= set(DIVERGENT) and len(set(pair["answers"])) == 2
    vectors = embedder.encode(DIVERGENT)
    similarities = {(a, b): float(vectors[i] @ vectors[j]) for i, a in enumerate(DIVERGENT) for j, b in
                    enumerate(DIVERGENT) if i < j}  # fmt: skip
    assert pair["similarity"] == pytest.approx(min(similarities.values()), abs=1e-3)
    assert "diverge" in result.summary


def test_identical_answers_score_zero(server: OpenAIServer, embedder: Embedder) -> None:
    result = evaluate(server, embedder)  # the default answer, four times
    assert result.score == pytest.approx(0.0, abs=1e-3) and not result.flagged


def test_calls_with_nothing_to_ask_or_compare_are_skipped(server: OpenAIServer, embedder: Embedder) -> None:
    no_user = make_llm_call(ANSWER, "", system_instructions="Be brief.", model="m")
    tool_only = make_llm_call("", QUESTION, output_messages=(Message("assistant", "", (ToolCall("search"),)),))
    for call in (no_user, tool_only):
        result = evaluate(server, embedder, call)
        assert result.status is DetectorStatus.SKIPPED and not result.flagged
    assert server.requests(CHAT_PATH) == []


def test_tool_turns_are_replayed_as_text() -> None:
    call = make_llm_call(
        ANSWER,
        system_instructions="You answer travel questions.",
        input_messages=(
            Message("user", QUESTION),
            Message("assistant", "", (ToolCall("search_docs", '{"q": "eiffel"}', "call_1"),)),
            Message("tool", "Built 1887-1889.", tool_call_id="call_1"),
        ),
    )
    assert replay_messages(call) == [
        {"role": "system", "content": "You answer travel questions."},
        {"role": "user", "content": QUESTION},
        {"role": "assistant", "content": '\n[called search_docs({"q": "eiffel"})]'},
        {"role": "user", "content": "[tool result]\nBuilt 1887-1889."},
    ]


def test_alerts_show_the_most_divergent_answers(server: OpenAIServer, embedder: Embedder) -> None:
    server.answer(*DIVERGENT)
    result = evaluate(server, embedder)
    d = DetectorEvidence("self_consistency", result.score, 0.35, 2, result.summary, evidence=result.evidence)
    first, second = evidence_lines(d)
    assert first.startswith("least similar re-asked answer (similarity ") and second.startswith("least similar")
    assert {line.split(": ", 1)[1].strip('"') for line in (first, second)} == set(
        result.evidence["most_divergent"]["answers"]
    )


@pytest.mark.parametrize(("answers", "empty"), [(["", "", "", ""], 4), ([*CONSISTENT[:3], " \n"], 1)])
def test_empty_answers_are_an_error_not_agreement(
    server: OpenAIServer, embedder: Embedder, answers: list[str], empty: int
) -> None:
    """Blank answers embed alike: scored, they would read as four answers in perfect agreement."""
    server.answer(*answers)
    result = evaluate(server, embedder)
    assert result.status is DetectorStatus.ERROR and not result.flagged and result.score == 0
    assert f"{empty} of 4 samples with no text" in result.summary
    assert result.evidence[USAGE_KEY]["requests"] == 4 and result.evidence[USAGE_KEY]["tokens"] > 0


def test_answers_cut_short_by_the_context_window_are_an_error(server: OpenAIServer, embedder: Embedder) -> None:
    """A conversation that all but fills the window leaves a few tokens an answer: their starts agree, wrongly."""
    server.answer(*CONSISTENT, finish_reason="length")  # 8 to 20 tokens of the 400 asked for
    result = evaluate(server, embedder)
    assert result.status is DetectorStatus.ERROR and not result.flagged
    assert "context window cut 4 of 4 answers short (after 8 of max_tokens=400 tokens)" in result.summary
    assert result.evidence[USAGE_KEY]["requests"] == 4


def test_answers_cut_at_max_tokens_are_still_compared(server: OpenAIServer, embedder: Embedder) -> None:
    server.answer(*CONSISTENT, finish_reason="length")
    result = evaluate(server, embedder, config=SelfConsistencyConfig(max_tokens=5))
    assert result.status is DetectorStatus.OK and not result.flagged


class _OneFailsOthersHang:
    """A chat model whose first request fails and whose others wait for good, noting their cancellation."""

    def __init__(self) -> None:
        self.requests = 0
        self.cancelled = 0

    async def complete(self, messages, *, model, temperature, max_tokens, json_mode):  # type: ignore[no-untyped-def]
        self.requests += 1
        if self.requests == 1:
            raise ConnectionError("endpoint went away")
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        raise AssertionError("unreachable")


def test_a_failed_sample_cancels_the_samples_still_running() -> None:
    """The failure is the detector's; the other requests would only be paid for and thrown away."""
    model = _OneFailsOthersHang()

    async def unused_embed(texts: Sequence[str]) -> Vectors:
        raise AssertionError("nothing to embed after a failure")

    async def run() -> None:
        detector = SelfConsistencyDetector(SelfConsistencyConfig(samples=4), 0.35, model, unused_embed)
        with pytest.raises(ConnectionError, match="endpoint went away"):
            await asyncio.wait_for(detector.evaluate(make_llm_call(ANSWER, QUESTION)), timeout=30)
        await asyncio.sleep(0)  # let the cancellations land
        assert (model.requests, model.cancelled) == (4, 3)  # (asyncio.run would cancel leftovers itself)

    asyncio.run(run())
