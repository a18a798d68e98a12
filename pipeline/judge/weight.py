"""How far the application's own model's judgment moves ``p_hallucination``: its weight, from the app's verdicts.

The judge's answer on a call is one more piece of evidence about it, and enters the
probability as evidence does in Bayes' rule: in logit space, its log-likelihood ratio is added,
``log(sensitivity / (1 - specificity))`` when it says "hallucinated" and
``log((1 - sensitivity) / specificity)`` when it says "faithful".  Adding it to the detectors'
logit assumes the judge's mistakes do not follow theirs (given the truth), which a model that
reads meaning, beside detectors that compare embeddings and values, comes closest to.

Two weights, not one ``log(A / (1 - A))``: LLM judges are rarely symmetric (many call anything
they cannot verify "hallucinated"), and a single weight would push faithful calls over a route's
minimum at the rate the judge over-calls.  Sensitivity is measured on hallucinated verdicts and
specificity on faithful ones, each shrunk toward the shipped prior, so the split costs no more
verdicts than a single accuracy would before it shows.

The shipped prior is 0.65 each way (a shift of 0.62 in logit): below the balanced accuracy
published for small purpose-built judges on RAGTruth (HHEM-2.1-Open, 64-74 %), since a general
model prompted as a judge is not assumed better; it is worth :data:`PRIOR_VERDICTS` verdicts of
each label.  Once the verdicts hold that many of each, they decide alone whether the judge is
better than chance: when the lower bound of their balanced accuracy (one-sided 95 %,
Agresti-Coull) is at or below 0.5, the judge gets no weight, however good the prior says it is.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

PRIOR_ACCURACY = 0.65
PRIOR_VERDICTS = 10  # what the prior is worth, per label; also the verdicts per label the chance test waits for
_Z_ONE_SIDED = 1.6448536269514722  # a one-sided 95 % bound
_CHANCE = 0.5
_EPSILON = 1e-6


class Judgment(StrEnum):
    """What the judge answered about one call (``unknown``: no usable answer; it moves nothing)."""

    HALLUCINATED = "hallucinated"
    FAITHFUL = "faithful"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class JudgeWeight:
    """The judge's sensitivity and specificity as its weight uses them, and why they are what they are."""

    sensitivity: float  # P(judge says hallucinated | the call is)
    specificity: float  # P(judge says faithful | the call is faithful)
    verdicts: int = 0  # verdicts with a judgment the estimate stands on
    note: str = "the shipped prior"

    @classmethod
    def none(cls, verdicts: int = 0, note: str = "no weight") -> JudgeWeight:
        """A judge whose answers move nothing (its answers are as likely either way)."""
        return cls(_CHANCE, _CHANCE, verdicts, note)

    @property
    def weighs(self) -> bool:
        """Whether either answer moves the probability."""
        return self.shift(Judgment.HALLUCINATED) != 0.0 or self.shift(Judgment.FAITHFUL) != 0.0

    def shift(self, judgment: Judgment) -> float:
        """What ``judgment`` adds to the call's logit."""
        sens = _clip(self.sensitivity)
        spec = _clip(self.specificity)
        if judgment == Judgment.HALLUCINATED:
            return math.log(sens / (1 - spec))
        if judgment == Judgment.FAITHFUL:
            return math.log((1 - sens) / spec)
        return 0.0

    def apply(self, probability: float | None, judgment: Judgment) -> float | None:
        """The call's probability once ``judgment`` is in (None stays None: nothing weighed the call)."""
        shift = self.shift(judgment)
        if probability is None or shift == 0.0:  # nothing moved it: the same p, to the last digit
            return probability
        p = _clip(probability)
        return 1.0 / (1.0 + math.exp(-(math.log(p / (1 - p)) + shift)))

    def says_hallucinated(self, probability: float) -> float:
        """How likely the judge answers "hallucinated" on a call of ``probability``."""
        return probability * self.sensitivity + (1 - probability) * (1 - self.specificity)


SHIPPED_PRIOR = JudgeWeight(PRIOR_ACCURACY, PRIOR_ACCURACY)


@dataclass(frozen=True, slots=True)
class JudgedVerdict:
    """A reviewer's verdict on a call the judge also answered."""

    judgment: Judgment
    hallucinated: bool


def fit_weight(
    verdicts: Sequence[JudgedVerdict], prior: JudgeWeight = SHIPPED_PRIOR, strength: int = PRIOR_VERDICTS
) -> JudgeWeight:
    """The judge's weight from the verdicts: shrunk toward ``prior``, none once they show it no better than chance.

    Verdicts on calls the judge gave no usable answer to say nothing about its accuracy and are left
    out of it; but a judge that answers most calls "unknown" (twice ``strength`` of them at least)
    gets no weight either, so that the band stops spending the budget on it.
    """
    answered = [v for v in verdicts if v.judgment != Judgment.UNKNOWN]
    unanswered = len(verdicts) - len(answered)
    if unanswered >= 2 * strength and unanswered > len(answered):  # it mostly cannot be read: spend nothing on it
        note = f"no usable answer on {unanswered} of {len(verdicts)} judged verdicts"
        return JudgeWeight.none(len(answered), note)
    hallucinated = [v for v in answered if v.hallucinated]
    faithful = [v for v in answered if not v.hallucinated]
    caught = sum(v.judgment == Judgment.HALLUCINATED for v in hallucinated)
    cleared = sum(v.judgment == Judgment.FAITHFUL for v in faithful)
    if min(len(hallucinated), len(faithful)) >= strength:
        floor = balanced_accuracy_floor(caught, len(hallucinated), cleared, len(faithful))
        if floor <= _CHANCE:
            note = f"no better than chance on the verdicts: balanced accuracy's 95 % lower bound {floor:.2f}"
            return JudgeWeight.none(len(answered), note)
    sensitivity = (caught + strength * prior.sensitivity) / (len(hallucinated) + strength)
    specificity = (cleared + strength * prior.specificity) / (len(faithful) + strength)
    note = f"{len(answered)} verdicts, shrunk toward the shipped prior" if answered else prior.note
    return JudgeWeight(sensitivity, specificity, len(answered), note)


def balanced_accuracy_floor(caught: int, hallucinated: int, cleared: int, faithful: int) -> float:
    """A one-sided 95 % lower bound of the judge's balanced accuracy (Agresti-Coull: two successes, two failures added).

    Needs at least one verdict of each label.
    """
    if hallucinated < 1 or faithful < 1:
        raise ValueError("the balanced accuracy needs verdicts of both labels")
    sens, sens_n = (caught + 2) / (hallucinated + 4), hallucinated + 4
    spec, spec_n = (cleared + 2) / (faithful + 4), faithful + 4
    spread = math.sqrt(sens * (1 - sens) / sens_n + spec * (1 - spec) / spec_n) / 2
    return (sens + spec) / 2 - _Z_ONE_SIDED * spread


def _clip(value: float) -> float:
    return min(max(value, _EPSILON), 1 - _EPSILON)
