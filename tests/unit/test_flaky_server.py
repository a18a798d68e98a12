"""The soak's flaky destination: a failure it answers holds until a request has met it."""

from __future__ import annotations

import time

import httpx
import pytest

from tests.soak.flaky_server import FlakyAlertingServer


def _post(server: FlakyAlertingServer) -> int:
    return httpx.post(server.pagerduty_url, json={"routing_key": "k", "event_action": "trigger"}, timeout=5).status_code


def test_a_failure_window_outlasts_its_seconds_until_a_request_meets_it() -> None:
    with FlakyAlertingServer(schedule=(("5xx", 0.1), ("up", 60.0))) as server:
        time.sleep(0.5)  # five times the window, with no request
        assert _post(server) == 503
        time.sleep(0.3)  # the schedule looks every 0.1 s
        assert _post(server) == 202
        assert server.faults_met() == {"5xx": 1, "up": 1}
        assert len(server.delivered()) == 1


def test_refused_connections_end_on_time_because_no_request_can_meet_them() -> None:
    with FlakyAlertingServer(schedule=(("refused", 0.2), ("up", 60.0))) as server:
        time.sleep(0.05)  # the schedule closes the socket as it starts
        with pytest.raises(httpx.TransportError):
            _post(server)
        time.sleep(0.5)
        assert _post(server) == 202
        assert server.faults_met() == {"up": 1}
