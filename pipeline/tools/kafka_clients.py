"""The settings of every confluent-kafka client the commands make: librdkafka's own log through Python logging.

Left alone, librdkafka writes its log to stderr itself (``%3|1795744000.707|FAIL|rdkafka#producer-1| …``),
past the log format, the JSON format and the secret scrubber, and while a broker is down it
repeats each refused connection about twenty times a second.  Given as ``logger``, confluent-kafka
hands each line to :class:`LibrdkafkaLog` from the client's ``poll``/``flush`` instead (a client that
fails before it is polled says nothing more: poll it once to have its reason logged).  The worker
itself reads and writes through aiokafka, whose log is Python logging already.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Mapping
from typing import Any

LOGGER_NAME = "librdkafka"
REPEAT_WINDOW_SECONDS = 60.0  # a line like one already logged is held back this long, then counted
# librdkafka's retries: it logs a connection failure and tries again (what fails for good, the client raises).
_RETRIED_FACILITIES = frozenset({"FAIL"})
_THREAD = re.compile(r"^\[thrd:[^\]]*\]: ")  # which librdkafka thread wrote it: no help to an operator
# What changes from one repetition to the next: "(after 0ms in state CONNECT)", "(3 identical error(s) suppressed)".
_DETAIL = re.compile(r"\s*\([^()]*\)")


class LibrdkafkaLog:
    """What confluent-kafka calls for each librdkafka log line: one Python log record, repeats held back.

    A line like one logged less than :data:`REPEAT_WINDOW_SECONDS` ago (same facility, same text
    but for its parenthesised details) is dropped and counted; the next one after the window is
    logged with that count.  Shared by every client of the process, so a command that makes
    several clients logs a broker that is down once.
    """

    def __init__(self, logger: logging.Logger, window_seconds: float = REPEAT_WINDOW_SECONDS) -> None:
        self._logger = logger
        self._window = window_seconds
        self._seen: dict[tuple[str, str], tuple[float, int]] = {}  # (facility, gist) -> (logged at, held back since)
        self._lock = threading.Lock()  # clients may be polled from several threads (the demo's)

    def log(self, level: int, _format: str, facility: str, _client: str, text: str) -> None:
        """One librdkafka line: ``level`` already a Python level, ``text`` librdkafka's message."""
        text = _THREAD.sub("", text)
        if facility in _RETRIED_FACILITIES:
            level = min(level, logging.WARNING)
        if not self._logger.isEnabledFor(level):
            return
        key = (facility, _DETAIL.sub("", text))
        now = time.monotonic()
        with self._lock:
            logged_at, held_back = self._seen.get(key, (-self._window, 0))
            if now - logged_at < self._window:
                self._seen[key] = (logged_at, held_back + 1)
                return
            self._seen[key] = (now, 0)
        suffix = f" ({held_back} more like it in the last {now - logged_at:.0f}s)" if held_back else ""
        self._logger.log(level, "%s [%s]%s", text, facility, suffix)


_LOG = LibrdkafkaLog(logging.getLogger(LOGGER_NAME))


def client_config(bootstrap: str, *settings: Mapping[str, Any]) -> dict[str, Any]:
    """A confluent-kafka client's configuration: ``bootstrap``, librdkafka's log to logging, then ``settings``."""
    config: dict[str, Any] = {"bootstrap.servers": bootstrap, "logger": _LOG}
    for more in settings:
        config.update(more)
    return config


class ConnectionReasons:
    """librdkafka's words for why a client cannot reach its brokers (refused, unresolvable, TLS, SASL).

    Pass it as the client's ``error_cb``; :meth:`said` serves the pending callbacks, with the
    librdkafka log muted where the error raised is all a person reads (``quiet``).
    """

    def __init__(self) -> None:
        self._said: dict[str, None] = {}  # in order, each once

    def __call__(self, error: Any) -> None:
        """The error callback librdkafka calls: keep what it said."""
        self._said[error.str()] = None

    def said(self, client: Any, failure: Exception, quiet: bool = True) -> str:
        """What librdkafka said while ``client`` failed, or ``failure``'s own words when it said nothing."""
        logger = logging.getLogger(LOGGER_NAME)
        level = logger.level
        if quiet:
            logger.setLevel(logging.ERROR)
        try:
            client.poll(0)
        finally:
            logger.setLevel(level)
        return "; ".join(self._said) or str(failure)
