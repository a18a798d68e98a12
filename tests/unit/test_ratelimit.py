"""Per-route sliding-window rate limit, on a fake clock."""

from __future__ import annotations

from pipeline.alerting.ratelimit import RouteRateLimiter


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_take_allows_up_to_the_limit_per_minute() -> None:
    clock = Clock()
    limiter = RouteRateLimiter({"slack": 3}, clock)
    assert limiter.take("slack", 2) == 2
    assert limiter.seconds_until_available("slack") == 0.0
    assert limiter.take("slack", 5) == 1
    assert limiter.take("slack", 1) == 0


def test_the_window_slides() -> None:
    clock = Clock()
    limiter = RouteRateLimiter({"slack": 2}, clock)
    limiter.take("slack", 1)
    clock.now += 20
    limiter.take("slack", 1)
    assert limiter.seconds_until_available("slack") == 40.0
    clock.now += 40  # the first send leaves the window
    assert limiter.seconds_until_available("slack") == 0.0
    assert limiter.take("slack", 5) == 1
    assert limiter.seconds_until_available("slack") == 20.0


def test_routes_are_independent_and_unlisted_routes_unlimited() -> None:
    limiter = RouteRateLimiter({"slack": 1, "page": 1}, Clock())
    assert limiter.take("slack", 3) == 1
    assert limiter.take("page", 3) == 1
    assert limiter.take("log", 1000) == 1000
    assert limiter.seconds_until_available("log") == 0.0


def test_nothing_wanted_takes_nothing() -> None:
    limiter = RouteRateLimiter({"slack": 1}, Clock())
    assert limiter.take("slack", 0) == 0
    assert limiter.take("slack", -2) == 0
    assert limiter.take("slack", 1) == 1
