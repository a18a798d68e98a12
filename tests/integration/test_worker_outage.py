"""A ClickHouse outage holds the batch and retries with backoff; nothing is dropped."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from pipeline.config.settings import load_settings
from pipeline.sinks.clickhouse import Sink, SinkUnavailable
from pipeline.spans.processor import InboundMessage
from pipeline.tools.example_traces import example_traces
from pipeline.worker.app import PipelineWorker

pytestmark = pytest.mark.usefixtures("exported_model")


class FlakySink(Sink):
    """Keeps rows in memory; refuses the first ``failures`` flushes, as a ClickHouse that is down would."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.attempts = 0
        self.pending: dict[str, list[Sequence[Any]]] = defaultdict(list)
        self.written: dict[str, list[Sequence[Any]]] = defaultdict(list)

    def add(self, table: str, rows: Sequence[Sequence[Any]]) -> None:
        self.pending[table].extend(rows)

    def flush(self) -> None:
        self.attempts += 1
        if self.attempts <= self.failures:
            raise SinkUnavailable("ClickHouse is down", retry_after_seconds=0.01)
        for table, rows in self.pending.items():
            self.written[table].extend(rows)
        self.pending.clear()


def test_write_retries_until_clickhouse_is_back(tmp_path: Path):
    sink = FlakySink(failures=3)
    worker = PipelineWorker(load_settings(data_dir=tmp_path, write_retry_max_seconds=0.05), sink=sink)
    traces = example_traces()[:3]
    messages = [
        InboundMessage(t.resource_spans[0].scope_spans[0].spans[0].trace_id.hex().encode(), t.SerializeToString())
        for t in traces
    ]
    result = worker.processor.process(messages)
    asyncio.run(worker.spans.write(result))
    assert sink.attempts == 4
    assert len(sink.written["llm_calls"]) == 3
    assert len(sink.written["findings"]) == 3 * len(worker.suite.detectors)
