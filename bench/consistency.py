"""Cost of the sampled detectors: per sampled trace, and on the spans stage's hot path.

1. **Per sampled trace**: the demo examples' LLM calls with a text answer and some context are
   judged one after another by a real :class:`~pipeline.sampled.stage.ConsistencyStage`
   (real openai library, real embedder) against the local OpenAI-compatible server of
   tests/openai_server.py, run in a child process that answers after ``--llm-latency``
   seconds: requests and tokens per call (as the endpoint reports them: four characters a
   token here), wall-clock latency of one call's judgement, and this process's CPU time
   for it (HTTP client, JSON, embedding the answers).  Self-consistency alone (the default)
   and with the claims scorer.
2. **Hot path**: decode + normalize + default detectors over mixed traffic in-process (as
   bench/processor.py), and :meth:`ConsistencyStage.sample` after every batch, timed apart
   in the same pass (risk rule: three of the example services; default rate 1 %, and 100 %).

    .venv/bin/python bench/consistency.py [--llm-latency 0.3] [--traces 3000] [--runs 3] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import re
import statistics
import sys
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import faust

from detectors.claims.detector import EXTRACT_INSTRUCTIONS
from detectors.llm_call import LLMCall
from detectors.models.chat import USAGE_KEY
from detectors.thresholds import load_thresholds
from pipeline.config.policy_book import PolicyBook
from pipeline.config.settings import Settings
from pipeline.sampled.stage import ConsistencyStage
from pipeline.spans.processor import InboundMessage, SpanBatchProcessor
from pipeline.spans.suite import suite_from_settings
from pipeline.stream.plumbing import raw_topic
from pipeline.tools.example_traces import example_traces, mixed_traffic
from tests.openai_server import OpenAIServer
from tests.servers import Request

HIGH_RISK_SERVICES = ["hr-assistant", "travel-guide", "product-qa"]


def endpoint_answer(request: Request) -> str:
    """A plausible answer: three claims to extract, a verdict per listed claim, or prose."""
    messages = request.body.get("messages", [])
    system = messages[0].get("content", "") if messages else ""
    if system == EXTRACT_INSTRUCTIONS:
        return json.dumps({"claims": ["First claim.", "Second claim.", "Third claim."]})
    if "verdicts" in system:
        listed = re.findall(r"^\d+\. ", messages[-1].get("content", ""), re.MULTILINE)
        return json.dumps({"verdicts": [{"verdict": "supported", "reason": "The context says so."} for _ in listed]})
    return "The policy allows up to 25 days of paid vacation per year, and 5 unused days carry over."


def serve(conn: Connection, latency: float) -> None:
    """The endpoint, in a child process so that its CPU is not counted as the worker's."""
    with OpenAIServer(endpoint_answer, delay=latency) as server:
        conn.send(server.base_url)
        conn.recv()


def stage(settings: Settings) -> ConsistencyStage:
    app = faust.App("bench-consistency", broker="kafka://127.0.0.1:1", autodiscover=False, web_enabled=False)

    async def unused(*args: Any) -> None:
        raise AssertionError("the bench never stores or dead-letters")

    thresholds = load_thresholds()
    return ConsistencyStage(
        app, settings.stream(), settings.consistency, settings.detectors, thresholds, PolicyBook(settings, thresholds),
        raw_topic(app, 1, "c"), raw_topic(app, 1, "f"), unused, unused,
    )  # fmt: skip


def settings_for(base_url: str, *, claims: bool = False, rate: float = 1.0) -> Settings:
    return Settings(
        consistency={
            "enabled": True,
            "sample_rate": rate,
            "high_risk": [{"name": "services", "attribute": "service.name", "values": HIGH_RISK_SERVICES}],
            "llm": {"base_url": base_url, "api_key": "bench", "max_requests_per_minute": 100_000},
            "claims": {"enabled": claims},
        }
    )


def example_calls() -> list[LLMCall]:
    thresholds = load_thresholds()
    processor = SpanBatchProcessor(suite_from_settings(Settings(), thresholds), thresholds.version)
    traces = example_traces()
    calls = processor.process([InboundMessage(b"k", t.SerializeToString()) for t in traces]).llm_calls
    # Answers with context beyond the question: the calls the claims judge does not skip.
    return [c for c in calls if c.answer.strip() and (c.sources or c.grounding_text.strip() != c.prompt.strip())]


def per_call_cost(base_url: str, calls: list[LLMCall], claims: bool, rounds: int) -> dict[str, float]:
    target = stage(settings_for(base_url, claims=claims))

    async def run() -> list[tuple[float, float, int, int, int]]:
        await target.judge(calls[0])  # warm-up: connections, embedding session
        rows = []
        for _ in range(rounds):
            for call in calls:
                wall, cpu = time.perf_counter(), time.process_time()
                results = await target.judge(call)
                wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
                usage = [r.evidence.get(USAGE_KEY, {}) for r in results]
                assert all(r.status == "ok" for r in results), [r.summary for r in results]
                reserved = sum(detector.estimated_tokens(call) for detector in target.detectors)
                rows.append((wall, cpu, sum(u["requests"] for u in usage), sum(u["tokens"] for u in usage), reserved))
        await target.close()
        return rows

    rows = asyncio.run(run())
    walls = sorted(row[0] for row in rows)
    return {
        "calls": len(rows),
        "requests": statistics.mean(row[2] for row in rows),
        "tokens": statistics.mean(row[3] for row in rows),
        "tokens_reserved": statistics.mean(row[4] for row in rows),  # the budget's upper estimate
        "latency_p50_ms": 1000 * walls[len(walls) // 2],
        "latency_p95_ms": 1000 * walls[int(len(walls) * 0.95)],
        "cpu_ms": 1000 * statistics.mean(row[1] for row in rows),
    }


def hot_path(base_url: str, traces: int, runs: int) -> dict[str, Any]:
    """Spans/s of the processor alone and with each sampler's ``sample`` after every batch.

    Both are timed in the same pass over the same batches (``sample`` separately), so the
    ratio is what sampling adds, free of the machine's noise between runs.
    """
    messages = [
        InboundMessage(t.resource_spans[0].scope_spans[0].spans[0].trace_id.hex().encode(), t.SerializeToString())
        for t in mixed_traffic(traces)
    ]
    thresholds = load_thresholds()
    processor = SpanBatchProcessor(suite_from_settings(Settings(), thresholds), thresholds.version)
    samplers = {"1%": stage(settings_for(base_url, rate=0.01)), "100%": stage(settings_for(base_url))}
    for i in range(0, len(messages), 500):  # warm-up: the grounding detector's window cache
        processor.process(messages[i : i + 500])
    processing: list[float] = []
    sampling: dict[str, list[float]] = {name: [] for name in samplers}
    sampled = dict.fromkeys(samplers, 0)
    for _ in range(runs):
        spent = dict.fromkeys(["off", *samplers], 0.0)
        for i in range(0, len(messages), 500):
            started = time.perf_counter()
            calls = processor.process(messages[i : i + 500]).llm_calls
            spent["off"] += time.perf_counter() - started
            for name, sampler in samplers.items():
                started = time.perf_counter()
                sampled[name] += len(sampler.sample(calls))
                spent[name] += time.perf_counter() - started
        processing.append(spent["off"])
        for name in samplers:
            sampling[name].append(spent[name])
    spans = traces * 20
    off = statistics.median(processing)
    return {
        "spans_per_s": {
            "off": spans / off,
            **{name: spans / (off + statistics.median(times)) for name, times in sampling.items()},
        },
        "sample_ms_per_batch": {
            name: 1000 * statistics.median(times) / -(-len(messages) // 500) for name, times in sampling.items()
        },
        "sampled_per_run": {name: count // runs for name, count in sampled.items()},
        "llm_calls_per_run": traces,
        "ratio": {name: off / (off + statistics.median(times)) for name, times in sampling.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--llm-latency", type=float, default=0.3, help="seconds the local endpoint takes per answer")
    parser.add_argument("--rounds", type=int, default=3, help="passes over the example calls")
    parser.add_argument("--traces", type=int, default=3000, help="mixed-traffic traces (20 spans, 1 LLM span)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    parent, child = multiprocessing.Pipe()
    server = multiprocessing.Process(target=serve, args=(child, args.llm_latency), daemon=True)
    server.start()
    base_url = parent.recv()
    try:
        calls = example_calls()
        report = {
            "llm_latency_s": args.llm_latency,
            "self_consistency": per_call_cost(base_url, calls, claims=False, rounds=args.rounds),
            "self_consistency_and_claims": per_call_cost(base_url, calls, claims=True, rounds=args.rounds),
            "hot_path": hot_path(base_url, args.traces, args.runs),
        }
    finally:
        parent.send("stop")
        server.join(10)
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"per sampled call, endpoint latency {args.llm_latency:g} s:")
    for name in ("self_consistency", "self_consistency_and_claims"):
        c = report[name]
        print(
            f"  {name:<28} {c['requests']:.1f} requests, {c['tokens']:,.0f} tokens "
            f"({c['tokens_reserved']:,.0f} reserved), latency p50 "
            f"{c['latency_p50_ms']:,.0f} ms / p95 {c['latency_p95_ms']:,.0f} ms, worker CPU {c['cpu_ms']:.1f} ms "
            f"({c['calls']} calls)"
        )
    hot = report["hot_path"]
    print(f"hot path (spans/s, median of {args.runs}; {hot['llm_calls_per_run']} LLM calls per run):")
    print(f"  sampling off    {hot['spans_per_s']['off']:>9,.0f}")
    for name, ratio in hot["ratio"].items():
        print(
            f"  sampling {name:<6} {hot['spans_per_s'][name]:>9,.0f}   ratio {ratio:.4f}, sample() "
            f"{hot['sample_ms_per_batch'][name]:.2f} ms per 500-trace batch, "
            f"sampled per run: {hot['sampled_per_run'][name]}"
        )


if __name__ == "__main__":
    main()
