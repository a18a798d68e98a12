"""The budget with an injected clock; the client through the real openai library against a local server."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from pydantic import SecretStr

from detectors.models.chat import Completion
from pipeline.config.sampled import LLMEndpointConfig
from pipeline.config.settings import SECRETS_DIR_ENV, load_settings
from pipeline.sampled.llm_client import Budget, Limit, LLMClient
from tests.openai_server import CHAT_PATH, OpenAIServer, rate_limited

DAY = 86_400.0
MESSAGES = [{"role": "user", "content": "What is the capital of France?"}]


class Clock:
    def __init__(self, now: float = 10 * DAY + 3600) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer("Paris.") as server:
        yield server


def config(server: OpenAIServer, **fields: Any) -> LLMEndpointConfig:
    return LLMEndpointConfig(base_url=server.base_url, api_key=SecretStr("sk-test-secret"), **fields)


def complete(endpoint: LLMEndpointConfig, *, model: str = "gpt-4o-mini", json_mode: bool = False) -> Completion:
    async def run() -> Completion:
        client = LLMClient(endpoint)
        try:
            return await client.complete(MESSAGES, model=model, temperature=0.7, max_tokens=50, json_mode=json_mode)
        finally:
            await client.close()

    return asyncio.run(run())


def test_requests_per_minute_slide_with_the_clock() -> None:
    clock = Clock()
    budget = Budget(max_requests_per_minute=10, max_tokens_per_day=1_000_000, clock=clock)
    assert budget.reserve(4, 100) is None
    clock.now += 20
    assert budget.reserve(4, 100) is None
    assert budget.refusal(4, 100) is Limit.REQUESTS_PER_MINUTE
    assert budget.reserve(4, 100) is Limit.REQUESTS_PER_MINUTE  # refused: nothing reserved
    assert budget.reserve(2, 100) is None  # exactly full
    assert budget.seconds_until_room(4) == pytest.approx(40)  # when the first four leave the window
    clock.now += 40
    assert budget.seconds_until_room(4) == 0
    assert budget.reserve(4, 100) is None
    with pytest.raises(ValueError, match="never fit"):
        budget.seconds_until_room(11)


def test_tokens_per_day_are_settled_with_real_usage_and_reset_at_utc_midnight() -> None:
    clock = Clock()
    budget = Budget(max_requests_per_minute=1000, max_tokens_per_day=1000, clock=clock)
    assert budget.reserve(1, 800) is None
    assert budget.refusal(1, 300) is Limit.TOKENS_PER_DAY
    budget.settle(reserved_tokens=800, used_tokens=500)  # the estimate was high
    assert budget.tokens_today == 500
    assert budget.reserve(1, 300) is None
    assert budget.reserve(1, 300) is Limit.TOKENS_PER_DAY
    clock.now = 11 * DAY  # midnight UTC
    assert budget.tokens_today == 0
    assert budget.reserve(1, 300) is None


def test_the_daily_limit_is_named_before_the_minute_one() -> None:
    budget = Budget(max_requests_per_minute=1, max_tokens_per_day=10, clock=Clock())
    assert budget.reserve(1, 5) is None
    assert budget.refusal(1, 10) is Limit.TOKENS_PER_DAY


def test_a_completion_reports_text_and_usage_and_sends_the_key(server: OpenAIServer) -> None:
    completion = complete(config(server))
    assert completion.text == "Paris."
    assert completion.prompt_tokens > 0 and completion.completion_tokens == len("Paris.") // 4 + 1
    assert completion.finish_reason == "stop" and completion.usage_reported and not completion.cut_off
    (request,) = server.requests(CHAT_PATH)
    assert request.headers["authorization"] == "Bearer sk-test-secret"
    assert request.body["model"] == "gpt-4o-mini"
    assert request.body["temperature"] == 0.7 and request.body["max_tokens"] == 50
    assert request.body["messages"] == MESSAGES
    assert "response_format" not in request.body


def test_an_answer_cut_short_of_max_tokens_ran_out_of_context_window(server: OpenAIServer) -> None:
    server.answer("Paris is the", finish_reason="length")  # 4 tokens of the 50 asked for
    completion = complete(config(server))
    assert completion.cut_off and completion.out_of_room(50) and not completion.out_of_room(4)


def test_without_usage_the_tokens_are_estimated_and_a_cut_is_taken_for_max_tokens(server: OpenAIServer) -> None:
    server.report_usage = False
    server.answer("Paris is the", finish_reason="length")
    completion = complete(config(server))
    assert not completion.usage_reported and completion.completion_tokens == len("Paris is the") // 4 + 1
    assert completion.prompt_tokens > 0
    assert completion.cut_off and not completion.out_of_room(50)  # an estimate cannot tell the two apart


def test_json_mode_and_a_configured_model(server: OpenAIServer) -> None:
    complete(config(server, model="judge-model"), json_mode=True)
    (request,) = server.requests(CHAT_PATH)
    assert request.body["model"] == "judge-model"  # the config's model wins over the call's
    assert request.body["response_format"] == {"type": "json_object"}


def test_no_model_anywhere_is_an_error(server: OpenAIServer) -> None:
    with pytest.raises(ValueError, match="no model"):
        complete(config(server), model="")


def test_a_429_is_retried_after_retry_after(server: OpenAIServer) -> None:
    server.script(CHAT_PATH, rate_limited(), rate_limited())
    assert complete(config(server, max_retries=2)).text == "Paris."
    assert len(server.requests(CHAT_PATH)) == 3


def test_a_timeout_is_retried(server: OpenAIServer) -> None:
    server.answer("too late", delay=1.5)
    assert complete(config(server, timeout_seconds=0.3, max_retries=1)).text == "Paris."
    assert len(server.requests(CHAT_PATH)) == 2


def test_retries_run_out(server: OpenAIServer) -> None:
    server.script(CHAT_PATH, *(rate_limited() for _ in range(3)))
    with pytest.raises(openai.RateLimitError):
        complete(config(server, max_retries=1))
    assert len(server.requests(CHAT_PATH)) == 2


def test_the_key_comes_from_a_secret_file_and_never_shows(
    server: OpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "halluwatch_consistency__llm__api_key").write_text("sk-from-file\n")
    monkeypatch.setenv(SECRETS_DIR_ENV, str(tmp_path))
    settings = load_settings(consistency={"llm": {"base_url": server.base_url}})
    with caplog.at_level(logging.DEBUG):
        complete(settings.consistency.llm)
    (request,) = server.requests(CHAT_PATH)
    assert request.headers["authorization"] == "Bearer sk-from-file"
    assert "sk-from-file" not in repr(settings) and "sk-from-file" not in str(settings.model_dump())
    assert "sk-from-file" not in caplog.text
