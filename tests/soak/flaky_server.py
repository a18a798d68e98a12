"""Fake Slack and PagerDuty that fail in bursts, counting what they accepted.

One port serves both (as :class:`tests.servers.AlertingServer` does). A fault schedule
cycles through the ways a real destination fails: 5xx replies, 429 with ``Retry-After``,
requests that hang past the client's timeout, and refused connections (the listening
socket closed, then bound again on the same port). Only a request answered with success
counts as delivered: a request that hung is modelled as one the server never acted on.

A failure the server answers lasts its seconds and then until a request has met it, so a
run exercises every kind however its traffic falls: a worker restarting after a kill can
leave a window of a few seconds without a single request.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import Literal

from pipeline.alerting.render import SHORT_TRACE_ID
from tests.servers import PAGERDUTY_PATH, SLACK_API_PREFIX, Reply, Request, ScriptedServer, alerting_reply

Fault = Literal["up", "5xx", "429", "hang", "refused"]
ANSWERED_FAILURES: frozenset[Fault] = frozenset({"5xx", "429", "hang"})  # "refused" never reaches a handler

# (fault, seconds): one cycle of 40 s, mostly up, every kind of failure once.
SCHEDULE: tuple[tuple[Fault, float], ...] = (
    ("up", 12.0),
    ("5xx", 5.0),
    ("up", 4.0),
    ("429", 5.0),
    ("up", 4.0),
    ("hang", 5.0),
    ("refused", 5.0),
)
TRACE_ID = re.compile(rf"\b[0-9a-f]{{{SHORT_TRACE_ID}}}(?:[0-9a-f]{{{32 - SHORT_TRACE_ID}}})?\b")
HANG_SECONDS = 4.0  # beyond the worker's request timeout in the soak's settings


class FlakyAlertingServer:
    """Slack Web API and PagerDuty Events v2 on one port, failing on ``schedule``; a context manager."""

    def __init__(self, schedule: tuple[tuple[Fault, float], ...] = SCHEDULE) -> None:
        self._schedule = schedule
        self._lock = threading.Lock()
        self._delivered: list[Request] = []
        self._fault: Fault = "up"
        self._faults_met: dict[Fault, int] = {}
        self._healed = threading.Event()
        self._server: ScriptedServer | None = ScriptedServer(self._reply).__enter__()
        self.port = int(self._server.url.rsplit(":", 1)[1])
        self._scheduler = threading.Thread(target=self._run_schedule, name="fault-schedule", daemon=True)

    @property
    def slack_base_url(self) -> str:
        """For ``AlertingSettings.slack_base_url``."""
        return f"http://127.0.0.1:{self.port}{SLACK_API_PREFIX}"

    @property
    def pagerduty_url(self) -> str:
        """For ``AlertingSettings.pagerduty_url``."""
        return f"http://127.0.0.1:{self.port}{PAGERDUTY_PATH}"

    def __enter__(self) -> FlakyAlertingServer:
        self._scheduler.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.heal()
        self._listen(False)

    def heal(self) -> None:
        """Stop failing from now on (the end of a run: whatever waits must now go through)."""
        self._healed.set()
        if self._scheduler.is_alive():
            self._scheduler.join()

    def delivered(self, path_prefix: str = "") -> list[Request]:
        """Requests under ``path_prefix`` answered with success so far, oldest first."""
        with self._lock:
            return [request for request in self._delivered if request.path.startswith(path_prefix)]

    def faults_met(self) -> dict[Fault, int]:
        """How many requests met each fault (``up``: answered with success)."""
        with self._lock:
            return dict(self._faults_met)

    def _run_schedule(self) -> None:
        for fault, seconds in itertools.cycle(self._schedule):
            with self._lock:
                self._fault = fault
                met_before = self._faults_met.get(fault, 0)
            self._listen(fault != "refused")
            if self._hold(fault, seconds, met_before):
                with self._lock:
                    self._fault = "up"
                self._listen(True)
                return

    def _hold(self, fault: Fault, seconds: float, met_before: int) -> bool:
        """Keep ``fault`` for ``seconds``, then until a request met it if the server answers it; True once healed."""
        if self._healed.wait(seconds):
            return True
        while fault in ANSWERED_FAILURES:
            with self._lock:
                if self._faults_met.get(fault, 0) > met_before:
                    return False
            if self._healed.wait(0.1):
                return True
        return False

    def _listen(self, listening: bool) -> None:
        if listening and self._server is None:
            self._server = ScriptedServer(self._reply, port=self.port).__enter__()
        elif not listening and self._server is not None:
            self._server.__exit__(None, None, None)
            self._server = None

    def _reply(self, request: Request) -> Reply:
        with self._lock:
            fault = self._fault
            self._faults_met[fault] = self._faults_met.get(fault, 0) + 1
            if fault == "up":
                self._delivered.append(request)
        if fault == "5xx":
            return Reply(503, body="service unavailable")
        if fault == "429":
            return Reply(429, {"Retry-After": "2"}, body={"ok": False, "error": "ratelimited"})
        if fault == "hang":
            return Reply(503, body="too late", delay=HANG_SECONDS)
        return alerting_reply(request)


def trace_ids_in(request: Request, known: Mapping[str, str]) -> set[str]:
    """The traces a request's body mentions, by whole id or by short id (a digest's overflow).

    ``known`` maps each trace's id and its short id to its id (see :func:`by_id_and_short_id`).
    """
    return {known[token] for token in TRACE_ID.findall(json.dumps(request.body)) if token in known}


def by_id_and_short_id(traces: Iterable[str]) -> dict[str, str]:
    """Each trace id under itself and under its short id, for :func:`trace_ids_in`."""
    return {key: trace for trace in traces for key in (trace, trace[:SHORT_TRACE_ID])}
