"""The dropped-records watchdog's clock, and the longest offset-commit interval it tolerates.

:class:`~pipeline.stream.dropped_records.SkippedRecordsWatchdog` looks every
:data:`LOOK_SECONDS`.  Once :data:`IDLE_LOOKS` looks in a row saw no batch in progress or
finished, at least :data:`IDLE_WINDOW_SECONDS` have passed since the last record was acked,
and it takes every record past a partition's committed offset for one faust dropped: it seeks
back and reads them again.  That holds only if faust committed the acked records within the
window.  It commits every ``kafka_commit_interval_seconds``, so a longer interval makes an idle
worker re-read (and re-detect) what it already processed, window after window.
"""

from __future__ import annotations

LOOK_SECONDS = 2.0
IDLE_LOOKS = 3
IDLE_WINDOW_SECONDS = LOOK_SECONDS * IDLE_LOOKS
# Half the window: the other half is for the commit's round trip to the broker and timer drift.
MAX_COMMIT_INTERVAL_SECONDS = IDLE_WINDOW_SECONDS / 2


def check_commit_interval(seconds: float) -> float:
    """``seconds`` if an idle worker commits within the watchdog's idle window; ValueError saying why not."""
    if seconds > MAX_COMMIT_INTERVAL_SECONDS:
        raise ValueError(
            f"must be at most {MAX_COMMIT_INTERVAL_SECONDS:g} s (got {seconds:g}): a worker idle for "
            f"{IDLE_WINDOW_SECONDS:g} s must have committed what it processed, or the dropped-records "
            "watchdog takes the uncommitted records for dropped ones and reads them again"
        )
    return seconds
