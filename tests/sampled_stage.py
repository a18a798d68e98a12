"""The sampled stage as a worker builds it, for tests that call its ``sample`` and ``judge`` directly.

Its app never connects (the broker address is closed) and nothing is stored or dead-lettered:
those paths run over a real broker in tests/integration/test_consistency_sampling.py.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import faust
from faust.types import Message

from detectors.thresholds import load_thresholds
from pipeline.config.policy_book import PolicyBook
from pipeline.config.settings import Settings
from pipeline.sampled.stage import ConsistencyStage
from pipeline.stream.plumbing import raw_topic


async def no_store(rows: Mapping[str, Sequence[Sequence[Any]]]) -> None:
    raise AssertionError("not used here")


async def no_dead_letter(message: Message, kind: str, reason: str) -> None:
    raise AssertionError("not used here")


def offline_app(name: str = "test-consistency") -> faust.App:
    """A faust app for building stages on, never started."""
    return faust.App(name, broker="kafka://127.0.0.1:1", autodiscover=False, web_enabled=False)


def sampled_stage(settings: Settings, app: faust.App | None = None) -> ConsistencyStage:
    """The stage of ``settings``, its agent registered on ``app`` (a fresh offline one by default)."""
    app = app or offline_app()
    thresholds = load_thresholds()
    return ConsistencyStage(
        app,
        settings.stream(),
        settings.consistency,
        settings.detectors,
        thresholds,
        PolicyBook(settings, thresholds),
        raw_topic(app, 1, "consistency"),
        raw_topic(app, 1, "findings"),
        no_store,
        no_dead_letter,
    )
