"""The claims scorer: parsing the judge's output, and judging through the real openai library."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import pytest
from pydantic import SecretStr

from detectors.base import DetectorResult, DetectorStatus
from detectors.claims import ClaimsConfig
from detectors.claims.detector import (
    ClaimsDetector,
    JudgeOutputError,
    Verdict,
    parse_claims,
    parse_json_object,
    parse_verdicts,
)
from detectors.llm_call import LLMCall, Source
from detectors.models.chat import USAGE_KEY
from pipeline.alerting.alert import DetectorEvidence
from pipeline.alerting.render import evidence_lines
from pipeline.config.sampled import LLMEndpointConfig
from pipeline.sampled.llm_client import LLMClient
from tests.calls import make_llm_call
from tests.openai_server import CHAT_PATH, OpenAIServer

CONTEXT = "Employees accrue 25 days of paid vacation per year. Up to 5 unused days carry over."
CALL = make_llm_call(
    "You get 25 vacation days a year. Unused days are paid out at 150%. Up to 5 days carry over.",
    "How does vacation work?",
    [Source("hr-3", CONTEXT)],
    model="gpt-4o-mini",
)
CLAIMS = ["Employees get 25 vacation days a year.", "Unused days are paid out at 150%.", "Up to 5 days carry over."]


def verdicts(*pairs: tuple[str, str]) -> str:
    return json.dumps(
        {
            "verdicts": [
                {"claim": c, "verdict": v, "reason": f"because {v}"} for c, v in zip(CLAIMS, pairs, strict=False)
            ]
        }
    )


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as server:
        yield server


def judge(server: OpenAIServer, call: LLMCall = CALL, **config: object) -> DetectorResult:
    async def run() -> DetectorResult:
        client = LLMClient(LLMEndpointConfig(base_url=server.base_url, api_key=SecretStr("test")))
        try:
            return await ClaimsDetector(ClaimsConfig(enabled=True, **config), 0.3, client).evaluate(call)
        finally:
            await client.close()

    return asyncio.run(run())


@pytest.mark.parametrize(
    "text",
    [
        '{"claims": ["a"]}',
        'Sure! Here you go:\n```json\n{"claims": ["a"]}\n```\nAnything else?',
        'The claims are {"claims": ["a"]} as requested.',
        '{not json} then {"claims": ["a"]}',
    ],
)
def test_a_json_object_is_found_bare_fenced_or_amid_prose(text: str) -> None:
    assert parse_json_object(text) == {"claims": ["a"]}


@pytest.mark.parametrize("text", ["", "no json here", "[1, 2, 3]", '{"claims": ["unterminated'])
def test_text_without_a_json_object_is_a_judge_error(text: str) -> None:
    with pytest.raises(JudgeOutputError, match="no JSON object"):
        parse_json_object(text)


def test_claims_are_trimmed_and_capped() -> None:
    assert parse_claims('{"claims": [" a ", "", "b", "c"]}', max_claims=2) == ["a", "b"]
    with pytest.raises(JudgeOutputError, match="wrong shape: claims"):
        parse_claims('{"claims": "a and b"}', max_claims=5)
    with pytest.raises(JudgeOutputError, match="wrong shape: claims"):
        parse_claims('{"statements": ["a"]}', max_claims=5)


def test_verdicts_are_normalised_and_must_match_the_claims() -> None:
    judged = parse_verdicts(verdicts(" Supported", "CONTRADICTED", "unsupported"), CLAIMS)
    assert [c.verdict for c in judged] == [Verdict.SUPPORTED, Verdict.CONTRADICTED, Verdict.UNSUPPORTED]
    assert [c.claim for c in judged] == CLAIMS  # the extracted claim, whatever the judge echoed
    with pytest.raises(JudgeOutputError, match="2 verdicts for 3 claims"):
        parse_verdicts(verdicts("supported", "supported"), CLAIMS)
    with pytest.raises(JudgeOutputError, match=r"wrong shape: verdicts\.0\.verdict"):
        parse_verdicts(verdicts("yes", "no", "maybe"), CLAIMS)


def test_claims_are_judged_against_the_context(server: OpenAIServer) -> None:
    server.answer(json.dumps({"claims": CLAIMS}), verdicts("supported", "contradicted", "supported"))
    result = judge(server)
    assert result.status is DetectorStatus.OK
    assert result.score == pytest.approx(1 / 3) and result.flagged and result.severity == 4
    assert [c["verdict"] for c in result.evidence["claims"]] == ["supported", "contradicted", "supported"]
    assert result.evidence["claims"][1] == {
        "claim": CLAIMS[1],
        "verdict": "contradicted",
        "reason": "because contradicted",
    }
    assert result.evidence["contradicted"] == 1 and result.evidence["supported"] == 2
    assert result.summary == result.evidence["reason"]
    assert "1 of 3 claims" in result.summary and "150%" in result.summary
    assert result.evidence[USAGE_KEY]["requests"] == 2
    extract, verdict = server.requests(CHAT_PATH)
    assert all(
        r.body["response_format"] == {"type": "json_object"} and r.body["temperature"] == 0 for r in (extract, verdict)
    )
    assert CALL.answer in extract.body["messages"][1]["content"]
    assert (
        CONTEXT in verdict.body["messages"][1]["content"] and "2. Unused days" in verdict.body["messages"][1]["content"]
    )


def test_only_unsupported_claims_are_severity_two(server: OpenAIServer) -> None:
    server.answer(json.dumps({"claims": CLAIMS}), verdicts("unsupported", "unsupported", "supported"))
    result = judge(server)
    assert result.flagged and result.severity == 2 and result.score == pytest.approx(2 / 3)


def test_supported_claims_are_not_flagged(server: OpenAIServer) -> None:
    server.answer(json.dumps({"claims": CLAIMS[:1]}), verdicts("supported"))
    result = judge(server, json_mode=False)
    assert result.score == 0 and not result.flagged and "all 1 claims are supported" in result.summary
    assert all("response_format" not in r.body for r in server.requests(CHAT_PATH))


def test_no_claims_scores_zero_and_says_so(server: OpenAIServer) -> None:
    server.answer('{"claims": []}')
    result = judge(server)
    assert result.status is DetectorStatus.OK and result.score == 0 and not result.flagged
    assert "no factual claims" in result.summary
    assert len(server.requests(CHAT_PATH)) == 1  # nothing to judge: no verdict request


@pytest.mark.parametrize(
    "answers",
    [
        ["I think the answer has some claims."],
        [json.dumps({"claims": CLAIMS}), "All supported!"],
        [json.dumps({"claims": CLAIMS}), verdicts("supported", "true", "false")],
    ],
)
def test_malformed_judge_output_is_an_error_finding(server: OpenAIServer, answers: list[str]) -> None:
    server.answer(*answers)
    result = judge(server)
    assert result.status is DetectorStatus.ERROR and not result.flagged
    assert result.summary.startswith("judge output unusable")
    assert result.evidence[USAGE_KEY]["requests"] == len(answers)  # the unusable answers were paid for
    assert result.evidence[USAGE_KEY]["tokens"] > 0


def test_a_judge_answer_cut_off_at_max_tokens_says_so(server: OpenAIServer) -> None:
    server.answer('{"claims": ["Employees get 25 vacation days a year.", "Unused days', finish_reason="length")
    result = judge(server, max_tokens=10)  # the fake reports 17 completion tokens: cut at max_tokens
    assert result.status is DetectorStatus.ERROR and not result.flagged
    assert "was cut off at max_tokens=10 (finish_reason=length): no JSON object" in result.summary
    assert result.evidence[USAGE_KEY]["requests"] == 1


def test_a_judge_answer_cut_short_by_the_context_window_says_so(server: OpenAIServer) -> None:
    server.answer('{"claims": ["Employees get', finish_reason="length")  # 7 of the 800 tokens asked for
    result = judge(server)
    assert result.status is DetectorStatus.ERROR
    assert "ran out of the endpoint's context window after 7 tokens (finish_reason=length)" in result.summary


def test_an_empty_judge_answer_is_an_error_finding_that_says_so(server: OpenAIServer) -> None:
    server.answer("")
    result = judge(server)
    assert result.status is DetectorStatus.ERROR
    assert result.summary == "judge output unusable: the judge's answer is empty (finish_reason=stop)"


def test_calls_without_answer_or_context_are_skipped(server: OpenAIServer) -> None:
    no_context = make_llm_call("It was built in 1889.", "When was the Eiffel Tower built?")
    no_answer = make_llm_call("", "Summarise the policy.", [Source("p", CONTEXT)])
    for call in (no_context, no_answer):
        assert judge(server, call).status is DetectorStatus.SKIPPED
    assert server.requests(CHAT_PATH) == []


def test_alerts_list_the_claims_not_supported_contradictions_first(server: OpenAIServer) -> None:
    server.answer(json.dumps({"claims": CLAIMS}), verdicts("unsupported", "contradicted", "supported"))
    result = judge(server)
    lines = evidence_lines(DetectorEvidence("claims", result.score, 0.3, result.severity, "", evidence=result.evidence))
    assert lines == [
        f'contradicted claim: "{CLAIMS[1]}" ("because contradicted")',
        f'unsupported claim: "{CLAIMS[0]}" ("because unsupported")',
    ]
