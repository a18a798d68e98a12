"""A ClickHouse outage holds the batch and retries with backoff; nothing is dropped."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from pipeline.examples import example_traces
from pipeline.process import InboundMessage
from pipeline.settings import load_settings
from pipeline.storage import InMemorySink, SinkUnavailable
from pipeline.worker import SpansWorker

pytestmark = pytest.mark.usefixtures("exported_model")


class FlakySink(InMemorySink):
    """Refuses the first ``failures`` flushes, as a ClickHouse that is down would."""

    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures = failures
        self.attempts = 0

    def flush(self) -> None:
        self.attempts += 1
        if self.attempts <= self.failures:
            raise SinkUnavailable("ClickHouse is down", retry_after_seconds=0.01)
        super().flush()


def test_write_retries_until_clickhouse_is_back(tmp_path: Path):
    sink = FlakySink(failures=3)
    worker = SpansWorker(load_settings(data_dir=tmp_path, write_retry_max_seconds=0.05), sink=sink)
    traces = example_traces()[:3]
    messages = [
        InboundMessage(t.resource_spans[0].scope_spans[0].spans[0].trace_id.hex().encode(), t.SerializeToString())
        for t in traces
    ]
    result = worker.processor.process(messages)
    asyncio.run(worker._write(result))
    assert sink.attempts == 4
    assert len(sink.llm_calls) == 3
    assert len(sink.findings) == 3 * len(worker.suite.detectors)
