"""The judge of escalated calls through the real openai library: its judgment, retries, a deadline, bad answers."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import pytest
from pydantic import SecretStr

from detectors.claims import ClaimsConfig
from detectors.claims.detector import ClaimsDetector
from pipeline.config.alerting import JUDGE, JUDGE_SEVERITY
from pipeline.config.sampled import LLMEndpointConfig
from pipeline.judge.asking import Judge, JudgeAnswer
from pipeline.judge.records import JUDGMENT_KEY
from pipeline.judge.weight import Judgment
from pipeline.sampled.llm_client import LLMClient
from tests.openai_server import CHAT_PATH, OpenAIServer, rate_limited
from tests.unit.test_claims import CALL, CLAIMS, verdicts


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as server:
        yield server


def answer(server: OpenAIServer, seconds_left: float = 10.0, timeout: float = 5.0) -> JudgeAnswer:
    async def run() -> JudgeAnswer:
        endpoint = LLMEndpointConfig(base_url=server.base_url, api_key=SecretStr("test"), timeout_seconds=timeout)
        client = LLMClient(endpoint)
        try:
            return await Judge(ClaimsDetector(ClaimsConfig(), 0.3, client)).answer(CALL, seconds_left)
        finally:
            await client.close()

    return asyncio.run(run())


def test_unsupported_claims_are_a_hallucinated_judgment_flagged_as_the_judge(server: OpenAIServer) -> None:
    server.answer(json.dumps({"claims": CLAIMS}), verdicts("supported", "unsupported", "supported"))
    judged = answer(server)
    assert judged.judgment is Judgment.HALLUCINATED
    result = judged.result
    assert (result.detector, result.flagged, result.severity) == (JUDGE, True, JUDGE_SEVERITY)
    assert result.evidence[JUDGMENT_KEY] == "hallucinated" and result.evidence["unsupported"] == 1
    assert judged.tokens > 0 and judged.seconds >= 0


def test_supported_claims_are_faithful(server: OpenAIServer) -> None:
    server.answer(json.dumps({"claims": CLAIMS}), verdicts("supported", "supported", "supported"))
    judged = answer(server)
    assert judged.judgment is Judgment.FAITHFUL and not judged.result.flagged


def test_a_429_is_retried_within_the_deadline(server: OpenAIServer) -> None:
    server.script(CHAT_PATH, rate_limited())
    server.answer(json.dumps({"claims": CLAIMS}), verdicts("contradicted", "supported", "supported"))
    assert answer(server).judgment is Judgment.HALLUCINATED
    assert len(server.requests(CHAT_PATH)) == 3


@pytest.mark.parametrize("reply", ["not json at all", '{"claims": "one"}', '{"claims": ["a'])
def test_a_malformed_answer_is_unknown_never_a_crash(server: OpenAIServer, reply: str) -> None:
    server.answer(reply)
    judged = answer(server)
    assert judged.judgment is Judgment.UNKNOWN
    assert judged.result.status == "error" and not judged.result.flagged
    assert judged.result.evidence[JUDGMENT_KEY] == "unknown"


def test_no_answer_by_the_deadline_is_unknown(server: OpenAIServer) -> None:
    server.answer(json.dumps({"claims": CLAIMS}), delay=3.0)
    judged = answer(server, seconds_left=0.5)
    assert judged.judgment is Judgment.UNKNOWN and "deadline" in judged.result.summary
    assert judged.seconds < 2.5
    late = answer(server, seconds_left=0.0)
    assert late.judgment is Judgment.UNKNOWN and late.result.status == "skipped" and late.tokens == 0
