"""When verdicts refit an application's map without a person (``review.auto_apply_after``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from pipeline.calibration.proposals import refit_due
from pipeline.config.review import ReviewSettings
from pipeline.rate.maps import AppMap

NOW = datetime(2026, 6, 1, 12, tzinfo=UTC)
AUTO = ReviewSettings(auto_apply_after=100, window_days=7)


def _newest(verdicts: int, days_ago: float = 1) -> AppMap:
    return AppMap("hr", "hr-1", verdicts=verdicts, at=NOW - timedelta(days=days_ago))


def test_nothing_is_refitted_without_auto_apply_after_or_below_it():
    assert not refit_due(10_000, None, ReviewSettings(), NOW)
    assert not refit_due(99, None, AUTO, NOW)
    assert refit_due(100, None, AUTO, NOW)


def test_a_refit_waits_for_a_quarter_more_verdicts_than_the_newest_proposal_was_fitted_on():
    assert not refit_due(124, _newest(100), AUTO, NOW)
    assert refit_due(125, _newest(100), AUTO, NOW)
    assert not refit_due(156, _newest(125), AUTO, NOW)
    assert refit_due(157, _newest(125), AUTO, NOW)


def test_a_proposal_older_than_the_window_is_refitted_on_the_verdicts_there_are_now():
    assert not refit_due(110, _newest(300, days_ago=6), AUTO, NOW)
    assert refit_due(110, _newest(300, days_ago=8), AUTO, NOW)
    assert not refit_due(90, _newest(300, days_ago=8), AUTO, NOW)
