"""Fact-check sentinel: training, held-out accuracy, obvious prompts, the unverified_factual finding."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from detectors.base import DetectorStatus
from detectors.llm_call import LLMCall, Message, Source
from detectors.sentinel import (
    LABELS,
    SentinelConfig,
    SentinelDetector,
    SentinelModel,
    SentinelModelError,
    needs_fact_check,
    read_prompts,
    train_sentinel,
)
from tests.calls import make_llm_call

PROMPTS = Path(__file__).parents[2] / "detectors" / "data" / "sentinel_prompts.jsonl"

# Held-out floors.  Over eight stratified 80/20 splits of the shipped prompt set the
# 5-class accuracy ranged 0.889-0.941 (mean 0.91) and factual-vs-rest was about 0.93;
# with 135 held-out prompts one split's standard error is about 0.025, so the floors
# sit three to four standard errors under the mean: a failure means the model or the
# features regressed, not an unlucky split.
ACCURACY_FLOOR = 0.80
FACTUAL_ACCURACY_FLOOR = 0.85


@pytest.fixture(scope="module")
def detector() -> SentinelDetector:
    return SentinelDetector(SentinelConfig(), threshold=0.3)


def llm_call(prompt: str, answer: str = "An answer.", **fields: object) -> LLMCall:
    return make_llm_call(answer, **{"input_messages": (Message("user", prompt),), **fields})


def test_prompt_set_is_large_varied_and_labelled() -> None:
    examples = read_prompts(PROMPTS)
    labels = [label for _, label in examples]
    assert len(examples) >= 400
    assert all(labels.count(label) >= 80 for label in LABELS)
    assert len({text for text, _ in examples}) == len(examples)


def test_training_is_deterministic(tmp_path: Path) -> None:
    subset = tmp_path / "subset.jsonl"
    subset.write_text("".join(PROMPTS.read_text(encoding="utf-8").splitlines(keepends=True)[::3]), encoding="utf-8")
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    assert train_sentinel(subset, first, 0.25, seed=7) == train_sentinel(subset, second, 0.25, seed=7)
    assert first.read_bytes() == second.read_bytes()


def test_shipped_model_is_the_one_the_prompt_set_trains(tmp_path: Path) -> None:
    report = train_sentinel(PROMPTS, tmp_path / "model.json", holdout_fraction=0.2, seed=0)
    assert report.accuracy >= ACCURACY_FLOOR
    assert report.factual_accuracy >= FACTUAL_ACCURACY_FLOOR
    assert set(report.recall) == set(LABELS) and min(report.recall.values()) >= 0.6
    assert report.n_holdout >= 100
    assert SentinelModel.load().training == json.loads((tmp_path / "model.json").read_text())["training"]


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


def test_bad_model_and_prompt_files_name_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "model.json"
    bad.write_text('{"format": 99}')
    with pytest.raises(SentinelModelError, match=str(bad)):
        SentinelDetector(SentinelConfig(model_path=bad), 0.5)
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"text": "hi", "label": "smalltalk"}\n')
    with pytest.raises(SentinelModelError, match=f"{prompts}:1"):
        read_prompts(prompts)
