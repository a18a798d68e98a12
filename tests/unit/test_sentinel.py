"""Fact-check sentinel: obvious prompts, the unverified_factual finding, the typed verdict."""

from __future__ import annotations

from pathlib import Path

import pytest

from detectors.base import DetectorStatus, SentinelVerdict
from detectors.llm_call import LLMCall, Message, Source
from detectors.sentinel import SentinelConfig
from detectors.sentinel.detector import LABELS, SentinelDetector, SentinelModel, SentinelModelError, needs_fact_check
from tests.calls import make_llm_call


@pytest.fixture(scope="module")
def detector() -> SentinelDetector:
    return SentinelDetector(SentinelConfig(), threshold=0.3)


def llm_call(prompt: str, answer: str = "An answer.", **fields: object) -> LLMCall:
    return make_llm_call(answer, **{"input_messages": (Message("user", prompt),), **fields})


@pytest.mark.parametrize(
    ("prompt", "label"),
    [
        ("When was Albert Einstein born?", "factual"),
        ("What is the population of Lagos?", "factual"),
        ("Summarize the following news article:\n\nShares of Acme rose 4% on Monday after...", "factual"),
        ("Write a poem about autumn leaves.", "creative"),
        ("Write a short story about a lonely robot.", "creative"),
        ("Write a Python function that returns the median of a list.", "code"),
        ("Fix this error: IndexError: list index out of range", "code"),
        ("What do you think about remote work?", "opinion"),
        ("Should I buy a house or keep renting?", "opinion"),
        ("Hi there, how are you?", "chitchat"),
        ("Thanks, have a great day!", "chitchat"),
    ],
)
def test_obvious_prompts(detector: SentinelDetector, prompt: str, label: str) -> None:
    [result] = detector.detect_batch([llm_call(prompt)])
    assert result.evidence["label"] == label
    assert result.evidence["needs_fact_check"] is (label == "factual")


def test_factual_question_without_context_is_unverified_factual(detector: SentinelDetector) -> None:
    [result] = detector.detect_batch([llm_call("Who was the first woman to win a Nobel Prize?", "Marie Curie.")])
    assert result.status is DetectorStatus.OK
    assert result.flagged and result.summary == "unverified_factual" and result.severity == 1
    assert result.evidence["has_context"] is False
    assert result.score >= 0.3  # the probability that the prompt is factual


def test_factual_question_with_context_is_not_flagged(detector: SentinelDetector) -> None:
    question = "When was the Eiffel Tower built?"
    pasted = (
        "Context:\n[1] The Eiffel Tower was built between 1887 and 1889 as the entrance arch to the 1889 "
        "World's Fair. It was designed by the engineering company of Gustave Eiffel and is 330 metres tall, "
        "about the height of an 81-storey building.\n\nQuestion: " + question
    )
    with_sources = llm_call(question, sources=(Source("1", "The tower was built in 1887-1889."),))
    results = detector.detect_batch([llm_call(pasted), with_sources])
    for result in results:
        assert result.evidence == {**result.evidence, "label": "factual", "has_context": True, "needs_fact_check": True}
        assert not result.flagged and result.severity == 0


@pytest.mark.parametrize(
    "prompt",
    [
        "Extract the order from this email: 'Please send 3 boxes of A4 paper and 2 toner cartridges to Leeds.'",
        'Summarize this: "The council approved a budget of 4.2 billion, raising transit funding by 12 percent."',
        "What does this log say?\n```\nERROR 503 upstream timed out after 30 s on host web-3 at 04:12\n```",
    ],
)
def test_quoted_material_in_the_prompt_is_context(detector: SentinelDetector, prompt: str) -> None:
    [result] = detector.detect_batch([llm_call(prompt)])
    assert result.evidence["has_context"] is True and not result.flagged


def test_short_quotes_and_apostrophes_are_not_context(detector: SentinelDetector) -> None:
    prompts = ['Who wrote "One Hundred Years of Solitude"?', "What's the capital of Peru? It's for a quiz I'm doing."]
    assert [r.evidence["has_context"] for r in detector.detect_batch([llm_call(p) for p in prompts])] == [False, False]


def test_non_factual_prompts_skip_fact_checking(detector: SentinelDetector) -> None:
    [result] = detector.detect_batch([llm_call("Write a haiku about the sea.")])
    assert not result.flagged and not needs_fact_check(result)


def test_tool_call_answer_is_not_an_unverified_answer(detector: SentinelDetector) -> None:
    [result] = detector.detect_batch([llm_call("What's the weather in Paris right now?", answer="")])
    assert result.evidence["needs_fact_check"] and not result.flagged


def test_no_prompt_is_skipped_and_still_checked(detector: SentinelDetector) -> None:
    results = detector.detect_batch([llm_call(""), llm_call("Write a limerick about cheese.")])
    assert results[0].status is DetectorStatus.SKIPPED and needs_fact_check(results[0])
    assert results[1].evidence["label"] == "creative"


def test_system_instructions_are_a_weak_signal() -> None:
    model = SentinelModel.load()
    prompt = ["Can you help me with this?"]
    plain = model.probabilities(prompt)[0]
    coding = model.probabilities(prompt, ["You are a Python coding assistant. Write code and fix bugs."])[0]
    code = LABELS.index("code")
    assert coding[code] > plain[code]
    clear = model.probabilities(["Write a poem about the moon."], ["You are a coding assistant."])[0]
    assert LABELS[int(clear.argmax())] == "creative"


def test_uncertain_prediction_is_checked_anyway() -> None:
    sure = SentinelDetector(SentinelConfig(min_confidence=1.0), threshold=0.99)
    [result] = sure.detect_batch([llm_call("Write a haiku about the sea.")])
    assert result.evidence["needs_fact_check"] and not result.flagged


def test_batch_order_and_empty_batch(detector: SentinelDetector) -> None:
    prompts = ["Hello!", "Who wrote Hamlet?", "Write a sonnet about rain."]
    results = detector.detect_batch([llm_call(p) for p in prompts])
    assert [r.evidence["label"] for r in results] == ["chitchat", "factual", "creative"]
    assert detector.detect_batch([]) == []


def test_bad_model_file_is_named_when_started(tmp_path: Path) -> None:
    bad = tmp_path / "model.json"
    bad.write_text('{"format": 99}')
    detector = SentinelDetector(SentinelConfig(model_path=bad), 0.5)  # loads nothing yet
    with pytest.raises(SentinelModelError, match=str(bad)):
        detector.start()


def test_the_verdict_is_typed_and_matches_the_stored_evidence(detector: SentinelDetector) -> None:
    [result] = detector.detect_batch([llm_call("Who was the first woman to win a Nobel Prize?", "Marie Curie.")])
    assert result.sentinel == SentinelVerdict(
        label="factual",
        confidence=pytest.approx(result.evidence["probability"], abs=1e-4),
        needs_fact_check=True,
        has_context=False,
    )
    assert result.evidence["label"] == result.sentinel.label


def test_close_drops_the_model_and_the_next_batch_loads_it_again() -> None:
    detector = SentinelDetector(SentinelConfig(), threshold=0.3)
    detector.start()
    first = detector.detect_batch([llm_call("Write a haiku about the sea.")])
    detector.close()
    assert detector._model is None
    assert detector.detect_batch([llm_call("Write a haiku about the sea.")]) == first
