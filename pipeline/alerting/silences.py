"""Silences: an operator's time-boxed "do not send alerts like these" (issue 17).

A silence is a selector over an alert's identity (every key must match) and an end.  The
router checks each alert against the active silences before it dispatches: a silenced
alert is not sent but recorded, with status ``silenced``, and remembered as final, so a
replay after the silence ended does not send it late.  Pure: parsing operators' input
and matching; storage is :mod:`pipeline.alerting.silence_store`, what the router does
with a silenced alert :mod:`pipeline.alerting.silencing`.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from pipeline.alerting.alert import Alert
from pipeline.config.durations import parse_duration as _duration

# What a selector may name.  ``detector`` matches when the alert's agreeing detectors include it.
SELECTOR_KEYS = ("service", "operation", "model", "rule", "route", "detector", "policy")
# Silences are time-boxed: one that outlives a month is a rule change in disguise.
MAX_DURATION = timedelta(days=30)


class SilenceInputError(ValueError):
    """An operator's selector or duration is unusable; the message says what to write instead."""


@dataclass(frozen=True, slots=True)
class Silence:
    """Alerts matching every entry of ``matchers`` are not sent from ``starts_at`` until ``ends_at``."""

    silence_id: str
    matchers: Mapping[str, str]
    reason: str
    created_by: str
    starts_at: datetime
    ends_at: datetime

    @classmethod
    def start(cls, matchers: Mapping[str, str], duration: timedelta, reason: str, by: str, now: datetime) -> Silence:
        """A new silence from ``now`` for ``duration`` (checked by :func:`parse_duration`), with a fresh id."""
        if not reason.strip():
            raise SilenceInputError("give a --reason: whoever finds the silence needs to know why it is there")
        return cls(uuid.uuid4().hex[:12], dict(matchers), reason.strip(), by, now, now + duration)

    @property
    def selector(self) -> str:
        """The matchers as the operator wrote them: ``service=checkout,rule=two-detectors``."""
        return ",".join(f"{key}={value}" for key, value in sorted(self.matchers.items()))

    def active(self, now: datetime) -> bool:
        """Whether the silence holds at ``now``."""
        return self.starts_at <= now < self.ends_at

    def ends_in(self, now: datetime) -> str:
        """How long it still holds in whole minutes rounded up (a 2h silence just set reads ``2h``), or ``ended``."""
        seconds = (self.ends_at - now).total_seconds()
        if seconds <= 0:
            return "ended"
        days, rest = divmod(math.ceil(seconds / 60), 24 * 60)
        hours, minutes = divmod(rest, 60)
        parts = [(days, "d"), (hours, "h"), (minutes, "m")]
        return " ".join(f"{n}{unit}" for n, unit in parts if n)

    def matches(self, alert: Alert) -> bool:
        """Whether every matcher matches ``alert``."""
        return all(value in _values(alert, key) for key, value in self.matchers.items())

    def note(self) -> str:
        """What the alerts row says of a silenced alert: which silence, whose, and why."""
        return f"silence {self.silence_id} by {self.created_by or 'unknown'}: {self.reason}"


def _values(alert: Alert, key: str) -> Sequence[str]:
    if key == "detector":
        return alert.detector_names
    return (str(getattr(alert, key)),)


def parse_matchers(pairs: Iterable[str]) -> dict[str, str]:
    """``["service=checkout", "detector=grounding"]`` as a selector; :class:`SilenceInputError` if unusable."""
    matchers: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not value:
            raise SilenceInputError(f"--match {pair!r}: write KEY=VALUE, e.g. service=checkout")
        if key not in SELECTOR_KEYS:
            raise SilenceInputError(f"--match {pair!r}: unknown key {key!r}; use one of {', '.join(SELECTOR_KEYS)}")
        if key in matchers:
            raise SilenceInputError(f"--match {key}= given twice: a silence matches when every key matches")
        matchers[key] = value
    if not matchers:
        raise SilenceInputError("give at least one --match KEY=VALUE: a silence of everything is not a silence")
    return matchers


def parse_duration(text: str) -> timedelta:
    """``90m``, ``2h``, ``1d12h``: a positive duration of at most :data:`MAX_DURATION`."""
    duration = _duration(text)
    if duration is None:
        raise SilenceInputError(f"duration {text!r}: write a number and a unit (s, m, h, d), e.g. 90m, 2h, 1d12h")
    if duration <= timedelta(0):
        raise SilenceInputError(f"duration {text!r} is zero: a silence must last a while")
    if duration > MAX_DURATION:
        raise SilenceInputError(
            f"duration {text!r} is longer than the {MAX_DURATION.days}-day maximum: silences are time-boxed; "
            "change the alerting rules for anything meant to last"
        )
    return duration
