"""The consistency stage's sampling and budget, with the real client, embedder and a local endpoint.

The agent itself runs over a real broker in tests/integration/test_consistency_sampling.py.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from prometheus_client import REGISTRY

from detectors.base import DetectorResult, DetectorStatus
from detectors.llm_call import LLMCall, Source
from pipeline.config.settings import Settings
from pipeline.sampled.llm_client import Budget
from pipeline.sampled.stage import ConsistencyStage
from tests.calls import make_llm_call
from tests.openai_server import CHAT_PATH, OpenAIServer
from tests.sampled_stage import offline_app, sampled_stage

pytestmark = pytest.mark.usefixtures("exported_model")

QUESTION = "Is 800 mg of ibuprofen every 4 hours safe?"
ANSWER = "No. Adults should not take more than 1200 mg a day without a doctor."
MEDICAL = {"app.domain": "medical"}


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer(ANSWER) as server:
        yield server


def stage(server: OpenAIServer, **consistency: Any) -> ConsistencyStage:
    settings = Settings(
        consistency={
            "enabled": True,
            "sample_rate": 1.0,
            "llm": {"base_url": server.base_url, "api_key": "test", "max_retries": 0, **consistency.pop("llm", {})},
            **consistency,
        }
    )
    return sampled_stage(settings)


def call(trace: int = 1, attributes: Mapping[str, Any] = MEDICAL, **fields: Any) -> LLMCall:
    return make_llm_call(ANSWER, QUESTION, trace_id=f"{trace:032x}", attributes=dict(attributes), model="m", **fields)


def metric(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def judge(target: ConsistencyStage, sampled: LLMCall) -> list[DetectorResult]:
    return asyncio.run(target.judge(sampled))


def test_disabled_samples_nothing_and_registers_no_agent() -> None:
    app = offline_app("test-disabled")
    target = sampled_stage(Settings(), app)
    assert target.sample([call()]) == []
    assert not app.agents


def test_sampled_high_risk_calls_travel_whole(server: OpenAIServer) -> None:
    target = stage(server)
    grounded = call(2, sources=(Source("doc-1", "Do not exceed 1200 mg a day.", 0.9),))
    records = target.sample([call(1, attributes={}), grounded])
    ((key, value),) = records
    assert key == grounded.trace_id.encode()
    message = json.loads(value)
    assert message["rule"] == "regulated-domain"
    assert LLMCall.from_dict(message["call"]) == grounded


def test_calls_too_large_for_the_topic_are_not_sampled(server: OpenAIServer) -> None:
    target = stage(server, max_call_bytes=1024)
    before = metric("halluwatch_consistency_skipped_total", reason="too_large")
    assert target.sample([call(sources=(Source("big", "x" * 2000),))]) == []
    assert metric("halluwatch_consistency_skipped_total", reason="too_large") == before + 1


def test_a_full_minute_pauses_sampling_and_says_so(server: OpenAIServer) -> None:
    target = stage(server, llm={"max_requests_per_minute": 4})
    clock = Clock()
    target.budget = Budget(4, 1_000_000, clock)
    results = judge(target, call())  # four requests: the minute is full
    assert [r.status for r in results] == [DetectorStatus.OK]
    before = metric("halluwatch_consistency_skipped_total", reason="requests_per_minute")
    assert target.sample([call(2)]) == []
    assert metric("halluwatch_consistency_paused", limit="requests_per_minute") == 1
    assert metric("halluwatch_consistency_skipped_total", reason="requests_per_minute") == before + 1
    clock.now += 60
    assert len(target.sample([call(2)])) == 1
    assert metric("halluwatch_consistency_paused", limit="requests_per_minute") == 0


def test_spent_daily_tokens_pause_sampling_and_skip_calls_on_the_topic(server: OpenAIServer) -> None:
    target = stage(server)
    target.budget = Budget(1000, 100, Clock())  # fewer tokens than one call's estimate
    assert target.sample([call()]) == []
    assert metric("halluwatch_consistency_paused", limit="tokens_per_day") == 1
    (result,) = judge(target, call())  # already on the topic when the budget ran out
    assert result.status is DetectorStatus.SKIPPED and "daily token budget spent" in result.summary
    assert server.requests(CHAT_PATH) == []


def test_the_budget_is_charged_what_the_endpoint_reported(server: OpenAIServer) -> None:
    target = stage(server, claims={"enabled": True})
    target.budget = Budget(1000, 1_000_000, Clock())
    server.default_answer = '{"claims": []}'  # the detectors ask concurrently: one answer fits both
    consistency, claims = judge(target, call(sources=(Source("d", "Max 1200 mg a day."),)))
    assert (consistency.detector, claims.detector) == ("self_consistency", "claims")
    assert consistency.status is claims.status is DetectorStatus.OK
    used = consistency.evidence["llm_usage"]["tokens"] + claims.evidence["llm_usage"]["tokens"]
    assert target.budget.tokens_today == used
    assert len(server.requests(CHAT_PATH)) == 5


def test_an_endpoint_that_fails_gives_error_findings_and_charges_the_estimate(server: OpenAIServer) -> None:
    target = stage(server)
    target.budget = Budget(1000, 1_000_000, Clock())
    server.set_down(500)
    (result,) = judge(target, call())
    assert result.status is DetectorStatus.ERROR and "InternalServerError" in result.summary
    assert target.budget.tokens_today == target.detectors[0].estimated_tokens(call())


def test_an_unusable_judge_answer_charges_what_the_endpoint_reported(server: OpenAIServer) -> None:
    target = stage(server, self_consistency={"enabled": False}, claims={"enabled": True})
    target.budget = Budget(1000, 1_000_000, Clock())
    server.default_answer = "I am sorry, I cannot help with that."  # a refusal: no JSON
    grounded = call(sources=(Source("d", "Max 1200 mg a day."),))
    (result,) = judge(target, grounded)
    assert result.status is DetectorStatus.ERROR and "no JSON object" in result.summary
    reported = result.evidence["llm_usage"]["tokens"]
    assert target.budget.tokens_today == reported < target.detectors[0].estimated_tokens(grounded)
