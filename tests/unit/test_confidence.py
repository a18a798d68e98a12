"""Confidence anomaly detector: entropy math, the score map, skips, malformed logprobs, evidence."""

from __future__ import annotations

import math
from itertools import pairwise

import pytest

from detectors.base import DetectorStatus
from detectors.confidence import ConfidenceConfig
from detectors.confidence.detector import ConfidenceDetector, anomaly_score, mean_entropy, position_entropy
from detectors.config import ModelBaseline
from detectors.llm_call import LLMCall, TokenLogprob, TopLogprob
from tests.calls import make_llm_call


def uniform(token: str, k: int) -> TokenLogprob:
    """A position whose top-k are equally likely, the sampled token among them."""
    alternatives = [token] + [f" alt{i}" for i in range(k - 1)]
    return TokenLogprob(token, math.log(1 / k), tuple(TopLogprob(t, math.log(1 / k)) for t in alternatives))


def peaked(token: str, p: float = 0.98) -> TokenLogprob:
    rest = (1 - p) / 2
    top = (TopLogprob(token, math.log(p)), TopLogprob(" x", math.log(rest)), TopLogprob(" y", math.log(rest)))
    return TokenLogprob(token, math.log(p), top)


def call(logprobs: tuple[TokenLogprob, ...], answer: str | None = None, model: str = "m1") -> LLMCall:
    text = "".join(p.token for p in logprobs) if answer is None else answer
    return make_llm_call(text, model=model, logprobs=logprobs)


BASELINE = ModelBaseline(mean=0.2, stdev=0.1, n=100, version="entropy-test")


def detector(threshold: float = 0.5, **config: object) -> ConfidenceDetector:
    return ConfidenceDetector(ConfidenceConfig.model_validate({"baselines": {"m1": BASELINE}, **config}), threshold)


@pytest.mark.parametrize("k", [1, 2, 3, 5, 10])
def test_uniform_top_k_has_entropy_log_k(k: int) -> None:
    assert position_entropy(uniform(" a", k), top_k=k) == pytest.approx(math.log(k))


def test_only_the_top_k_alternatives_count() -> None:
    assert position_entropy(uniform(" a", 8), top_k=3) == pytest.approx(math.log(3))


def test_sampled_token_outside_the_top_k_is_added() -> None:
    top = (TopLogprob(" a", math.log(0.4)), TopLogprob(" b", math.log(0.4)))
    position = TokenLogprob(" z", math.log(0.2), top)
    expected = -sum(p * math.log(p) for p in (0.4, 0.4, 0.2))
    assert position_entropy(position, top_k=2) == pytest.approx(expected)


def test_alternatives_are_renormalized() -> None:
    # Two alternatives at 0.3 each are a uniform pair once renormalized: log 2.
    top = (TopLogprob(" a", math.log(0.3)), TopLogprob(" b", math.log(0.3)))
    assert position_entropy(TokenLogprob(" a", math.log(0.3), top), top_k=5) == pytest.approx(math.log(2))


def test_mean_entropy_needs_min_tokens() -> None:
    positions = (uniform(" a", 4), uniform(" b", 2))
    assert mean_entropy(positions, top_k=5, min_tokens=2) == pytest.approx((math.log(4) + math.log(2)) / 2)
    assert mean_entropy(positions, top_k=5, min_tokens=3) is None


def test_score_is_zero_at_baseline_half_at_the_scale_and_monotone() -> None:
    assert anomaly_score(0.0, 2.5) == 0.0
    assert anomaly_score(2.5, 2.5) == pytest.approx(0.5)
    assert anomaly_score(-2.5, 2.5) == pytest.approx(0.5)
    scores = [anomaly_score(z / 4, 2.5) for z in range(0, 80)]
    assert all(a < b for a, b in pairwise(scores))
    assert all(0.0 <= s < 1.0 for s in scores)


def test_no_logprobs_is_skipped() -> None:
    [result] = detector().detect_batch([call(())])
    assert result.status is DetectorStatus.SKIPPED
    assert "no logprobs" in result.summary


def test_model_without_baseline_is_skipped_naming_it() -> None:
    [result] = detector().detect_batch([call(tuple(uniform(" a", 3) for _ in range(6)), model="other")])
    assert result.status is DetectorStatus.SKIPPED
    assert "'other'" in result.summary


def test_default_baseline_applies_to_unknown_models() -> None:
    config = ConfidenceConfig(default_baseline=BASELINE)
    [result] = ConfidenceDetector(config, 0.5).detect_batch([call(tuple(peaked(" a") for _ in range(6)), model="x")])
    assert result.status is DetectorStatus.OK
    assert result.evidence["baseline_model"] == "default"


def test_too_few_usable_tokens_is_skipped() -> None:
    [result] = detector(min_tokens=5).detect_batch([call(tuple(uniform(" a", 3) for _ in range(4)))])
    assert result.status is DetectorStatus.SKIPPED


def test_z_and_score_grow_with_entropy() -> None:
    results = detector().detect_batch([call(tuple(uniform(" a", k) for _ in range(6))) for k in (2, 3, 4, 5)])
    zs = [r.evidence["z"] for r in results]
    scores = [r.score for r in results]
    assert zs == sorted(zs) and scores == sorted(scores)
    assert results[0].evidence["mean_entropy"] == pytest.approx(math.log(2), abs=1e-6)
    assert results[0].evidence["z"] == pytest.approx((math.log(2) - 0.2) / 0.1, abs=1e-3)


def test_response_at_the_baseline_is_not_flagged_and_far_one_is() -> None:
    near, far = detector().detect_batch(
        [call(tuple(peaked(" a", 0.93) for _ in range(6))), call(tuple(uniform(" a", 5) for _ in range(6)))]
    )
    assert near.status is DetectorStatus.OK and not near.flagged and near.severity == 0
    assert far.flagged and far.severity == 2 and far.evidence["z"] > 10


def test_too_confident_is_anomalous_too() -> None:
    [result] = detector().detect_batch([call(tuple(peaked(" a", 0.9999) for _ in range(6)))])
    assert result.evidence["z"] < -1.9
    assert result.score == pytest.approx(anomaly_score(result.evidence["z"], 2.5), abs=1e-4)


def test_lowest_span_and_spans_point_into_the_answer() -> None:
    positions = (peaked("The"), peaked(" tower"), uniform(" is", 4), uniform(" 500", 5), peaked(" m"), uniform(".", 3))
    answer = "The tower is 500 m."
    [result] = detector().detect_batch([call(positions, answer)])
    evidence = result.evidence
    assert evidence["min_token_prob"] == pytest.approx(0.2)
    lowest = evidence["lowest_span"]
    assert (lowest["text"], lowest["start"], lowest["end"]) == (" is 500", 9, 16)
    assert lowest["mean_prob"] == pytest.approx((0.25 + 0.2) / 2)
    assert [(s["start"], s["end"]) for s in evidence["spans"]] == [(9, 16), (18, 19)]
    assert all(answer[s["start"] : s["end"]] == s["text"] for s in evidence["spans"])


def test_tokens_that_do_not_spell_the_answer_give_text_only() -> None:
    positions = tuple(uniform(" a", 3) for _ in range(6))
    [result] = detector().detect_batch([call(positions, answer="something else")])
    assert result.evidence["spans"] == []
    assert set(result.evidence["lowest_span"]) == {"text", "mean_prob"}


def test_no_low_probability_run_points_at_the_least_likely_token() -> None:
    positions = (peaked(" a", 0.99), peaked(" b", 0.9), peaked(" c", 0.99), peaked(" d"), peaked(" e"))
    [result] = detector().detect_batch([call(positions)])
    assert result.evidence["spans"] == []
    assert result.evidence["lowest_span"]["text"] == " b"


@pytest.mark.parametrize(
    "bad",
    [
        TokenLogprob(" a", math.nan, (TopLogprob(" a", math.nan),)),
        TokenLogprob(" a", 3.0, (TopLogprob(" a", 2.0), TopLogprob(" b", 5.0))),
        TokenLogprob(" a", -math.inf, (TopLogprob(" a", -math.inf),)),
        TokenLogprob(" a", -0.5, ()),
        TokenLogprob("", math.inf, (TopLogprob("", math.nan), TopLogprob(" b", -1.0))),
    ],
)
def test_malformed_logprobs_never_raise(bad: TokenLogprob) -> None:
    results = detector(min_tokens=1).detect_batch([call((bad,) * 3), call((bad, *(uniform(" a", 3),) * 3))])
    assert results[1].status is DetectorStatus.OK
    for result in results:
        assert result.status in (DetectorStatus.OK, DetectorStatus.SKIPPED)
        assert 0.0 <= result.score <= 1.0 and not math.isnan(result.score)


def test_tiny_positive_logprobs_from_rounding_count_as_certain() -> None:
    position = TokenLogprob(" a", 1e-5, (TopLogprob(" a", 1e-5), TopLogprob(" b", -20.0)))
    assert position_entropy(position, top_k=5) == pytest.approx(0.0, abs=1e-6)


def test_config_rejects_unknown_fields_and_bad_thresholds() -> None:
    with pytest.raises(ValueError, match="topk"):
        ConfidenceConfig.model_validate({"topk": 5})
    with pytest.raises(ValueError, match="threshold"):
        ConfidenceDetector(ConfidenceConfig(), 1.5)
