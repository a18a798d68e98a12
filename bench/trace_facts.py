"""Cost of trace facts (pipeline/ingest/trace_facts.py, the join's facts): CPU, memory per 1k open traces.

Two measurements:

1. **Spans stage**: the in-process processor (decode, normalize, facts, detectors off) over
   mixed traffic whose traces carry a GenAI retriever and a tool span beside the LLM span,
   with fact extraction on and off in the same run: the ratio is what reading sibling spans
   costs the hot path.
2. **Join**: N open traces, each a call without sources waiting for its facts (``awaits_facts``)
   and then one retrieval (two ~1 kB documents) and one tool run arriving from another
   message, which releases the call with the documents attached.  Per-operation CPU, and the
   Python heap and changelog JSON per 1,000 open traces (waiting call + facts), measured in a
   separate pass (tracemalloc slows everything down).

    .venv/bin/python bench/trace_facts.py [--traces 2000] [--sizes 1000 10000] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import tracemalloc
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from opentelemetry.proto.trace.v1.trace_pb2 import TracesData

from detectors.llm_call import LLMCall, Message, Source, ToolSpan
from detectors.suite import DetectorSuite
from pipeline.config.stream import JoinConfig
from pipeline.ingest.trace_facts import Retrieval, ToolExecution
from pipeline.log_join.join import LogJoin
from pipeline.spans import processor as processor_module
from pipeline.spans.processor import InboundMessage, SpanBatchProcessor
from pipeline.tools.example_traces import EXAMPLES, example_traces

T0 = 1_800_000_000.0
DOCUMENT = "Casa Lisboa opens at 18:00 and closes at 23:00; tables for more than six need a call. " * 12


def traffic(traces: int) -> list[InboundMessage]:
    """Copies of the demo's RAG and agent traces (a retriever or a tool span beside the LLM span)."""
    names = [example.name for example in EXAMPLES]
    picked = [
        example_traces()[names.index(n)] for n in ("genai_rag_invented_facts", "genai_agent_claims_failed_booking")
    ]
    messages = []
    for i in range(traces):
        trace = TracesData()
        trace.CopyFrom(picked[i % 2])
        trace_id = i.to_bytes(16, "big")
        for resource in trace.resource_spans:
            for scope in resource.scope_spans:
                for span in scope.spans:
                    span.trace_id = trace_id
        messages.append(InboundMessage(trace_id.hex().encode(), trace.SerializeToString()))
    return messages


def processor_rate(messages: list[InboundMessage], with_facts: bool) -> float:
    processor = SpanBatchProcessor(DetectorSuite([]), "bench")
    patch = mock.patch.object(processor_module, "span_fact", lambda ctx: None) if not with_facts else mock.MagicMock()
    with patch:
        started = time.perf_counter()
        for i in range(0, len(messages), 500):
            processor.normalize(messages[i : i + 500])
    return len(messages) / (time.perf_counter() - started)


def waiting_call(i: int) -> LLMCall:
    return LLMCall(
        trace_id=f"{i:032x}", span_id=f"{i:016x}", parent_span_id="f" * 16, service="rag", span_name="chat",
        start_time_unix_nano=2_000, end_time_unix_nano=3_000, convention="gen_ai",
        input_messages=(Message("user", "When does Casa Lisboa open?"),),
        output_messages=(Message("assistant", "It opens at 18:00."),),
    )  # fmt: skip


def facts(call: LLMCall) -> list[Retrieval | ToolExecution]:
    documents = (Source("hours-1", DOCUMENT), Source("hours-2", DOCUMENT[::-1]))
    retrieval = Retrieval(call.trace_id, "a" * 16, call.parent_span_id, 1_000, documents)
    tool = ToolExecution(call.trace_id, ToolSpan("b" * 16, "lookup_hours", "c1", end_time_unix_nano=1_500))
    return [retrieval, tool]


def join_run(n: int) -> dict[str, float]:
    calls = [waiting_call(i) for i in range(n)]
    join = LogJoin(JoinConfig(max_entries=3 * n + 1))
    started = time.perf_counter()
    for call in calls:
        assert join.offer_span(call, T0, awaits_facts=True) == []
    held = time.perf_counter()
    released = []
    for call in calls:
        released += join.offer_facts(call.trace_id, facts(call), T0 + 1)
    facts_done = time.perf_counter()
    join.settle(released, T0 + 1)
    settled = time.perf_counter()
    assert len(released) == n and all(r.call is not None and r.call.sources_from == "trace" for r in released)
    lookups = time.perf_counter()
    for call in calls:
        join.facts_of(call.trace_id)
    looked = time.perf_counter()
    return {
        "hold_us": (held - started) / n * 1e6,
        "facts_and_release_us": (facts_done - held) / n * 1e6,
        "settle_us": (settled - facts_done) / n * 1e6,
        "lookup_us": (looked - lookups) / n * 1e6,
    }


def join_memory(n: int) -> tuple[float, float]:
    """(KiB of heap, KiB of JSON) per 1,000 open traces: a waiting call and its two facts."""
    calls = [waiting_call(i) for i in range(n)]
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    join = LogJoin(JoinConfig(max_entries=3 * n + 1))
    for call in calls:
        join.offer_span(call, T0, awaits_facts=True)
        # The facts release the call, but until settled both stay in the state: its peak.
        join.offer_facts(call.trace_id, facts(call), T0)
    heap = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    return heap / n * 1000 / 1024, len(json.dumps(join.store)) / n * 1000 / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces", type=int, default=2000)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    messages = traffic(args.traces)
    pairs = [(processor_rate(messages, True), processor_rate(messages, False)) for _ in range(args.runs)]
    ratios = [on / off for on, off in pairs]
    print(
        f"spans stage, traces/s with facts / without: median ratio {statistics.median(ratios):.2f} "
        f"(runs: {', '.join(f'{on:,.0f} / {off:,.0f}' for on, off in pairs)})"
    )
    columns = ["hold_us", "facts_and_release_us", "settle_us", "lookup_us"]
    print("\n| open traces | " + " | ".join(columns) + " | heap KiB / 1k | JSON KiB / 1k |")
    print("|---" * (len(columns) + 3) + "|")
    for n in args.sizes:
        runs = [join_run(n) for _ in range(args.runs)]
        medians = [statistics.median(run[column] for run in runs) for column in columns]
        heap, json_size = join_memory(n)
        print(f"| {n:,} | " + " | ".join(f"{v:.1f}" for v in medians) + f" | {heap:.0f} | {json_size:.0f} |")


if __name__ == "__main__":
    main()
