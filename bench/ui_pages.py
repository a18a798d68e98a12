"""Triage page loads (pipeline/ui) over a ClickHouse holding ~1 million findings.

Fills a fresh embedded chDB (a temporary directory, or ``--data-dir``) with INSERT ... SELECT
FROM numbers(): N findings rows (8 detectors per LLM call, so N/8 calls; 1 or 2 calls per
trace; a quarter of the calls are suspect and each of their detectors flags with p = 0.4, so
~10 % of the rows are flagged; 6 services, 4 operations, 5 models; start times over the last
30 days, ingested in time order in ``--batches`` inserts, so each table has several parts as a
long-running one does; summaries and JSON evidence of a few hundred bytes, flagged evidence
with a ``spans`` list of answer offsets), the calls' ``llm_calls`` rows (prompt, grounding and
answer of ~1-2 kB each, word-list text so it compresses like prose), ~0.5 % replayed findings
(duplicates that only FINAL or grouping folds away), ~2,000 ``alerts`` rows and a few hundred
``labels``.  ``--optimize`` merges every table to one part per partition (OPTIMIZE FINAL).

Then times full requests through the werkzeug test client (routing, bearer-token check, every
TriageStore query, template rendering): the list page unfiltered, by service, by detector, by
rule, alerted only, a deep page (page=20) and a 24-hour window; the trace page of traces with
alerted, flagged and only clean calls.  After a warm-up, ``--requests`` per kind, interleaved;
p50/p95 ms per kind, and the time spent in each TriageStore query.  ``--http`` repeats it
through waitress (4 threads, as ``halluwatch ui``) and ``requests``.  ``--without-trace-indexes``
drops the trace_id skip indexes (the state before migration 009); ``--codec ZSTD(3)`` copies the
data into a second database whose text and id columns use that codec and times both, alternating.

    .venv/bin/python bench/ui_pages.py [--findings 1000000] [--requests 30] [--optimize] [--http]
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import random
import re
import statistics
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pydantic import SecretStr
from werkzeug.test import Client

from pipeline.config.ui import UISettings
from pipeline.sinks.clickhouse import connect, migrate
from pipeline.ui.queries import TriageStore
from pipeline.ui.web import create_app

DB = "halluwatch"
TABLES = ("findings", "llm_calls", "alerts", "labels")
CODEC_DB = "with_codec"  # the same rows with a candidate codec (--codec, and bench/storage.py)
# The columns a codec could pay on: text (what LZ4, ClickHouse's default, compresses without entropy
# coding) and the hex ids.  Numbers and LowCardinality columns are small already (bench/README.md).
CODEC_CANDIDATES = {
    "llm_calls": ("trace_id", "span_id", "parent_span_id", "prompt", "answer", "grounding", "logprobs_json",
                  "attributes", "erasable"),
    "findings": ("trace_id", "span_id", "summary", "evidence"),
    "alerts": ("summary", "evidence"),
}  # fmt: skip
TOKEN = "bench-token-0123456789"  # noqa: S105 - a made-up token for the bench's own app
DETECTORS = [
    "sentinel", "contradiction", "confidence", "grounding",
    "schema_violation", "unsupported_spans", "tool_outcome", "tool_facts",
]  # fmt: skip
SERVICES = ["hr-assistant", "travel-guide", "product-qa", "support-bot", "code-helper", "sales-agent"]
OPERATIONS = ["chat", "text_completion", "generate_content", "invoke_agent"]
MODELS = ["gpt-4o", "gpt-4o-mini", "claude-sonnet-4", "llama-3.1-70b", "gemini-2.0-flash"]
RULES = ["grounding-and-schema", "severe-contradiction", "claimed-failed-tool", "two-detectors"]
WORDS = (  # noqa: SIM905 - a word list reads better as text
    "the a of to and in is that for on with as was by at from it be this are or an which policy "
    "employee leave days annual request manager approval travel booking flight hotel refund order "
    "product warranty return shipping customer account invoice payment balance contract clause "
    "section document source according stated answer question context retrieved passage record "
    "number date year month week amount total percent price plan benefit coverage claim report "
    "quarter revenue growth team office remote hybrid schedule meeting deadline project release "
    "version feature error service system database query table index partition merge replica "
    "latency throughput request response token model prompt grounding evidence summary detector "
    "score threshold severity flagged supported unsupported contradicts confirms mentions lists "
    "however therefore also only not never always usually before after during within between "
    "must should may can will would could eligible required allowed limited extended approved "
    "Berlin Paris London Tokyo Madrid Lisbon Oslo Vienna Prague Dublin 2024 2025 2026 30 14 90 12"
).split()
SPAN_DAYS = 30


def words(seed: str, key: str, low: int, high: int) -> str:
    """SQL for a text of ``low``..``high`` words drawn from WORDS, deterministic in (seed, key)."""
    return (
        f"arrayStringConcat(arrayMap(k -> W[1 + cityHash64('{seed}', {key}, k) % length(W)], "
        f"range({low} + cityHash64('{seed}#', {key}) % {high - low + 1})), ' ')"
    )


def common() -> str:
    """The WITH clause every fill statement shares: word list, value sets, call -> trace and time."""
    array = "[" + ", ".join(f"'{w}'" for w in WORDS) + "]"
    sets = {"SVC": SERVICES, "OPS": OPERATIONS, "MODELS": MODELS, "DETS": DETECTORS, "RULES": RULES}
    defs = [f"{array} AS W"] + ["[" + ", ".join(f"'{v}'" for v in vals) + f"] AS {name}" for name, vals in sets.items()]
    return "WITH " + ", ".join(defs)


def call_columns(end_us: int, calls: int, call: str) -> str:
    """SELECT-list items describing call number ``call`` (trace, ids, service..., start time)."""
    span_us = SPAN_DAYS * 86_400 * 1_000_000
    # Calls 3k, 3k+1, 3k+2 -> traces 2k, 2k+1, 2k+1: one trace in two holds two LLM calls.
    return f"""
        {call} - intDiv({call}, 3) AS trace_no,
        lower(hex(MD5(concat('trace', toString(trace_no))))) AS trace_id,
        substring(lower(hex(MD5(concat('span', toString({call}))))), 1, 16) AS span_id,
        SVC[1 + cityHash64('svc', trace_no) % length(SVC)] AS service,
        OPS[1 + cityHash64('op', {call}) % length(OPS)] AS operation,
        MODELS[1 + cityHash64('model', {call}) % length(MODELS)] AS model,
        fromUnixTimestamp64Micro(toInt64({end_us} - intDiv(({calls} - {call}) * {span_us}, {calls})
            + cityHash64('jitter', {call}) % 1000000), 'UTC') AS start_time,
        cityHash64('suspect', {call}) % 4 = 0 AS suspect"""


def fill(client: Any, findings: int, batches: int, replay_per_mille: int) -> dict[str, float]:
    """Fill the tables; returns seconds per step."""
    calls = findings // len(DETECTORS)
    end_us = int(datetime.now(UTC).replace(second=0, microsecond=0).timestamp() * 1e6)
    timings: dict[str, float] = {}
    head = common()
    started = time.perf_counter()
    for batch in range(batches):
        lo, hi = calls * batch // batches, calls * (batch + 1) // batches
        client.command(f"""
            INSERT INTO {DB}.llm_calls (trace_id, span_id, parent_span_id, service, span_name, convention,
                provider, model, operation, start_time, end_time, duration_ms, input_tokens, output_tokens,
                finish_reason, input_messages, output_messages, tool_calls, tool_definitions, sources,
                sources_from, logprob_tokens, content_mode, content_source, prompt, grounding, answer,
                attributes, erasable, p_hallucination, verdict_version, flagged, ingested_at)
            {head}
            SELECT trace_id, span_id, substring(lower(hex(MD5(concat('parent', toString(trace_no))))), 1, 16),
                service, concat(operation, ' ', model), 'gen_ai', 'openai', model, operation,
                start_time, start_time + toIntervalMillisecond(dur), dur, 300 + number % 900, 100 + number % 400,
                'stop', 3, 1, 0, 0, 2, 'span', 0, 'full', 'span',
                {words("prompt", "number", 150, 300)}, {words("ground", "number", 150, 300)},
                {words("answer", "number", 170, 300)},
                map('gen_ai.system', 'openai', 'server.address', 'api.example.com'),
                map('user.id', concat('user-', toString(cityHash64('user', trace_no) % 20000)),
                    'session.id', lower(hex(MD5(concat('session', toString(intDiv(trace_no, 4))))))),
                p, '2-bench', suspect AND p >= 0.6, start_time + toIntervalSecond(2)
            FROM (SELECT number, {call_columns(end_us, calls, "number")},
                         200 + cityHash64('dur', number) % 4000 AS dur,
                         (if(suspect, 500, 0) + cityHash64('p', number) % 500) / 1000 AS p
                  FROM numbers({lo}, {hi - lo}))
            """)  # noqa: S608 - bench-made SQL, no outside input
    timings["llm_calls"] = time.perf_counter() - started
    started = time.perf_counter()
    per = len(DETECTORS)
    for batch in range(batches):
        lo, hi = calls * batch // batches * per, calls * (batch + 1) // batches * per
        client.command(f"""
            INSERT INTO {DB}.findings (trace_id, span_id, service, model, operation, detector, detector_version,
                thresholds_version, status, score, threshold, flagged, severity, summary, evidence,
                span_start_time, created_at)
            {head}
            SELECT trace_id, span_id, service, model, operation, detector, '1.2', 'v7',
                if(not flagged AND cityHash64('skip', number) % 20 = 0, 'skipped', 'ok'),
                if(flagged, 0.7 + (cityHash64('score', number) % 300) / 1000,
                            (cityHash64('score', number) % 600) / 1000),
                0.65, flagged, if(flagged, 1 + cityHash64('sev', number) % 5, 0),
                if(flagged, concat(detector, ': ', {words("sum", "number", 25, 45)}),
                            concat(detector, ': ', {words("sum", "number", 8, 20)})),
                concat('{{"spans":[',
                    if(flagged, concat(
                        '{{"start":', toString(s1), ',"end":', toString(s1 + 20 + s1 % 80),
                        ',"source_text":"', {words("src1", "number", 12, 25)}, '"}},',
                        '{{"start":', toString(s2), ',"end":', toString(s2 + 20 + s2 % 80),
                        ',"source_text":"', {words("src2", "number", 12, 25)}, '"}}'), ''),
                    '],"sentences":[{{"start":', toString(s1), ',"end":', toString(s1 + 40),
                    ',"support":0.', toString(number % 10), '}}],"note":"', {words("note", "number", 10, 30)}, '"}}'),
                start_time, start_time + toIntervalSecond(3)
            FROM (SELECT number, intDiv(number, {per}) AS call, {call_columns(end_us, calls, "call")},
                         DETS[1 + number % {per}] AS detector,
                         suspect AND cityHash64('flag', number) % 10 < 4 AS flagged,
                         cityHash64('s1', number) % 300 AS s1, 400 + cityHash64('s2', number) % 300 AS s2
                  FROM numbers({lo}, {hi - lo}))
            """)  # noqa: S608 - bench-made SQL, no outside input
    if replay_per_mille:  # a worker replaying after a crash: the same rows again, written later
        client.command(f"""
            INSERT INTO {DB}.findings SELECT * REPLACE (created_at + toIntervalSecond(60) AS created_at)
            FROM {DB}.findings WHERE cityHash64('replay', trace_id, detector) % 1000 < {replay_per_mille}
            """)  # noqa: S608
    timings["findings"] = time.perf_counter() - started
    started = time.perf_counter()
    # ~1,150 traces with two or more flagged detectors alerted: the page route to PagerDuty and
    # Slack, the slack route to Slack; one in ten also left an earlier in-flight retry row.
    client.command(f"""
        INSERT INTO {DB}.alerts (alert_id, trace_id, rule, route, destination, service, model, operation,
            severity, detectors, summary, evidence, status, attempts, error, state_version, created_at, updated_at)
        {head}
        SELECT lower(hex(MD5(concat(trace_id, rule)))), trace_id, rule,
            if(rule = 'two-detectors', 'slack', 'page'), destination, service, model,
            operation, top_severity, flagged_by, top_summary, '{{"detectors":{{}}}}',
            if(version = 1, 'retrying', if(cityHash64('st', trace_id) % 50 = 0, 'failed', 'delivered')),
            version, if(version = 1, 'HTTP 503', ''), version, created, created + toIntervalSecond(version)
        FROM (SELECT trace_id, any(service) AS service, any(model) AS model, any(operation) AS operation,
                     max(severity) AS top_severity, arraySort(groupUniqArray(detector)) AS flagged_by,
                     argMax(summary, severity) AS top_summary, max(span_start_time) + toIntervalSecond(5) AS created,
                     RULES[1 + cityHash64('rule', trace_id) % length(RULES)] AS rule
              FROM {DB}.findings WHERE flagged GROUP BY trace_id HAVING uniqExact(detector) >= 2
              ORDER BY cityHash64('alerted', trace_id) LIMIT 1150)
        ARRAY JOIN if(rule = 'two-detectors', ['slack:#halluwatch-alerts'],
                      ['pagerduty', 'slack:#halluwatch-alerts']) AS destination
        ARRAY JOIN if(cityHash64('retry', trace_id) % 10 = 0, [1, 2], [2]) AS version
        """)  # noqa: S608
    client.command(f"""
        INSERT INTO {DB}.labels (trace_id, span_id, label, detector, labeller, labelled_at, note, source)
        SELECT trace_id, span_id, cityHash64('label', span_id) % 3 != 0, detector,
            ['ana', 'bo', 'chen'][1 + cityHash64('who', span_id) % 3], max_time + toIntervalMinute(30),
            'checked against the handbook', if(cityHash64('src', span_id) % 2 = 0, 'ui', 'slack')
        FROM (SELECT trace_id, span_id, any(detector) AS detector, max(span_start_time) AS max_time
              FROM {DB}.findings WHERE flagged AND trace_id IN (SELECT trace_id FROM {DB}.alerts)
              GROUP BY trace_id, span_id ORDER BY cityHash64('labelled', span_id) LIMIT 300)
        """)  # noqa: S608
    timings["alerts+labels"] = time.perf_counter() - started
    return timings


def counts(client: Any) -> dict[str, tuple[int, int]]:
    """Rows and active parts per table."""
    out = {}
    for table in ("findings", "llm_calls", "alerts", "labels"):
        rows = client.query(f"SELECT count() FROM {DB}.{table}").result_rows[0][0]  # noqa: S608
        parts = client.query(
            "SELECT count() FROM system.parts WHERE database = {db:String} AND table = {t:String} AND active",
            parameters={"db": DB, "t": table},
        ).result_rows[0][0]
        out[table] = (int(rows), int(parts))
    return out


def copy_with_codec(client: Any, database: str, codec: str) -> None:
    """The tables of DB again in ``database``, CODEC_CANDIDATES compressed with ``codec``, rows copied."""
    client.command(f"CREATE DATABASE IF NOT EXISTS {database}")
    for table in TABLES:
        client.command(f"CREATE TABLE {database}.{table} AS {DB}.{table}")
        if table in CODEC_CANDIDATES:
            changes = ", ".join(f"MODIFY COLUMN {column} CODEC({codec})" for column in CODEC_CANDIDATES[table])
            client.command(f"ALTER TABLE {database}.{table} {changes}")
        client.command(f"INSERT INTO {database}.{table} SELECT * FROM {DB}.{table}")  # noqa: S608 - bench-made SQL


def trace_indexes(client: Any) -> list[tuple[str, str]]:
    """(table, index) of every data-skipping index on trace_id in the database."""
    return [
        (table, name)
        for table, name in client.query(
            "SELECT table, name FROM system.data_skipping_indices WHERE database = {db:String} AND expr = 'trace_id'"
            " ORDER BY table",
            parameters={"db": DB},
        ).result_rows
    ]


def sample_traces(client: Any, per_kind: int, seed: int) -> dict[str, list[str]]:
    """Random traces: alerted, flagged but not alerted, and with no flagged finding."""

    def pick(sql: str) -> list[str]:
        return [r[0] for r in client.query(sql, parameters={"seed": seed, "n": per_kind}).result_rows]

    alerted = f"SELECT DISTINCT trace_id FROM {DB}.alerts"  # noqa: S608
    by_trace = f"SELECT trace_id, max(flagged) AS any_flagged FROM {DB}.findings GROUP BY trace_id"  # noqa: S608
    order = "ORDER BY cityHash64(trace_id, {seed:UInt64}) LIMIT {n:UInt32}"
    return {
        "trace: alerted": pick(f"{alerted} {order}"),
        "trace: flagged": pick(
            f"SELECT trace_id FROM ({by_trace}) WHERE any_flagged AND trace_id NOT IN ({alerted}) {order}"  # noqa: S608
        ),
        "trace: clean": pick(f"SELECT trace_id FROM ({by_trace}) WHERE NOT any_flagged {order}"),  # noqa: S608
    }


def page_kinds(client: Any, traces: dict[str, list[str]]) -> dict[str, list[str]]:
    """Paths to request, per kind (the list pages: one path each; trace pages: one per trace)."""
    newest = client.query(f"SELECT max(span_start_time) FROM {DB}.findings").result_rows[0][0]  # noqa: S608
    since = (newest - timedelta(hours=24)).strftime("%Y-%m-%dT%H:%M")
    until = (newest + timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M")
    kinds = {
        "list: unfiltered": ["/"],
        "list: service": ["/?service=travel-guide"],
        "list: detector": ["/?detector=grounding"],
        "list: rule": ["/?rule=two-detectors"],
        "list: alerted only": ["/?alerted=1"],
        "list: page 20": ["/?page=20"],
        "list: most likely first": ["/?order=probability"],
        "list: last 24 h": [f"/?since={since}&until={until}"],
    }
    return kinds | {kind: [f"/trace/{t}" for t in ids] for kind, ids in traces.items()}


class QueryClock:
    """Wraps TriageStore._rows to time each query, named by what it reads."""

    def __init__(self) -> None:
        self.spent: dict[str, float] = defaultdict(float)
        self._original = TriageStore._rows

    def install(self) -> None:
        original, spent = self._original, self.spent

        def timed(store: TriageStore, sql: str, params: dict[str, Any] | None = None) -> list[tuple[Any, ...]]:
            started = time.perf_counter()
            try:
                return original(store, sql, params)
            finally:
                spent[query_name(sql)] += time.perf_counter() - started

        TriageStore._rows = timed  # type: ignore[method-assign, assignment]

    def take(self) -> dict[str, float]:
        out = dict(self.spent)
        self.spent.clear()
        return out


def query_name(sql: str) -> str:
    if "page_spans" in sql:
        return "summaries of listed calls"
    if "DISTINCT" in sql:
        return "choices (4 DISTINCT)"
    if "groupUniqArray(rule)" in sql:
        return "rules of listed traces"
    if "GROUP BY trace_id, span_id" in sql:
        return "flagged calls (GROUP BY)"
    table = re.search(r"FROM \S+\.(\w+)", sql)
    return f"trace: {table.group(1) if table else '?'} FINAL"


Fetch = Callable[[str], tuple[int, int]]  # path -> (status, body bytes)


def measure(
    fetch: Fetch,
    kinds: dict[str, list[str]],
    requests_per_kind: int,
    warmup: int,
    clock: QueryClock,
    rng: random.Random,
) -> dict[str, dict[str, Any]]:
    """Per kind: request times (ms) and mean ms per request spent in each query."""
    for paths in kinds.values():  # warm-up: every kind, different trace pages from the timed order
        for path in paths[:warmup] if len(paths) > 1 else paths * warmup:
            status, _ = fetch(path)
            assert status == 200, (path, status)
    clock.take()
    # Interleave kinds round by round, so a noisy moment on the host hits every kind alike.
    plan = {kind: [paths[i % len(paths)] for i in range(requests_per_kind)] for kind, paths in kinds.items()}
    for paths in plan.values():
        rng.shuffle(paths)
    results: dict[str, dict[str, Any]] = {kind: {"ms": [], "queries": defaultdict(float), "bytes": 0} for kind in kinds}
    for i in range(requests_per_kind):
        for kind, paths in plan.items():
            started = time.perf_counter()
            status, size = fetch(paths[i])
            elapsed = time.perf_counter() - started
            assert status == 200, (paths[i], status)
            results[kind]["ms"].append(elapsed * 1000)
            results[kind]["bytes"] = max(results[kind]["bytes"], size)
            for name, seconds in clock.take().items():
                results[kind]["queries"][name] += seconds * 1000 / requests_per_kind
    return results


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def report(title: str, results: dict[str, dict[str, Any]]) -> None:
    print(f"\n{title}\n")
    print("| page | p50 ms | p95 ms | max ms | of which queries, mean ms | largest page KiB |")
    print("|---|---|---|---|---|---|")
    for kind, result in results.items():
        ms = result["ms"]
        queries = ", ".join(
            f"{name} {value:.0f}" for name, value in sorted(result["queries"].items(), key=lambda kv: -kv[1])
        )
        print(
            f"| {kind} | {statistics.median(ms):.0f} | {percentile(ms, 0.95):.0f} | {max(ms):.0f} | "
            f"{queries} | {result['bytes'] / 1024:.0f} |"
        )
    over = [kind for kind, result in results.items() if percentile(result["ms"], 0.95) > 300]
    print(f"\nover 300 ms at p95: {', '.join(over) or 'none'}")
    every = [ms for result in results.values() for ms in result["ms"]]
    print(f"all pages: p50 {statistics.median(every):.0f} ms, p95 {percentile(every, 0.95):.0f} ms")


def explain(client: Any, trace_id: str) -> None:
    """Granules each index leaves for one trace's rows (the trace page's reads)."""
    for table in ("findings", "llm_calls", "alerts", "labels"):
        rows = client.query(
            f"EXPLAIN indexes = 1 SELECT count() FROM {DB}.{table} WHERE trace_id = {{t:String}}",  # noqa: S608
            parameters={"t": trace_id},
        ).result_rows
        steps, stage = [], ""
        for line in (r[0].strip() for r in rows):
            if line in ("Min-Max", "Partition", "PrimaryKey", "Skip"):
                stage = line
            elif line.startswith("Name:") and stage == "Skip":
                stage = line.removeprefix("Name:").strip()
            elif line.startswith("Granules:") and stage:
                steps.append(f"{stage} {line.removeprefix('Granules:').strip()}")
                stage = ""
        print(f"  {table}: granules left by " + ", ".join(steps))


def http_server(app: Any) -> str:
    """The app under waitress as `halluwatch ui` serves it (4 threads), at a local address.

    Left running in a daemon thread until the process exits: closing waitress's socket under
    its select loop from another thread only makes it print a traceback.
    """
    from waitress import create_server

    logging.getLogger("waitress").setLevel(logging.ERROR)  # "Task queue depth is 1" on every request
    server = create_server(app, host="127.0.0.1", port=0, threads=4)
    threading.Thread(target=server.run, daemon=True).start()
    return f"http://127.0.0.1:{server.effective_port}"


def compare_codec(
    client: Any,
    fetch: Fetch,
    kinds: dict[str, list[str]],
    args: argparse.Namespace,
    clock: QueryClock,
    rng: random.Random,
) -> None:
    """The same pages over the same rows as stored and with ``args.codec`` (CODEC_DB), alternating, in one process."""
    copy_with_codec(client, CODEC_DB, args.codec)
    if args.optimize:
        for table in TABLES:
            client.command(f"OPTIMIZE TABLE {CODEC_DB}.{table} FINAL")
    codec_client = Client(create_app(TriageStore(client, CODEC_DB), UISettings(token=SecretStr(TOKEN))))
    headers = {"Authorization": f"Bearer {TOKEN}"}

    def fetch_codec(path: str) -> tuple[int, int]:
        response = codec_client.get(path, headers=headers)
        return response.status_code, len(response.data)

    sides: dict[str, dict[str, list[float]]] = {"as stored": defaultdict(list), args.codec: defaultdict(list)}
    per_round = max(args.requests // args.rounds, 1)
    for round_no in range(args.rounds):  # which side goes first alternates too
        order = [("as stored", fetch), (args.codec, fetch_codec)]
        for side, get in order if round_no % 2 == 0 else order[::-1]:
            for kind, result in measure(get, kinds, per_round, args.warmup, clock, rng).items():
                sides[side][kind] += result["ms"]
    print(f"\n{args.rounds} alternating rounds of {per_round} requests per kind and side:\n")
    print(f"| page | p50 ms as stored | p50 ms {args.codec} | ratio |")
    print("|---|---|---|---|")
    for kind in kinds:
        stored, coded = (statistics.median(sides[side][kind]) for side in sides)
        print(f"| {kind} | {stored:.0f} | {coded:.0f} | {coded / stored:.2f} |")
    every = [statistics.median([ms for values in sides[side].values() for ms in values]) for side in sides]
    print(f"| all pages | {every[0]:.0f} | {every[1]:.0f} | {every[1] / every[0]:.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--findings", type=int, default=1_000_000, help="findings rows (8 per call)")
    parser.add_argument("--batches", type=int, default=10, help="inserts per table (parts before merges)")
    parser.add_argument("--replay-per-mille", type=int, default=5, help="findings re-inserted as replays")
    parser.add_argument("--optimize", action="store_true", help="OPTIMIZE TABLE ... FINAL after the fill")
    parser.add_argument("--requests", type=int, default=30, help="timed requests per page kind")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--traces", type=int, default=48, help="trace pages, split over alerted/flagged/clean")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--http", action="store_true", help="also through waitress and requests")
    parser.add_argument("--data-dir", type=Path, help="chDB directory (default: a temporary one)")
    parser.add_argument("--explain", action="store_true", help="print index use of the trace page's reads")
    parser.add_argument(
        "--without-trace-indexes", action="store_true", help="drop the trace_id skip indexes first (before 009)"
    )
    parser.add_argument("--codec", help="also copy the data with this codec (ZSTD(3)) and time both, alternating")
    parser.add_argument("--rounds", type=int, default=4, help="with --codec: alternations (--requests each side)")
    args = parser.parse_args()

    with contextlib.ExitStack() as stack:
        data_dir = args.data_dir or Path(
            stack.enter_context(tempfile.TemporaryDirectory(prefix="halluwatch-ui-bench-"))
        )
        client = connect(f"chdb://{data_dir}")
        migrate(client, DB)
        if args.without_trace_indexes:  # the "before" of migration 009: primary keys only
            for table, name in trace_indexes(client):
                client.command(f"ALTER TABLE {DB}.{table} DROP INDEX {name}")
        existing = counts(client)["findings"][0]
        if existing:
            print(f"{data_dir}: {existing:,} findings rows already there, not filling")
        else:
            started = time.perf_counter()
            steps = fill(client, args.findings, args.batches, args.replay_per_mille)
            print(
                f"fill: {time.perf_counter() - started:.1f} s ("
                + ", ".join(f"{k} {v:.1f} s" for k, v in steps.items())
                + ")"
            )
        if args.optimize:
            started = time.perf_counter()
            for table in ("findings", "llm_calls", "alerts", "labels"):
                client.command(f"OPTIMIZE TABLE {DB}.{table} FINAL")
            print(f"OPTIMIZE ... FINAL: {time.perf_counter() - started:.1f} s")
        flagged = client.query(
            f"SELECT countIf(flagged), uniqExactIf((trace_id, span_id), flagged), uniqExact(trace_id) FROM {DB}.findings"  # noqa: E501, S608
        ).result_rows[0]
        print("rows (active parts): " + ", ".join(f"{t} {r:,} ({p})" for t, (r, p) in counts(client).items()))
        print(f"flagged findings rows {flagged[0]:,} on {flagged[1]:,} calls; {flagged[2]:,} traces")
        indexed = ", ".join(f"{table}.{name}" for table, name in trace_indexes(client))
        print(f"trace_id skip indexes: {indexed or 'none'}")

        rng = random.Random(args.seed)
        traces = sample_traces(client, args.traces // 3, args.seed)
        kinds = page_kinds(client, traces)
        if args.explain:
            explain(client, traces["trace: alerted"][0])

        settings = UISettings(token=SecretStr(TOKEN))
        store = TriageStore(client, DB)
        app: Any = create_app(store, settings)
        headers = {"Authorization": f"Bearer {TOKEN}"}
        clock = QueryClock()
        clock.install()
        test_client = Client(app)

        def in_process(path: str) -> tuple[int, int]:
            response = test_client.get(path, headers=headers)
            return response.status_code, len(response.data)

        parts = counts(client)["findings"][1]
        state = f"findings in {parts} active parts{' after OPTIMIZE FINAL' if args.optimize else ''}"
        if args.codec:
            compare_codec(client, in_process, kinds, args, clock, rng)
            return
        results = measure(in_process, kinds, args.requests, args.warmup, clock, rng)
        report(f"Flask app in process (werkzeug test client), {args.requests} requests per kind, {state}:", results)

        if args.http:
            import requests

            base = http_server(app)
            with requests.Session() as session:
                session.headers.update(headers)

                def over_http(path: str) -> tuple[int, int]:
                    response = session.get(base + path, timeout=30)
                    return response.status_code, len(response.content)

                results = measure(over_http, kinds, args.requests, args.warmup, clock, rng)
            report(
                f"HTTP (waitress, 4 threads; requests, keep-alive), {args.requests} requests per kind, {state}:",
                results,
            )


if __name__ == "__main__":
    main()
