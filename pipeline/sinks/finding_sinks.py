"""Side channels for findings: every stage that makes findings hands each durable batch to all of them.

A side channel is best effort and off the pipeline's path: ``emit`` queues and returns at once,
never raises for a bad record, and what it loses never holds back a batch. ClickHouse and the
findings topic are not side channels: a batch is durable only once they have it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from pipeline.config.settings import Settings
from pipeline.sinks.finding import Finding
from pipeline.sinks.findings_otlp import FindingExporter


class FindingSink(Protocol):
    """Where findings records go besides ClickHouse and the findings topic."""

    def emit(self, findings: Iterable[Finding]) -> None:
        """Queue the findings; returns at once."""

    def shutdown(self) -> None:
        """Send what is queued, within the sink's own time limit."""


class FindingSinks:
    """The finding sinks the settings turn on, as one: what a stage emits reaches each."""

    def __init__(self, sinks: Sequence[FindingSink] = ()) -> None:
        self.sinks = list(sinks)

    @classmethod
    def from_settings(cls, settings: Settings) -> FindingSinks:
        """Every finding sink the settings turn on; a new kind of sink is its module and one entry here."""
        candidates = (FindingExporter.from_settings(settings),)
        return cls([sink for sink in candidates if sink is not None])

    def emit(self, findings: Sequence[Finding]) -> None:
        """Hand the findings to every sink."""
        for sink in self.sinks:
            sink.emit(findings)

    def shutdown(self) -> None:
        """Shut every sink down, one after the other."""
        for sink in self.sinks:
            sink.shutdown()
