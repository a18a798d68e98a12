"""Silences: operators' selectors and durations, matching alerts, the router's split, the refreshing cache."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from pipeline import metrics
from pipeline.alerting import silence_cache
from pipeline.alerting.alert import DeliveryStatus
from pipeline.alerting.alert_row import alert_row
from pipeline.alerting.console import ConsoleDestination
from pipeline.alerting.pagerduty import PagerDutyDestination
from pipeline.alerting.silence_cache import ActiveSilences
from pipeline.alerting.silences import MAX_DURATION, Silence, SilenceInputError, parse_duration, parse_matchers
from pipeline.alerting.silencing import silenced_outcomes, silencing
from pipeline.config.alerting import AlertingSettings
from pipeline.sinks.alert_lifecycle import LIFECYCLE_VERSION_BASE
from pipeline.sinks.rows import ALERT_COLUMNS
from tests.unit.test_alert_render import make_alert

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def silence(matchers: dict[str, str], *, ends_in: timedelta = timedelta(hours=1), silence_id: str = "s1") -> Silence:
    return Silence(silence_id, matchers, "deploy", "alice", NOW - timedelta(minutes=5), NOW + ends_in)


# --- operators' input ------------------------------------------------------------------------


def test_matchers_are_parsed_from_key_value_pairs():
    assert parse_matchers(["service=checkout", " detector = grounding "]) == {
        "service": "checkout",
        "detector": "grounding",
    }


@pytest.mark.parametrize(
    ("pairs", "says"),
    [
        (["colour=red"], "unknown key 'colour'; use one of service, operation, model, rule, route, detector, policy"),
        (["service"], "write KEY=VALUE"),
        (["service="], "write KEY=VALUE"),
        (["service=a", "service=b"], "service= given twice"),
        ([], "at least one --match"),
    ],
)
def test_unusable_matchers_are_refused_with_what_to_write(pairs, says):
    with pytest.raises(SilenceInputError, match=says):
        parse_matchers(pairs)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("90m", timedelta(minutes=90)),
        ("2h", timedelta(hours=2)),
        ("1d12h", timedelta(days=1, hours=12)),
        ("45s", timedelta(seconds=45)),
        (" 2H ", timedelta(hours=2)),
        ("30d", MAX_DURATION),
    ],
)
def test_durations(text, expected):
    assert parse_duration(text) == expected


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("31d", "longer than the 30-day maximum"),
        ("720h1s", "longer than the 30-day maximum"),
        ("0h", "is zero"),
        ("2", "write a number and a unit"),
        ("2x", "write a number and a unit"),
        ("-1h", "write a number and a unit"),
        ("", "write a number and a unit"),
        ("1.5h", "write a number and a unit"),
    ],
)
def test_unusable_durations_are_refused(text, says):
    with pytest.raises(SilenceInputError, match=says):
        parse_duration(text)


def test_a_silence_needs_a_reason_and_ends_after_its_duration():
    started = Silence.start({"service": "checkout"}, timedelta(hours=2), " deploy ", "alice", NOW)
    assert (started.reason, started.created_by, started.starts_at, started.ends_at) == (
        "deploy",
        "alice",
        NOW,
        NOW + timedelta(hours=2),
    )
    assert started.silence_id != Silence.start({"service": "x"}, timedelta(hours=1), "r", "a", NOW).silence_id
    with pytest.raises(SilenceInputError, match="give a --reason"):
        Silence.start({"service": "checkout"}, timedelta(hours=2), "  ", "alice", NOW)


def test_how_long_a_silence_still_holds_reads_as_operators_write_it():
    held = silence({"service": "a"}, ends_in=timedelta(days=1, hours=2, minutes=3, seconds=4))
    assert held.ends_in(NOW) == "1d 2h 4m"  # whole minutes, rounded up
    assert held.ends_in(held.ends_at - timedelta(seconds=30)) == "1m"
    assert held.ends_in(held.ends_at - timedelta(hours=1)) == "1h"
    assert held.ends_in(held.ends_at) == "ended"
    assert held.selector == "service=a"
    assert silence({"service": "a", "detector": "g"}).selector == "detector=g,service=a"


# --- matching ----------------------------------------------------------------------------------


def test_a_silence_matches_when_every_key_matches():
    alert = make_alert()  # support-bot, chat, gpt-4o-mini, grounding-and-schema, page: grounding + schema
    assert silence({"service": "support-bot"}).matches(alert)
    assert silence({"service": "support-bot", "rule": "grounding-and-schema", "route": "page"}).matches(alert)
    assert silence({"model": "gpt-4o-mini", "operation": "chat"}).matches(alert)
    assert not silence({"service": "support-bot", "operation": "embed"}).matches(alert)
    assert not silence({"service": "Support-Bot"}).matches(alert)


def test_a_detector_matcher_matches_any_of_the_agreeing_detectors():
    alert = make_alert()
    assert silence({"detector": "grounding"}).matches(alert)
    assert silence({"detector": "schema_violation", "service": "support-bot"}).matches(alert)
    assert not silence({"detector": "contradiction"}).matches(alert)


def test_a_policy_matcher_matches_the_alerts_application_policy():
    assert silence({"policy": "payments"}).matches(replace(make_alert(), policy="payments"))
    assert not silence({"policy": "payments"}).matches(make_alert())  # the default policy


def test_a_silence_holds_from_its_start_until_its_end():
    held = silence({"service": "a"})
    assert held.active(NOW) and held.active(held.starts_at)
    assert not held.active(held.ends_at) and not held.active(held.starts_at - timedelta(seconds=1))


# --- the router's split ------------------------------------------------------------------------


def test_silenced_alerts_become_silenced_outcomes_for_each_destination_not_already_done():
    console, pagerduty = (
        ConsoleDestination(AlertingSettings()),
        PagerDutyDestination(AlertingSettings(pagerduty_routing_key="pd-key")),
    )
    quiet = make_alert(trace_id="a" * 32)
    loud = replace(make_alert(trace_id="b" * 32), service="checkout")
    held = silence({"service": "support-bot"}, silence_id="abc123")
    already = {(quiet.alert_id, "pagerduty")}  # delivered before the silence was set

    to_send, outcomes = silenced_outcomes(
        [quiet, loud], [console, pagerduty], lambda a, d: (a.alert_id, d.name) in already, [held]
    )

    assert to_send == [loud]
    assert [(o.alert, o.destination.name, o.status, o.attempt) for o in outcomes] == [
        (quiet, "console", DeliveryStatus.SILENCED, 0)
    ]
    assert outcomes[0].error == "silence abc123 by alice: deploy"
    assert silencing(loud, [held]) is None and silencing(quiet, [silence({"rule": "x"}), held]) is held


def test_a_silenced_row_is_final_and_below_every_lifecycle_version():
    alert = make_alert()
    row = dict(zip(ALERT_COLUMNS, alert_row(alert, "log", DeliveryStatus.SILENCED, 0, "silence s1", NOW), strict=True))
    assert DeliveryStatus.SILENCED.final
    assert (row["status"], row["state_version"], row["error"]) == ("silenced", 1 << 16, "silence s1")
    # A final delivery after the most attempts a row can count stays below PagerDuty's lifecycle versions.
    last = alert_row(alert, "pagerduty", DeliveryStatus.FAILED, 2**16 - 1, "", NOW)
    assert last[ALERT_COLUMNS.index("state_version")] < LIFECYCLE_VERSION_BASE


# --- the cache ---------------------------------------------------------------------------------


class Reads:
    """A silences reader whose answers a test scripts: a list, or an exception to raise."""

    def __init__(self, *answers: list[Silence] | Exception) -> None:
        self.answers = list(answers)
        self.calls = 0

    async def __call__(self, now: datetime) -> list[Silence]:
        self.calls += 1
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


class Clock:
    def __init__(self) -> None:
        self.seconds = 100.0
        self.wall = NOW

    def __call__(self) -> float:
        return self.seconds

    def advance(self, seconds: float) -> None:
        self.seconds += seconds
        self.wall += timedelta(seconds=seconds)


def test_silences_are_read_again_only_once_the_refresh_interval_passed():
    first, second = silence({"service": "a"}, silence_id="one"), silence({"service": "b"}, silence_id="two")
    reads, clock = Reads([first], [first, second]), Clock()
    cache = ActiveSilences(reads, refresh_seconds=5, clock=clock, now=lambda: clock.wall)

    async def run() -> list[list[str]]:
        seen = [await cache.current()]
        clock.advance(4)
        seen.append(await cache.current())
        clock.advance(1)
        seen.append(await cache.current())
        return [[s.silence_id for s in each] for each in seen]

    assert asyncio.run(run()) == [["one"], ["one"], ["one", "two"]]
    assert reads.calls == 2


def test_a_silence_that_ended_between_reads_no_longer_applies():
    short = silence({"service": "a"}, ends_in=timedelta(seconds=3))
    clock = Clock()
    cache = ActiveSilences(Reads([short]), refresh_seconds=60, clock=clock, now=lambda: clock.wall)

    async def run() -> tuple[list[Silence], list[Silence]]:
        before = await cache.current()
        clock.advance(3)
        return before, await cache.current()

    assert asyncio.run(run()) == ([short], [])


def test_a_failed_read_keeps_the_last_known_silences_logged_once_and_counted(caplog):
    known = silence({"service": "a"})
    reads, clock = Reads([known], OSError("connection refused"), OSError("still down"), [known]), Clock()
    cache = ActiveSilences(reads, refresh_seconds=1, clock=clock, now=lambda: clock.wall)
    errors_before = metrics.SILENCE_READ_ERRORS._value.get()

    async def run() -> list[list[Silence]]:
        seen = []
        for _ in range(4):
            seen.append(await cache.current())
            clock.advance(1)
        return seen

    with caplog.at_level(logging.INFO, logger="pipeline.alerting.silence_cache"):
        assert asyncio.run(run()) == [[known]] * 4
    assert reads.calls == 4
    assert metrics.SILENCE_READ_ERRORS._value.get() - errors_before == 2
    logged = [(r.levelname, r.getMessage()) for r in caplog.records]
    assert logged == [
        ("ERROR", "reading silences failed; the 1 known stay in force until a read succeeds: connection refused"),
        ("INFO", "reading silences works again: 1 in force"),
    ]


def test_a_read_that_hangs_does_not_hold_alerts_up(monkeypatch):
    monkeypatch.setattr(silence_cache, "READ_WAIT_SECONDS", 0.01)
    release = asyncio.Event()
    late = silence({"service": "a"})

    async def hanging(now: datetime) -> list[Silence]:
        await release.wait()
        return [late]

    async def run() -> tuple[list[Silence], list[Silence]]:
        cache = ActiveSilences(hanging, refresh_seconds=60, now=lambda: NOW)
        while_hanging = await cache.current()
        release.set()
        await asyncio.sleep(0)  # the read completes
        return while_hanging, await cache.current()

    assert asyncio.run(run()) == ([], [late])


def test_the_refresh_interval_must_be_positive():
    with pytest.raises(ValueError, match="refresh_seconds must be positive"):
        ActiveSilences(Reads(), refresh_seconds=0)
