"""Which calls the judge should answer: those whose route its answer could change, most likely change first.

A call's route comes from its flags and its ``p_hallucination`` through the application's
rules (:class:`~pipeline.agreement.rules.AgreementRule`, with the app's map's minimums where it
has one).  The judge's answer counts as one more agreeing signal when it says "hallucinated"
and moves p by its weight either way (:mod:`pipeline.judge.weight`).  So the band is
not a fixed range of p: it is every call whose route differs between the two answers, which
follows the app's map, minimums and the judge's current weight by construction:

- ``could alert``: "hallucinated" would raise an alert the call does not raise now (a single
  signal the judge joins, or two signals whose p sits just under a route's minimum);
- ``could hold back``: "faithful" would withdraw the alert the call raises now (p barely over);
- ``could change route``: the alert stays, on another route (slack to page, or back);
- ``unverified``: the coverage detector found claims no source covers; the judge reads them
  even where its answer cannot move the route (the review page shows what it said);
- ``to weigh the judge``: among the first calls the review queue will serve, so that their
  verdicts measure the judge (:mod:`pipeline.rate.draw_order`); its answer moves nothing here.

A judge with no weight moves nothing, so only unverified calls are escalated then.  A call's
value is the probability that the judge's answer changes its route, from its p and the
judge's sensitivity and specificity: the calls a short budget judges first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TypeVar

from pipeline.agreement.rules import AgreementRule
from pipeline.config.alerting import JUDGE, JUDGE_SEVERITY
from pipeline.config.policy import DEFAULT_POLICY
from pipeline.judge.weight import JudgeWeight, Judgment

_Call = TypeVar("_Call")


class Reason(StrEnum):
    """Why a call was escalated (stored with it)."""

    COULD_ALERT = "could alert"
    COULD_HOLD_BACK = "could hold back"
    COULD_REROUTE = "could change route"
    UNVERIFIED = "unverified"
    TO_WEIGH = "to weigh the judge"


@dataclass(frozen=True, slots=True)
class Escalation:
    """A call worth the judge's answer: why, how likely the answer changes its route, and the routes either way."""

    reason: Reason
    value: float  # the probability that the judge's answer changes the call's route
    route_now: str | None  # without a judgment (over budget, past the deadline, an unknown answer)
    if_hallucinated: str | None
    if_faithful: str | None

    @property
    def could_change_route(self) -> bool:
        """Whether the decision has a reason to wait for the answer."""
        return self.if_hallucinated != self.if_faithful


def decided_route(
    agreement: AgreementRule,
    flags: Mapping[str, int],
    probability: float | None,
    weight: JudgeWeight,
    judgment: Judgment = Judgment.UNKNOWN,
    policy: str = DEFAULT_POLICY,
) -> str | None:
    """The route a call's alert takes once ``judgment`` is in (None: no alert).

    A judge with no weight is no signal either: its "hallucinated" would otherwise make an alert of any single flag.
    """
    if judgment == Judgment.HALLUCINATED and weight.weighs:
        flags = {**flags, JUDGE: JUDGE_SEVERITY}
    rule = agreement.first_match(flags, weight.apply(probability, judgment), policy)
    return agreement.route_of(rule, policy) if rule else None


def escalation(
    agreement: AgreementRule,
    flags: Mapping[str, int],
    probability: float | None,
    weight: JudgeWeight,
    policy: str = DEFAULT_POLICY,
    unverified: bool = False,
    to_weigh: bool = False,
) -> Escalation | None:
    """Why the call should go to the judge, or None when its answer could change nothing and nothing else asks.

    ``to_weigh``: the call is among the first the review queue serves.
    """
    routes = {judgment: decided_route(agreement, flags, probability, weight, judgment, policy) for judgment in Judgment}
    now = routes[Judgment.UNKNOWN]
    if_hallucinated, if_faithful = routes[Judgment.HALLUCINATED], routes[Judgment.FAITHFUL]
    if if_hallucinated == if_faithful:
        if unverified or to_weigh:
            return Escalation(Reason.UNVERIFIED if unverified else Reason.TO_WEIGH, 0.0, now, now, now)
        return None
    if now is None:
        reason = Reason.COULD_ALERT
    elif None in (if_hallucinated, if_faithful):
        reason = Reason.COULD_HOLD_BACK if if_faithful is None else Reason.COULD_ALERT
    else:
        reason = Reason.COULD_REROUTE
    says_hallucinated = weight.says_hallucinated(probability) if probability is not None else 0.5
    value = says_hallucinated * (if_hallucinated != now) + (1 - says_hallucinated) * (if_faithful != now)
    return Escalation(reason, value, now, if_hallucinated, if_faithful)


def most_valuable(candidates: Sequence[tuple[_Call, Escalation]], count: int) -> list[tuple[_Call, Escalation]]:
    """The ``count`` candidates whose judgment is most likely to change their route (ties: the earlier first)."""
    ranked = sorted(enumerate(candidates), key=lambda item: (-item[1][1].value, item[0]))
    return [candidate for _, candidate in ranked[: max(count, 0)]]
