"""Confidence anomaly detector (docs/detectors.md, seed 000).

When a model makes up what it has never seen, its token distribution often looks
unusual: flatter than usual (unsure) or, for confidently wrong answers, sharper than
usual.  The detector measures the mean per-position Shannon entropy of an answer and
reports how many of the model's own standard deviations it lies from that model's
baseline (``halluwatch baseline``, computed on labelled-good traffic).

Design choices, stated because each one shapes what the number means:

* **Entropy over the top-k, renormalized.**  Providers return only the k most likely
  alternatives per position, so the true entropy is unknowable; the entropy of the
  renormalized top-k is what every response of a model can be measured with alike.  The
  sampled token is added when it is not among the top-k (sampling at temperature can pick
  it).  A uniform top-k gives exactly ``log k`` nats.  Baselines must be computed with the
  same ``top_k``: the file written by ``halluwatch baseline`` records it.
* **Both directions count** (``|z|``): too sure is as anomalous as too unsure, as the seed
  notes ("2+2" answers are more certain than usual).  That also makes this a weak signal on
  its own — a detector to agree with others, not one to page on alone (severity 2).
* **Score** is ``1 - 2 ** (-|z| / z_at_half_score)``: monotone in ``|z|``, 0 at the
  baseline mean, 0.5 at ``|z| = z_at_half_score`` (default 2.5, the seed's flag point),
  approaching 1 far out.  The threshold itself comes from the calibration file (§7).
* **Malformed logprobs never raise**: non-finite values and clearly positive log
  probabilities are dropped, tiny positive ones (rounding) are clipped to 0; a position
  without usable alternatives does not count towards the entropy, and a call with too
  few usable positions is skipped, not scored.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import fmean
from typing import Any

from detectors.base import Detector, DetectorResult, checked_threshold
from detectors.confidence import DETECTOR, ConfidenceConfig
from detectors.llm_call import LLMCall, TokenLogprob
from detectors.spec import Ingredients
from detectors.text import evidence as shown

MAX_SPANS = 10  # low-confidence spans listed in the evidence, lowest first
_LOGPROB_ROUNDING = 1e-3  # providers round: log p a hair above 0 still means p = 1
_SEVERITY = 2  # unusual confidence hints at, never proves, a hallucination


def position_entropy(position: TokenLogprob, top_k: int) -> float | None:
    """Shannon entropy (nats) of one position's renormalized top-k; ``None`` when unusable."""
    alternatives: dict[str, float] = {}
    for alternative in position.top:
        logprob = clean_logprob(alternative.logprob)
        if logprob is not None:
            alternatives[alternative.token] = max(logprob, alternatives.get(alternative.token, -math.inf))
    if not alternatives:
        return None
    kept = sorted(alternatives.items(), key=lambda item: item[1], reverse=True)[:top_k]
    logprobs = [logprob for _, logprob in kept]
    sampled = clean_logprob(position.logprob)
    if sampled is not None and position.token not in dict(kept):
        logprobs.append(sampled)
    peak = max(logprobs)
    weights = [math.exp(logprob - peak) for logprob in logprobs]  # shifted: no underflow to 0/0
    total = sum(weights)
    return -sum(w / total * math.log(w / total) for w in weights if w > 0.0)


def mean_entropy(logprobs: Sequence[TokenLogprob], top_k: int, min_tokens: int) -> float | None:
    """Mean position entropy of a response; ``None`` with fewer than ``min_tokens`` usable positions.

    Shared by the detector and ``halluwatch baseline`` so both measure a response the same way.
    """
    entropies = [e for e in (position_entropy(p, top_k) for p in logprobs) if e is not None]
    return fmean(entropies) if len(entropies) >= min_tokens else None


def clean_logprob(logprob: float) -> float | None:
    """A usable log probability (<= 0), or ``None`` for NaN, infinities and positive values."""
    if not math.isfinite(logprob) or logprob > _LOGPROB_ROUNDING:
        return None
    return min(logprob, 0.0)


def anomaly_score(z: float, z_at_half_score: float) -> float:
    """Map ``|z|`` monotonically onto [0, 1): 0 at ``z = 0``, 0.5 at ``|z| = z_at_half_score``."""
    return 1.0 - math.pow(2.0, -abs(z) / z_at_half_score)


@dataclass(frozen=True, slots=True)
class _Run:
    """Consecutive answer tokens ``[first, last]`` whose probabilities are all low."""

    first: int
    last: int
    mean_prob: float


class ConfidenceDetector(Detector):
    """Flags answers whose mean token entropy is far from the model's baseline."""

    name = "confidence"
    version = "1.0.0"
    needs_context = False  # the model's own token probabilities are the evidence

    def __init__(self, config: ConfidenceConfig, threshold: float) -> None:
        self._config = config
        self._threshold = checked_threshold(threshold)

    def detect_batch(self, calls: Sequence[LLMCall]) -> list[DetectorResult]:
        """Score each call; a few float operations per token, nothing to batch."""
        return [self._detect(call) for call in calls]

    def _detect(self, call: LLMCall) -> DetectorResult:
        config = self._config
        if not call.logprobs:
            return self.skipped_result("no logprobs on the span", self._threshold)
        baseline_name = call.model if call.model in config.baselines else "default"
        baseline = config.baselines.get(call.model, config.default_baseline)
        if baseline is None:
            return self.skipped_result(f"no entropy baseline for model {call.model!r}", self._threshold)
        entropy = mean_entropy(call.logprobs, config.top_k, config.min_tokens)
        if entropy is None:
            return self.skipped_result(
                f"fewer than {config.min_tokens} positions with usable top-k logprobs", self._threshold
            )
        z = (entropy - baseline.mean) / baseline.stdev
        direction = "above" if z > 0 else "below"
        return self.scored_result(
            anomaly_score(z, config.z_at_half_score),
            self._threshold,
            severity=_SEVERITY,
            summary=f"mean entropy {entropy:.3f} nats, {abs(z):.1f} sd {direction} the {baseline_name} baseline",
            evidence={
                "mean_entropy": round(entropy, 6),
                "z": round(z, 4),
                "baseline_model": baseline_name,
                "baseline_version": baseline.version,
                **_probability_evidence(call, config.low_token_prob),
            },
        )


def _probability_evidence(call: LLMCall, low_token_prob: float) -> dict[str, Any]:
    """Min token probability, the lowest-confidence span and the low-probability spans."""
    tokens = [position.token for position in call.logprobs]
    probs = [_token_prob(position) for position in call.logprobs]
    usable = [(index, prob) for index, prob in enumerate(probs) if prob is not None]
    if not usable:
        return {"min_token_prob": None, "lowest_span": None, "spans": []}
    least_index, least_prob = min(usable, key=lambda item: item[1])
    runs = _low_runs(probs, low_token_prob)
    # Nothing below the cut: the single least likely token is still the best pointer.
    lowest = min(runs, key=lambda run: run.mean_prob) if runs else _Run(least_index, least_index, least_prob)
    starts = _token_starts(tokens, call.answer)
    listed = sorted(sorted(runs, key=lambda run: run.mean_prob)[:MAX_SPANS], key=lambda run: run.first)
    return {
        "min_token_prob": round(least_prob, 6),
        "lowest_span": {**_span(lowest, tokens, starts), "mean_prob": round(lowest.mean_prob, 6)},
        "spans": [_span(run, tokens, starts) for run in listed] if starts is not None else [],
    }


def _token_prob(position: TokenLogprob) -> float | None:
    logprob = clean_logprob(position.logprob)
    return None if logprob is None else math.exp(logprob)


def _low_runs(probs: Sequence[float | None], low_token_prob: float) -> list[_Run]:
    """Maximal runs of consecutive tokens below ``low_token_prob``; unusable tokens end a run."""
    runs: list[_Run] = []
    first: int | None = None
    total = 0.0
    for index, prob in enumerate([*probs, None]):
        if prob is not None and prob < low_token_prob:
            if first is None:
                first, total = index, 0.0
            total += prob
        elif first is not None:
            runs.append(_Run(first, index - 1, total / (index - first)))
            first = None
    return runs


def _token_starts(tokens: Sequence[str], answer: str) -> list[int] | None:
    """Char offset of each token in ``answer`` when the tokens spell (part of) it, else ``None``."""
    joined = "".join(tokens)
    base = answer.find(joined) if joined else -1
    if base < 0:
        return None
    starts = []
    for token in tokens:
        starts.append(base)
        base += len(token)
    return starts


def _span(run: _Run, tokens: Sequence[str], starts: Sequence[int] | None) -> dict[str, Any]:
    text = "".join(tokens[run.first : run.last + 1])
    if starts is None:
        return {"text": text}
    start = starts[run.first]
    return {"start": start, "end": start + len(text), "text": text}


def render_evidence(evidence: Mapping[str, Any]) -> list[str]:
    """Its evidence as lines for people, in alerts."""
    span = evidence.get("lowest_span")
    text = shown.quoted(span.get("text")) if isinstance(span, Mapping) else ""
    if text:
        prob = shown.number(span.get("mean_prob")) if isinstance(span, Mapping) else None
        scored = f" (mean token probability {prob:.3f})" if prob is not None else ""
        return [f"lowest-confidence span{scored}: {text}"]
    lowest = shown.number(evidence.get("min_token_prob"))
    return [f"lowest token probability {lowest:.3f}"] if lowest is not None else []


def build(ing: Ingredients) -> ConfidenceDetector:
    """The detector; baselines written in its settings win over a baselines file's."""
    config = ing.config(DETECTOR)
    baselines = {**ing.baselines, **config.baselines}
    return ConfidenceDetector(config.model_copy(update={"baselines": baselines}), ing.threshold)
