from __future__ import annotations

import json
import subprocess
import sys
import uuid

import pytest
from pydantic import ValidationError

from detectors.llm_call import Message
from pipeline.config.sampled import ConsistencySettings, RiskRule
from pipeline.sampled.sampling import Sampler, trace_sampled
from tests.calls import make_llm_call

IDS = [uuid.UUID(int=i * 7919 + 17).hex for i in range(20_000)]
MEDICAL = RiskRule(name="regulated-domain", attribute="app.domain", values=["Medical", "legal"])


def call(trace_id: str = "ab" * 16, prompt: str = "What dose of ibuprofen is safe?", **attributes: object):
    return make_llm_call("Up to 1200 mg a day.", prompt, trace_id=trace_id, attributes=attributes)


def test_the_same_trace_id_gets_the_same_decision_in_another_process() -> None:
    # A different PYTHONHASHSEED per process: a decision built on hash() would differ.
    script = (
        "import json, sys; from pipeline.sampled.sampling import trace_sampled; "
        "print(json.dumps([trace_sampled(t, 0.1) for t in json.load(sys.stdin)]))"
    )
    ids = IDS[:2000]
    other = subprocess.run(
        [sys.executable, "-c", script],
        input=json.dumps(ids),
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONHASHSEED": "12345", "PATH": ""},
    )
    assert json.loads(other.stdout) == [trace_sampled(t, 0.1) for t in ids]
    assert trace_sampled(ids[0].upper(), 0.1) == trace_sampled(ids[0], 0.1)  # hex case does not matter


@pytest.mark.parametrize("rate", [0.01, 0.1, 0.5])
def test_the_sampled_share_is_close_to_the_rate(rate: float) -> None:
    sampled = sum(trace_sampled(t, rate) for t in IDS)
    expected = rate * len(IDS)
    assert abs(sampled - expected) < 4 * (expected * (1 - rate)) ** 0.5  # within 4 standard deviations


def test_rates_nest_and_the_ends_are_exact() -> None:
    low = {t for t in IDS if trace_sampled(t, 0.01)}
    high = {t for t in IDS if trace_sampled(t, 0.05)}
    assert low and low < high  # raising the rate keeps every trace sampled before
    assert not any(trace_sampled(t, 0.0) for t in IDS)
    assert all(trace_sampled(t, 1.0) for t in IDS)


def test_attribute_rules_match_values_case_insensitively() -> None:
    sampler = Sampler(1.0, [MEDICAL])
    assert sampler.rule_for(call(**{"app.domain": "medical"})) == "regulated-domain"
    assert sampler.rule_for(call(**{"app.domain": "LEGAL"})) == "regulated-domain"
    assert sampler.rule_for(call(**{"app.domain": "gaming"})) is None
    assert sampler.rule_for(call()) is None


def test_an_attribute_rule_without_values_needs_the_attribute_present() -> None:
    sampler = Sampler(1.0, [RiskRule(name="tenant-flagged", attribute="app.high_risk")])
    assert sampler.rule_for(call(**{"app.high_risk": False})) == "tenant-flagged"
    assert sampler.rule_for(call(**{"app.other": True})) is None


def test_keyword_rules_match_whole_words_of_the_prompt_and_instructions() -> None:
    sampler = Sampler(1.0, [RiskRule(name="money", keywords=["loan", "tax return", "401(k)"])])
    assert sampler.rule_for(call(prompt="Should I take a LOAN for this?")) == "money"
    assert sampler.rule_for(call(prompt="How do I file my tax return?")) == "money"
    assert sampler.rule_for(call(prompt="Can I roll over my 401(k)?")) == "money"
    assert sampler.rule_for(call(prompt="Where is the loaned book?")) is None  # not a whole word
    in_instructions = make_llm_call("Sure.", "Hi", system_instructions="You advise on each loan application.")
    assert Sampler(1.0, [RiskRule(name="money", keywords=["loan"])]).rule_for(in_instructions) == "money"


def test_keywords_are_not_looked_for_in_the_answer_or_the_sources() -> None:
    sampler = Sampler(1.0, [RiskRule(name="money", keywords=["loan"])])
    assert sampler.rule_for(make_llm_call("Take a loan.", "What should I do?")) is None


def test_a_rule_with_attribute_and_keywords_needs_both() -> None:
    rule = RiskRule(name="medical-dosage", attribute="app.domain", values=["medical"], keywords=["dose"])
    sampler = Sampler(1.0, [rule])
    assert sampler.rule_for(call(**{"app.domain": "medical"})) == "medical-dosage"
    assert sampler.rule_for(call(prompt="What are the symptoms of flu?", **{"app.domain": "medical"})) is None
    assert sampler.rule_for(call(**{"app.domain": "legal"})) is None


def test_the_first_matching_rule_names_the_sample() -> None:
    sampler = Sampler(1.0, [RiskRule(name="keyword", keywords=["ibuprofen"]), MEDICAL])
    assert sampler.rule_for(call(**{"app.domain": "medical"})) == "keyword"


def test_only_the_trace_share_of_high_risk_calls_is_sampled() -> None:
    sampler = Sampler(0.1, [MEDICAL])
    decisions = {t: sampler.rule_for(call(t, **{"app.domain": "medical"})) for t in IDS[:3000]}
    assert {t for t, rule in decisions.items() if rule} == {t for t in IDS[:3000] if trace_sampled(t, 0.1)}


def test_calls_without_content_are_not_sampled() -> None:
    empty = make_llm_call("", "", output_messages=(Message("assistant", ""),), attributes={"app.domain": "medical"})
    assert Sampler(1.0, [MEDICAL]).rule_for(empty) is None


def test_rules_and_settings_are_validated() -> None:
    with pytest.raises(ValidationError, match="needs an attribute or keywords"):
        RiskRule(name="nothing")
    with pytest.raises(ValidationError, match="values but no attribute"):
        RiskRule(name="values-only", values=["medical"], keywords=["x"])
    with pytest.raises(ValidationError, match="below the 6 requests"):
        ConsistencySettings.model_validate({"claims": {"enabled": True}, "llm": {"max_requests_per_minute": 5}})
    with pytest.raises(ValidationError, match="both self_consistency and claims are off"):
        ConsistencySettings.model_validate({"enabled": True, "self_consistency": {"enabled": False}})
