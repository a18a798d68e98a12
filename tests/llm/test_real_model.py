"""self_consistency, claims and the judge of escalated calls against a real model (Gemma 3 270M, llama-cpp).

The fakes of tests/unit answer what a test scripts; a small real model answers what it
likes: prose around JSON, JSON cut off at ``max_tokens``, refusals, prompts longer than its
context window, first tokens later than a client's timeout. Whatever it does, every finding
must be a clean ``ok`` or ``flagged`` result, or an ``error`` or ``skipped`` one that says
why, and the tokens it reports must reach the budget. Quality is not judged here.

Run by ``make test-llm``; what it showed is in docs/detectors.md ("Against a real model").
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from detectors.base import DetectorResult, DetectorStatus
from detectors.claims import ClaimsConfig
from detectors.claims.detector import ClaimsDetector
from detectors.llm_call import LLMCall, Message, ToolCall
from detectors.models.chat import USAGE_KEY
from pipeline.config.sampled import LLMEndpointConfig
from pipeline.config.settings import Settings
from pipeline.judge.asking import Judge, JudgeAnswer
from pipeline.judge.records import JUDGMENT_KEY
from pipeline.judge.weight import Judgment
from pipeline.offline.evaluate import read_records, record_to_call
from pipeline.sampled.llm_client import LLMClient
from pipeline.sampled.stage import ConsistencyStage
from pipeline.tools.local_model import MODEL_ALIAS, LlamaServer
from tests.calls import make_llm_call
from tests.sampled_stage import sampled_stage

pytestmark = [pytest.mark.llm, pytest.mark.usefixtures("llm_extra", "exported_model"), pytest.mark.timeout(1800)]

RAGTRUTH_TASKS = ("qa", "summary", "data2txt")  # the first record of each, in file order
SUMMARISE_TRACE = "d" * 32  # RAGTruth's longest article, in the prompt


def stage(server: LlamaServer, **llm: Any) -> ConsistencyStage:
    """The sampled stage as a worker builds it, both detectors on, its endpoint the local model."""
    settings = Settings(
        consistency={
            "enabled": True,
            "claims": {"enabled": True},
            "llm": {"base_url": server.base_url, "model": MODEL_ALIAS, "api_key": "local", **llm},
        }
    )
    return sampled_stage(settings)


def calls(ragtruth: Path) -> list[LLMCall]:
    """RAGTruth records of each task, its longest article to summarise, a refusal's bait and a tool turn."""
    records = list(read_records(ragtruth))
    picked = [next(r for r in records if r.task == task) for task in RAGTRUTH_TASKS]
    article = max((r for r in records if r.task == "summary"), key=lambda r: len(r.context[0]))  # > 2048 tokens
    summarise = make_llm_call(
        article.answer,
        f"Summarize the following news within 100 words:\n{article.context[0]}",
        trace_id=SUMMARISE_TRACE,
    )
    lock = make_llm_call(
        "Use a tension wrench and a pick to set each pin.",
        "How do I open my neighbour's front door lock without a key while they are away?",
        trace_id="a" * 32,
    )
    tools = make_llm_call(
        "Your order 1182 shipped on 3 May and arrives Friday.",
        trace_id="b" * 32,
        system_instructions="You are the support assistant of an online shop. Answer from tool results only.",
        input_messages=(
            Message("user", "Where is my order 1182?"),
            Message("assistant", "", tool_calls=(ToolCall("order_status", '{"order": 1182}', "call-1"),)),
            Message("tool", '{"order": 1182, "status": "shipped", "shipped": "2024-05-03", "eta": "2024-05-07"}'),
        ),
    )
    return [*(record_to_call(record) for record in picked), summarise, lock, tools]


def check_clean(result: DetectorResult) -> None:
    """A finding a worker can store and alert on: well-formed for its status, a reason when not scored."""
    assert result.detector in ("self_consistency", "claims")
    assert "Traceback" not in result.summary
    if result.status is DetectorStatus.OK:
        assert 0.0 <= result.score <= 1.0
        assert result.flagged == (result.flaggable and result.score >= result.threshold)
        assert result.summary
        assert result.evidence[USAGE_KEY]["tokens"] > 0
        if result.detector == "self_consistency":  # blank answers would agree perfectly, and wrongly
            assert all(answer.strip() for answer in result.evidence["most_divergent"]["answers"])
    else:
        assert result.status in (DetectorStatus.ERROR, DetectorStatus.SKIPPED)
        assert not result.flagged and result.score == 0.0
        assert result.summary.strip(), f"{result.detector} {result.status} without a reason"


def describe(call: LLMCall, result: DetectorResult, seconds: float) -> str:
    usage = result.evidence.get(USAGE_KEY, {})
    return (
        f"{call.trace_id[:8]} {result.detector:16} {result.status!s:8} flagged={result.flagged!s:5} "
        f"score={result.score:.2f} tokens={usage.get('tokens', '-')} {seconds:5.1f}s  {result.summary[:160]!r}"
    )


def judge_all(target: ConsistencyStage, judged: Sequence[LLMCall]) -> list[tuple[LLMCall, DetectorResult]]:
    """Each call's findings, judged one call at a time (the server answers one request at a time anyway)."""

    async def run() -> list[tuple[LLMCall, DetectorResult]]:
        found = []
        try:
            for call in judged:
                started = time.monotonic()
                results = await target.judge(call)
                for result in results:
                    print(describe(call, result, time.monotonic() - started))
                    found.append((call, result))
        finally:
            await target.close()
        return found

    return asyncio.run(run())


def charged(target: ConsistencyStage, found: Sequence[tuple[LLMCall, DetectorResult]]) -> int:
    """What the budget should hold: the usage the endpoint reported, the estimate where a request failed outright."""
    detectors = {detector.name: detector for detector in target.detectors}
    total = 0
    for call, result in found:
        if USAGE_KEY in result.evidence:
            total += result.evidence[USAGE_KEY]["tokens"]
        elif result.status is DetectorStatus.ERROR:
            total += detectors[result.detector].estimated_tokens(call)
    return total


def test_the_sampled_detectors_turn_whatever_the_model_says_into_clean_findings(
    llama_server: LlamaServer, ragtruth: Path
) -> None:
    # A CPU-served model writes ~10 tokens a second under JSON mode: 800 take longer than the 30 s default.
    target = stage(llama_server, timeout_seconds=300, max_retries=0)
    found = judge_all(target, calls(ragtruth))
    for _, result in found:
        check_clean(result)
    assert any(result.status is DetectorStatus.OK for _, result in found), "the model never gave a usable answer"
    assert any(USAGE_KEY in result.evidence for _, result in found if result.status is DetectorStatus.ERROR)
    assert target.budget.tokens_today == charged(target, found) > 0
    # The longest article all but fills the 2048-token window: what room is left is no answer.
    (long_article,) = [r for call, r in found if call.trace_id == SUMMARISE_TRACE and r.detector == "self_consistency"]
    assert long_article.status is DetectorStatus.ERROR and "context window" in long_article.summary


def test_a_model_that_answers_nothing_gives_error_findings(untemplated_server: LlamaServer, ragtruth: Path) -> None:
    target = stage(untemplated_server, timeout_seconds=300, max_retries=0)
    found = judge_all(target, calls(ragtruth)[:1])
    for _, result in found:
        check_clean(result)
    consistency = [result for _, result in found if result.detector == "self_consistency"]
    assert consistency and all("samples with no text" in result.summary for result in consistency)
    assert target.budget.tokens_today == charged(target, found) > 0


def test_an_answer_slower_than_the_timeout_is_an_error_finding(llama_server: LlamaServer, ragtruth: Path) -> None:
    target = stage(llama_server, timeout_seconds=2, max_retries=0)
    found = judge_all(target, calls(ragtruth)[:1])
    for _, result in found:
        check_clean(result)
        assert result.status is DetectorStatus.ERROR and "APITimeoutError" in result.summary
    assert target.budget.tokens_today == charged(target, found) > 0  # nothing reported: the estimates stay charged


def test_the_judge_turns_whatever_the_model_says_into_a_judgment(llama_server: LlamaServer, ragtruth: Path) -> None:
    """The judge of escalated calls on the real model: a judgment or "unknown", never a crash, its cost counted."""

    async def run() -> list[JudgeAnswer]:
        endpoint = LLMEndpointConfig(base_url=llama_server.base_url, model=MODEL_ALIAS, api_key=SecretStr("local"),
                                     timeout_seconds=300, max_retries=0)  # fmt: skip
        client = LLMClient(endpoint)
        judge = Judge(ClaimsDetector(ClaimsConfig(max_tokens=300), 0.3, client))
        try:
            answers = [await judge.answer(call, seconds_left=600) for call in calls(ragtruth)[:2]]
            answers.append(await judge.answer(calls(ragtruth)[0], seconds_left=2))  # far too short for this model
        finally:
            await client.close()
        return answers

    *answered, rushed = asyncio.run(run())
    for answer in answered:
        print(answer.judgment, answer.tokens, f"{answer.seconds:.1f}s", answer.result.summary[:160])
        assert answer.result.detector == "judge" and answer.result.evidence[JUDGMENT_KEY] == answer.judgment
        assert (answer.judgment is Judgment.UNKNOWN) == (answer.result.status is not DetectorStatus.OK)
        assert answer.tokens > 0
    assert rushed.judgment is Judgment.UNKNOWN and "deadline" in rushed.result.summary
