"""An application's map of p_hallucination from its weighted review verdicts, shrunk toward the shipped one."""

from __future__ import annotations

import numpy as np
import pytest

from detectors.verdict import PlattScaling
from pipeline.calibration.alert_probability import RouteTargets
from pipeline.calibration.app_map import JudgedCall, fit_map, judged_calls, out_of_sample, propose
from pipeline.config.alerting import AlertingSettings
from pipeline.rate.maps import AppMap
from pipeline.rate.store import JudgedRow

ROUTING = RouteTargets.from_settings(AlertingSettings())
PAIR = {"grounding": 2, "contradiction": 2}  # the two-detectors rule: slack
SEVERE = {"contradiction": 4, "unsupported_spans": 2}  # the severe-contradiction rule: page
SHIPPED = {"page": 0.93, "slack": 0.94}


def app_calls(n: int, seed: int = 0, shift: float = -2.0) -> list[JudgedCall]:
    """An app whose calls hallucinate far less often than the shipped p says (its logit shifted by ``shift``)."""
    rng = np.random.default_rng(seed)
    shipped = rng.uniform(0.02, 0.98, n)
    truth = 1 / (1 + np.exp(-(np.log(shipped / (1 - shipped)) + shift)))
    labels = rng.random(n) < truth
    return [JudgedCall(f"t{seed}-{i}", "app / p", float(p), bool(y), 0.5, PAIR if p > 0.6 else {})
            for i, (p, y) in enumerate(zip(shipped, labels, strict=True))]  # fmt: skip


def test_few_verdicts_keep_the_map_near_the_shipped_one_and_many_follow_the_app():
    few, many = fit_map(app_calls(10), shrinkage=100), fit_map(app_calls(2000), shrinkage=100)
    assert abs(few.intercept) < 0.5 and abs(few.slope - 1) < 0.2
    assert many.intercept == pytest.approx(-2.0, abs=0.35) and many.slope == pytest.approx(1.0, abs=0.2)
    assert fit_map([], 100) == PlattScaling()


def test_each_verdict_counts_by_the_inverse_of_its_strata_inclusion_probability():
    # 50 of 50 calls judged in one stratum, 50 of 500 in the other (their k-th drawn with k / 500):
    # each verdict of the second stands for ten calls, its first as much as its last.
    drawn = [JudgedCall(f"h{i}", "a", 0.5, True, (i + 1) / 50) for i in range(50)]
    drawn += [JudgedCall(f"c{i}", "b", 0.5, False, (i + 1) / 500) for i in range(50)]
    fitted = fit_map(drawn, shrinkage=0).apply_one(0.5)
    assert fitted == pytest.approx(1 / 11, abs=0.01)  # 50 of the 550 calls they stand for


def test_the_fitted_map_is_better_calibrated_out_of_sample_than_the_shipped_one():
    measured = out_of_sample(app_calls(600, seed=1), 100, PlattScaling())
    assert measured is not None and measured.ece_after < measured.ece_before / 2 and measured.better


def test_out_of_sample_a_refit_beats_a_wrong_map_and_rarely_a_right_one():
    def better(shift: float) -> float:
        measured = [out_of_sample(app_calls(100, seed, shift), 5, PlattScaling()) for seed in range(20)]
        return sum(m is not None and m.better for m in measured) / len(measured)

    assert better(shift=-2.0) == 1.0
    assert better(shift=0.0) < 0.5  # the shipped p is right: a refit on 100 verdicts mostly adds noise


def test_a_proposal_moves_the_slack_minimum_to_keep_the_apps_false_alarms_under_target():
    calls = app_calls(400, seed=2)
    proposal = propose("hr", calls, {"app / p": 4000}, ROUTING, {"page": 0.93, "slack": 0.94})
    slack = next(r for r in proposal.routes if r.route == "slack")
    assert slack.false_alarms.value is not None and slack.false_alarms.value <= 0.03
    assert proposal.version.startswith("hr-") and proposal.verdicts == 400
    assert proposal.stored().minimums == proposal.minimums and proposal.report()["ece_after"] is not None


def test_a_route_whose_false_alarms_no_minimum_gates_keeps_the_shipped_gate_rather_than_closing():
    # A fact rule (a claimed failed tool) pages on a tenth of the faithful calls, whatever their p.
    fact = {"tool_outcome": 4, "grounding": 2}
    calls = [JudgedCall(c.key, c.frame, c.shipped_probability, False, 0.5, fact if i % 10 == 0 else {})
             for i, c in enumerate(app_calls(300, seed=3))]  # fmt: skip
    proposal = propose("hr", calls, {"app / p": 3000}, ROUTING, {"page": 0.93, "slack": 0.94})
    page = next(r for r in proposal.routes if r.route == "page")
    assert page.false_alarms.value is not None and page.false_alarms.value > page.target
    shipped_gate = proposal.calibration.apply_one(0.93)  # the shipped minimum through the new map
    assert page.min_probability == pytest.approx(shipped_gate) and "no minimum keeps the target" in page.note


def test_stored_probabilities_go_back_through_the_map_they_came_from():
    applied = PlattScaling(1.2, -0.7)
    row = JudgedRow("t", "s", "app / p", float(applied.apply_one(0.8)), True, 0.25, "hr-1", {})
    (call,) = judged_calls([row], {"hr-1": applied})
    assert call.shipped_probability == pytest.approx(0.8) and call.key == "t:s"


def census(n: int) -> list[JudgedCall]:
    """Every one of an app's ``n`` calls judged: hallucinated exactly when p > 0.5, flagged severely from p 0.4."""
    p = np.linspace(0.01, 0.99, n)
    return [JudgedCall(f"c{i}", "app / p", float(q), bool(q > 0.5), 1.0, SEVERE if q > 0.4 else {})
            for i, q in enumerate(p)]  # fmt: skip


@pytest.mark.parametrize(("n", "kept"), [(12, ("page", "slack")), (100, ("page",))])
def test_a_census_too_small_to_show_a_target_keeps_its_shipped_minimum(n: int, kept: tuple[str, ...]):
    # Every call of the window judged, half of them faithful: 6 say nothing of a 3 % share, 50 nothing of 1 %.
    proposal = propose("app", census(n), {"app / p": n}, ROUTING, SHIPPED)
    for route in (r for r in proposal.routes if r.route in kept):
        assert route.shipped_minimum == pytest.approx(SHIPPED[route.route])
        assert f"{n // 2} faithful verdicts say nothing of a {route.target:.0%} share yet" in route.note
        assert route.needed_in.startswith("p ") and route.more_verdicts >= 1


def test_a_census_of_a_thousand_shows_the_page_target_and_lowers_its_minimum():
    proposal = propose("app", census(1000), {"app / p": 1000}, ROUTING, SHIPPED)
    page = next(r for r in proposal.routes if r.route == "page")
    assert page.min_probability < proposal.calibration.apply_one(SHIPPED["page"])
    assert page.false_alarms.high is not None and page.false_alarms.high <= 0.01
    assert page.note.startswith("lowered") and "of faithful calls to come (95 %)" in page.note


def test_without_verdicts_that_show_another_a_route_keeps_the_applied_maps_minimum():
    applied = AppMap("app", "app-1", PlattScaling(1.0, 0.5), {"page": 0.99, "slack": 0.95})
    proposal = propose("app", census(100), {"app / p": 100}, ROUTING, SHIPPED, applied)
    page = next(r for r in proposal.routes if r.route == "page")
    on_shipped = applied.calibration.inverse().apply_one(0.99)
    assert page.min_probability == pytest.approx(proposal.calibration.apply_one(on_shipped))
    before = next(r for r in proposal.routes_before if r.route == "page")
    assert before.min_probability == pytest.approx(0.99)  # "now" is the applied map's own minimum
