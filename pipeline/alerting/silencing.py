"""What the alert router does with alerts an operator's silence matches: outcomes instead of sends."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from pipeline.alerting.alert import Alert, DeliveryStatus
from pipeline.alerting.destinations import Destination
from pipeline.alerting.dispatch import AlreadyDone, Outcome
from pipeline.alerting.silences import Silence


def silencing(alert: Alert, silences: Iterable[Silence]) -> Silence | None:
    """The first of ``silences`` that matches ``alert``, if any."""
    return next((silence for silence in silences if silence.matches(alert)), None)


def silenced_outcomes(
    alerts: Sequence[Alert], destinations: Sequence[Destination], done: AlreadyDone, silences: Sequence[Silence]
) -> tuple[list[Alert], list[Outcome]]:
    """Split a route's alerts: those to dispatch, and a ``silenced`` outcome per silenced alert and destination.

    Deliveries already final stay as they are: a silence never rewrites what was sent.
    """
    to_send: list[Alert] = []
    outcomes: list[Outcome] = []
    for alert in alerts:
        silence = silencing(alert, silences)
        if silence is None:
            to_send.append(alert)
            continue
        outcomes += [silenced(alert, d, silence) for d in destinations if not done(alert, d)]
    return to_send, outcomes


def silenced(alert: Alert, destination: Destination, silence: Silence, attempts: int = 0) -> Outcome:
    """The final outcome of an alert ``silence`` kept from ``destination`` after ``attempts`` failed tries."""
    return Outcome(alert, destination, DeliveryStatus.SILENCED, attempts, silence.note())
