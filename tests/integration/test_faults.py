"""Fault injection (docs/operations.md): a worker killed again and again, a broker gone, a ClickHouse that fails.

Each test sends keyed mixed traffic (one LLM span per trace), breaks something while the
worker is mid-stream, lets it recover, and then checks what ClickHouse holds and what was
alerted: every LLM span stored once with one finding per detector (nothing lost, nothing
twice once duplicates merge), and exactly the alerts those findings call for.  Each prints
the counts it asserted on (``pytest -s`` shows them).
"""

from __future__ import annotations

import random
import signal
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from clickhouse_connect.driver.client import Client
from confluent_kafka import Message
from opentelemetry.proto.trace.v1.trace_pb2 import TracesData

from pipeline.tools.demo_broker import TansuBroker, free_port
from pipeline.tools.example_traces import mixed_traffic
from tests.integration.faults import (
    Alerted,
    ClickHouseFault,
    ClickHouseShim,
    Query,
    Stored,
    TcpProxy,
    assert_alerts_match_findings,
    assert_stored_exactly_once,
    keyed_messages,
    read_topic,
    records_in,
    rss_bytes,
)
from tests.integration.support import (
    WorkerProcess,
    committed_offsets,
    committed_total,
    produce,
    wait_until_committed,
)

pytestmark = pytest.mark.usefixtures("exported_model")

MESSAGES_DONE = "halluwatch_messages_done_total"
WRITE_RETRIES = "halluwatch_write_retries_total"
# Small batches: many batch boundaries, so faults land between a batch's writes and its commit.
BATCH_MESSAGES = 10
SMALL_BATCHES = {"batch_max_messages": str(BATCH_MESSAGES), "batch_max_wait_seconds": "0.05"}
WORKER_DATABASE = "halluwatch"  # the default, in the worker's embedded chDB


def _traffic(n_traces: int, seed: int) -> list[TracesData]:
    """``n_traces`` traces of 5 spans, one of them an LLM span; ``seed`` fixes their ids."""
    return list(mixed_traffic(n_traces, spans_per_trace=5, llm_spans_per_trace=1, seed=seed))


def _finish(worker: WorkerProcess, bootstrap: str, sent: int, timeout_seconds: float) -> None:
    """Wait until the running worker committed all ``sent`` input messages and the findings they made.

    Findings are published before input offsets are committed, so once the input is
    committed the findings topic is complete; once that is committed too, the agreement
    stage has published every alert it will.
    """
    wait_until_committed(bootstrap, worker.group, worker.input_topic, sent, timeout_seconds)
    findings = records_in(read_topic(bootstrap, worker.findings_topic))
    wait_until_committed(bootstrap, worker.group, worker.findings_topic, findings, timeout_seconds)


def _check_outputs(
    query: Query, database: str, bootstrap: str, worker: WorkerProcess, traces: list[TracesData]
) -> tuple[Stored, Alerted]:
    """Stored rows and published alerts after a finished run: both asserted, both returned to print."""
    stored = assert_stored_exactly_once(query, database, traces)
    alerted = assert_alerts_match_findings(query, database, read_topic(bootstrap, worker.alerts_topic))
    return stored, alerted


def _alive_pid(worker: WorkerProcess) -> int:
    """The worker's process id; fails, with its log, if it exited."""
    assert worker.process is not None
    assert worker.process.poll() is None, f"worker exited with {worker.process.returncode}:\n{worker.log()}"
    return worker.process.pid


def _report(test: str, sent: int, stored: Stored, alerted: Alerted, *details: str) -> None:
    print(f"\n[{test}] sent {sent} messages; {stored}; {alerted}", *details, sep="\n  ")


# --- 1. SIGKILL at random points, ten rounds -------------------------------------------------

KILL_ROUNDS = 10
KILL_SEED = 20261123
TRACES_PER_ROUND = 60  # produced before each round and before the final run


@dataclass(frozen=True)
class KillPoint:
    """When a round's worker is killed: once it has done ``messages`` input messages, ``delay_seconds`` later.

    With ``messages`` 0 the delay counts from the process start, so the kill may land in
    the model load, the migrations, the group join or the first batches.
    """

    messages: int
    delay_seconds: float

    @classmethod
    def draw(cls, rng: random.Random) -> KillPoint:
        if rng.random() < 0.3:
            return cls(0, round(rng.uniform(0.5, 10.0), 2))
        return cls(rng.randint(1, 40), round(rng.uniform(0.0, 0.5), 2))  # mid-stream, often mid-batch

    def wait(self, worker: WorkerProcess) -> None:
        if self.messages:
            worker.wait_for(MESSAGES_DONE, self.messages)
        time.sleep(self.delay_seconds)


@pytest.mark.timeout(300)
def test_sigkill_at_random_points_then_restart(tansu: TansuBroker, topic_prefix: str, tmp_path: Path) -> None:
    """Ten SIGKILLs at seeded random points under a growing backlog, then one run to drain it.

    Proves: committed offsets never move back or past unwritten rows (the drain finds every
    LLM span stored, none twice after merging), and alerts are exactly what the stored
    findings call for.  Does not prove anything about the broker or ClickHouse dying: both
    stay up (the worker's chDB is in its own process and dies with it).
    """
    rng = random.Random(KILL_SEED)
    traces = _traffic(TRACES_PER_ROUND * (KILL_ROUNDS + 1), seed=KILL_SEED)
    chunks = [keyed_messages(traces[i : i + TRACES_PER_ROUND]) for i in range(0, len(traces), TRACES_PER_ROUND)]
    data_dir = tmp_path / "worker"
    sent, committed, rounds = 0, [0], []
    for chunk in chunks[:-1]:
        worker = WorkerProcess(tansu.bootstrap, topic_prefix, data_dir, **SMALL_BATCHES).start()
        sent += produce(tansu.bootstrap, worker.input_topic, chunk)
        point = KillPoint.draw(rng)
        point.wait(worker)
        done = worker.metric(MESSAGES_DONE)
        assert worker.stop(signal.SIGKILL) == -signal.SIGKILL
        committed.append(committed_total(tansu.bootstrap, worker.group, worker.input_topic))
        assert committed[-1] >= committed[-2], "committed offsets went back"
        rounds.append(f"kill at {point}: {done:.0f} done, {committed[-1]} of {sent} committed")
    # A kill may land after its round's work is all done; the drain always gets the last chunk.

    final = WorkerProcess(tansu.bootstrap, topic_prefix, data_dir, **SMALL_BATCHES).start()
    sent += produce(tansu.bootstrap, final.input_topic, chunks[-1])
    _finish(final, tansu.bootstrap, sent, timeout_seconds=120)
    assert final.stop() == 0, final.log()
    stored, alerted = _check_outputs(final.query, WORKER_DATABASE, tansu.bootstrap, final, traces)
    _report("sigkill", sent, stored, alerted, *rounds)


# --- 2. Broker unreachable for 30 s ----------------------------------------------------------

BROKER_OUTAGE_SECONDS = 32.0


def _stays_alive(worker: WorkerProcess, seconds: float) -> None:
    """Poll the worker process for ``seconds``: it must not exit."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        _alive_pid(worker)
        time.sleep(0.5)


@pytest.mark.timeout(300)
def test_broker_unreachable_for_30s_then_back(topic_prefix: str, tmp_path: Path) -> None:
    """Every connection to the broker cut and refused for 32 s mid-stream; the worker carries on by itself.

    Tansu keeps its log in memory and loses it on restart, so the broker process stays up
    and its connection path goes: every client (worker and test producer) reaches Tansu
    through a proxy it advertises, and the proxy resets all connections and refuses new
    ones.  Proves: the worker survives losing the broker for longer than its session and
    publish-acknowledgement timeouts, finishes nothing but the batch in hand meanwhile (a
    publish in flight is retried), reconnects by itself, then finishes the backlog and the
    traffic sent after the outage with nothing lost or duplicated.  Does not prove:
    anything about broker data loss or a broker restart (log or committed offsets gone);
    nor the rebalance a real Kafka would force by expiring the member (Tansu kept this one
    in its group).
    """
    traces = _traffic(800, seed=1)
    before, after = keyed_messages(traces[:600]), keyed_messages(traces[600:])
    proxy_port = free_port()
    with (
        TansuBroker(log_path=tmp_path / "tansu.log", advertised_port=proxy_port) as broker,
        TcpProxy(proxy_port, broker.port) as proxy,
    ):
        worker = WorkerProcess(proxy.address, topic_prefix, tmp_path / "worker", **SMALL_BATCHES).start()
        sent = produce(proxy.address, worker.input_topic, before)
        worker.wait_for(MESSAGES_DONE, 100)
        committed_at_cut = committed_total(proxy.address, worker.group, worker.input_topic)
        retries_at_cut, done_at_cut = worker.metric(WRITE_RETRIES), worker.metric(MESSAGES_DONE)
        proxy.cut()
        _stays_alive(worker, BROKER_OUTAGE_SECONDS)
        retries = worker.metric(WRITE_RETRIES) - retries_at_cut
        done_in_outage = worker.metric(MESSAGES_DONE) - done_at_cut
        proxy.restore()
        sent += produce(proxy.address, worker.input_topic, after)
        _finish(worker, proxy.address, sent, timeout_seconds=150)
        assert worker.stop() == 0, worker.log()
        stored, alerted = _check_outputs(worker.query, WORKER_DATABASE, proxy.address, worker, traces)
    assert committed_at_cut < len(before), "the cut must land mid-stream"
    assert done_in_outage <= BATCH_MESSAGES, "nothing but the batch in hand can finish without the broker"
    _report(
        "broker",
        sent,
        stored,
        alerted,
        f"cut {proxy.cuts} connections for {BROKER_OUTAGE_SECONDS:g}s at {committed_at_cut} committed; "
        f"{retries:.0f} retries and {done_in_outage:.0f} messages done during the outage",
    )


# --- 3. ClickHouse failing, hanging, refusing ------------------------------------------------

CLICKHOUSE_OUTAGE_SECONDS = 8.0
PADDING_BYTES = 128 * 1024  # per backlog message: a backlog large in bytes that costs little to process
BACKLOG_TRACES = 400  # ~53 MB, produced while ClickHouse is down
# Bounds of what the worker buffers (settings under test), and the RSS growth they must keep it under.
BUFFER_SETTINGS = {"kafka_max_buffered_messages": "20", "kafka_max_fetch_bytes": str(256 * 1024)}
# Measured: 58 MiB with faust's defaults; with these bounds 4-8 MiB before trace facts, 14-16 MiB
# since (the same 14.7 MiB with twice the backlog waiting: a fixed cost, not buffering).
RSS_GROWTH_CAP_BYTES = 24 * 1024 * 1024


def _padded(traces: list[TracesData], size: int) -> list[TracesData]:
    """``traces`` with ``size`` bytes of attribute on each root span: big messages, cheap to process."""
    for trace in traces:
        padding = trace.resource_spans[0].scope_spans[0].spans[0].attributes.add()
        padding.key = "test.padding"
        padding.value.string_value = "x" * size
    return traces


@dataclass
class Outage:
    """One ClickHouse fault as the worker lived it: counters taken at its start and end, RSS sampled between."""

    fault: ClickHouseFault
    requests: int  # requests the shim had received with this fault on, so far
    retries: float  # the worker's write and publish retries, so far
    done: float  # input messages the worker finished, so far
    peak_rss: int = 0
    committed: dict[int, int] = field(default_factory=dict)  # the group's input offsets at the end

    @classmethod
    def begin(cls, worker: WorkerProcess, shim: ClickHouseShim, fault: ClickHouseFault) -> Outage:
        outage = cls(fault, shim.requests[fault], worker.metric(WRITE_RETRIES), worker.metric(MESSAGES_DONE))
        shim.set_fault(fault)
        return outage

    def watch(self, worker: WorkerProcess, seconds: float) -> None:
        """Sample the worker for ``seconds``: it must stay up; its peak RSS is kept."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.peak_rss = max(self.peak_rss, rss_bytes(_alive_pid(worker)))
            time.sleep(0.5)

    def end(self, worker: WorkerProcess, shim: ClickHouseShim, bootstrap: str) -> None:
        """Turn the counters into counts for the outage and record the committed offsets (fault still on)."""
        self.requests = shim.requests[self.fault] - self.requests
        self.retries = worker.metric(WRITE_RETRIES) - self.retries
        self.done = worker.metric(MESSAGES_DONE) - self.done
        self.committed = committed_offsets(bootstrap, worker.group, worker.input_topic)

    def __str__(self) -> str:
        return (
            f"{self.fault}: {self.requests} requests, {self.retries:.0f} retries, {self.done:.0f} messages done, "
            f"{sum(self.committed.values())} committed, peak RSS {self.peak_rss / 2**20:.0f} MiB"
        )


def _stored_traces(query: Query, database: str) -> set[str]:
    """Trace ids with an llm_calls row (one LLM span per trace here)."""
    return {trace_id for (trace_id,) in query(f"SELECT DISTINCT trace_id FROM {database}.llm_calls")}


def _committed_traces(input_messages: Iterable[Message], committed: dict[int, int]) -> set[str]:
    """Trace ids (the keys) of the input messages below the committed offsets: never to be read again."""
    return {
        (m.key() or b"").decode() for m in input_messages if (m.offset() or 0) < committed.get(m.partition() or 0, 0)
    }


def _wait_for_requests(shim: ClickHouseShim, fault: ClickHouseFault, count: int, worker: WorkerProcess) -> None:
    """Wait until the shim has seen ``count`` requests meet ``fault`` (the worker trying again)."""
    deadline = time.monotonic() + 60
    while shim.requests[fault] < count:
        _alive_pid(worker)
        assert time.monotonic() < deadline, f"{shim.requests[fault]} of {count} requests with {fault}"
        time.sleep(0.2)


@pytest.mark.timeout(300)
def test_clickhouse_outage_pauses_retries_and_resumes(
    tansu: TansuBroker, topic_prefix: str, tmp_path: Path, chdb_path: Path, clickhouse: tuple[Client, str]
) -> None:
    """ClickHouse down at start-up, then answering 503, hanging, and refusing connections mid-stream.

    The worker writes over HTTP to a shim that runs the statements on chDB in this process
    (no ClickHouse server here), so "ClickHouse comes back" is the same store answering
    again, and this test reads it directly, also during the faults.  Proves: the worker
    waits for ClickHouse at start-up (migrations retried); during each fault it stays up,
    retries (the shim sees the attempts, or the worker counts them when refused), finishes
    at most the one batch in hand, commits no input whose rows are not stored, and holds
    its RSS within a bound set by ``kafka_max_buffered_messages`` / ``kafka_max_fetch_bytes``
    while a ~53 MB backlog waits; after each it resumes by itself, and in the end every
    LLM span is stored once.  Does not prove behaviour of a real server's partial failures
    (an insert applied but its answer lost is covered only by the idempotent tables, and
    the SIGKILL test).
    """
    client, database = clickhouse

    def query(sql: str) -> list[tuple[object, ...]]:
        return [tuple(row) for row in client.query(sql).result_rows]

    warmup = _traffic(200, seed=2)
    backlog = _padded(_traffic(BACKLOG_TRACES, seed=3), PADDING_BYTES)
    backlog_messages = keyed_messages(backlog)
    backlog_bytes = sum(len(value) for _, value in backlog_messages)
    with ClickHouseShim(chdb_path, read_timeout_seconds=2) as shim:
        shim.set_fault(ClickHouseFault.ERROR)  # down as the worker starts
        settings = {**SMALL_BATCHES, **BUFFER_SETTINGS, "write_retry_max_seconds": "1"}
        worker = WorkerProcess(
            tansu.bootstrap,
            topic_prefix,
            tmp_path / "worker",
            clickhouse_dsn=shim.dsn,
            clickhouse_database=database,
            clickhouse_startup_wait_seconds="60",
            **settings,
        ).start()
        _wait_for_requests(shim, ClickHouseFault.ERROR, 3, worker)
        startup_attempts = shim.requests[ClickHouseFault.ERROR]
        shim.set_fault(ClickHouseFault.NONE)
        sent = produce(tansu.bootstrap, worker.input_topic, keyed_messages(warmup))
        worker.wait_for(MESSAGES_DONE, 50)
        rss_before = rss_bytes(_alive_pid(worker))
        outages: list[Outage] = []
        stored_at_end: list[set[str]] = []
        for fault in (ClickHouseFault.ERROR, ClickHouseFault.HANG, ClickHouseFault.REFUSE):
            outage = Outage.begin(worker, shim, fault)
            if not outages:  # the backlog arrives while ClickHouse is down, and stays through all three
                sent += produce(tansu.bootstrap, worker.input_topic, backlog_messages)
            outage.watch(worker, CLICKHOUSE_OUTAGE_SECONDS)
            outage.end(worker, shim, tansu.bootstrap)
            stored_at_end.append(_stored_traces(query, database))
            shim.set_fault(ClickHouseFault.NONE)
            worker.wait_for(MESSAGES_DONE, worker.metric(MESSAGES_DONE) + 1)  # resumes by itself
            outages.append(outage)
        _finish(worker, tansu.bootstrap, sent, timeout_seconds=150)
        assert worker.stop() == 0, worker.log()
    stored, alerted = _check_outputs(query, database, tansu.bootstrap, worker, warmup + backlog)

    input_messages = read_topic(tansu.bootstrap, worker.input_topic)
    growth = max(outage.peak_rss for outage in outages) - rss_before
    _report(
        "clickhouse",
        sent,
        stored,
        alerted,
        f"start-up: {startup_attempts} attempts while down",
        *map(str, outages),
        f"RSS before {rss_before / 2**20:.0f} MiB, growth {growth / 2**20:.1f} MiB "
        f"(cap {RSS_GROWTH_CAP_BYTES / 2**20:.0f} MiB) with {backlog_bytes / 2**20:.0f} MiB waiting",
    )
    for outage, stored_traces in zip(outages, stored_at_end, strict=True):
        assert _committed_traces(input_messages, outage.committed) <= stored_traces, f"committed unwritten: {outage}"
        assert outage.done <= BATCH_MESSAGES, f"more than the batch in hand finished while down: {outage}"
        assert outage.retries >= 1, f"not retried: {outage}"
    error, hang, refuse = outages
    assert error.requests >= 3 and hang.requests >= 2 and refuse.retries >= 2, "repeated attempts"
    assert backlog_bytes > 2 * RSS_GROWTH_CAP_BYTES, "a backlog within the cap would prove nothing"
    assert growth < RSS_GROWTH_CAP_BYTES, "buffered beyond the configured bounds"


@pytest.mark.timeout(120)
def test_worker_gives_up_clearly_when_clickhouse_never_comes(
    tansu: TansuBroker, topic_prefix: str, tmp_path: Path
) -> None:
    """A worker started with ClickHouse unreachable retries for clickhouse_startup_wait_seconds, then exits 1.

    What an operator expects: not a traceback at the first refusal (ClickHouse may be
    restarting too), not a worker that looks alive but never consumes; one error line that
    names the server (password masked) and the cause.
    """
    password = "s3cret-pw"
    dsn = f"http://halluwatch:{password}@127.0.0.1:{free_port()}"
    worker = WorkerProcess(
        tansu.bootstrap, topic_prefix, tmp_path / "worker", clickhouse_dsn=dsn, clickhouse_startup_wait_seconds="3"
    ).start()
    assert worker.process is not None
    assert worker.process.wait(timeout=90) == 1, worker.log()
    log = worker.log()
    attempts = log.count("not ready, retrying")
    print(f"\n[clickhouse never up] exited 1 after {attempts} retries")
    assert attempts >= 2
    assert "Error: cannot reach ClickHouse at 127.0.0.1:" in log
    assert "(from HALLUWATCH_CLICKHOUSE_DSN): connection refused, for 3s (clickhouse_startup_wait_seconds); " in log
    assert "Traceback" not in log and password not in log
