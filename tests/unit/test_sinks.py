from __future__ import annotations

from pipeline.storage import InMemorySink


def test_in_memory_sink_keeps_rows_only_once_flushed():
    sink = InMemorySink()
    sink.add([["call"]], [["finding-1"], ["finding-2"]])
    assert (sink.llm_calls, sink.findings) == ([], [])
    sink.flush()
    assert (sink.llm_calls, sink.findings) == ([["call"]], [["finding-1"], ["finding-2"]])
    sink.flush()
    assert len(sink.findings) == 2
