"""Fault injection for worker tests: a breakable broker path, a breakable ClickHouse, and the checks after.

Everything listens on loopback only.  :class:`TcpProxy` stands between every Kafka client
and a Tansu broker (advertised at the proxy's port), so the broker can become unreachable
while keeping its in-memory log.  :class:`ClickHouseShim` speaks just enough of ClickHouse's
HTTP interface for clickhouse-connect over an in-process chDB, and can answer 5xx, hang, or
refuse connections on demand.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import gzip
import io
import json
import re
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Coroutine, Iterable, Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import chdb
import lz4.frame
from confluent_kafka import OFFSET_BEGINNING, Consumer, Message, TopicPartition
from opentelemetry.proto.trace.v1.trace_pb2 import TracesData

from detectors.thresholds import load_thresholds
from pipeline.agreement.rules import counts_toward_agreement
from pipeline.config.alerting import AlertingSettings
from pipeline.sinks.finding import Finding

# The attribute prefixes that make a span an LLM call, in the conventions the examples use,
# unless it is a tool run or a retrieval (GenAI's execute_tool / retrieval, OpenInference's kinds).
LLM_ATTRIBUTE_PREFIXES = ("gen_ai.", "llm.", "openinference.")
NOT_CALLS = {("gen_ai.operation.name", "execute_tool"), ("gen_ai.operation.name", "retrieval"),
             ("openinference.span.kind", "TOOL"), ("openinference.span.kind", "RETRIEVER")}  # fmt: skip

Query = Callable[[str], list[tuple[Any, ...]]]


def keyed_messages(traces: Iterable[TracesData]) -> list[tuple[bytes, bytes]]:
    """One message per trace, keyed by its hex trace id, as a collector partitioning by trace sends them."""
    return [
        (trace.resource_spans[0].scope_spans[0].spans[0].trace_id.hex().encode(), trace.SerializeToString())
        for trace in traces
    ]


def llm_span_ids(traces: Iterable[TracesData]) -> Iterator[tuple[str, str]]:
    """(trace id, span id) in hex of every LLM span in ``traces``: the rows ``llm_calls`` must hold."""
    for trace in traces:
        for resource_spans in trace.resource_spans:
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    keys = {kv.key for kv in span.attributes}
                    kinds = {(kv.key, kv.value.string_value) for kv in span.attributes}
                    if any(key.startswith(LLM_ATTRIBUTE_PREFIXES) for key in keys) and not kinds & NOT_CALLS:
                        yield span.trace_id.hex(), span.span_id.hex()


@dataclass(frozen=True)
class Stored:
    """What ClickHouse holds for the LLM spans sent, counted before and after merging duplicates away."""

    llm_spans_sent: int
    calls: int  # llm_calls rows, duplicates (not yet merged) included
    calls_distinct: int
    findings: int
    findings_distinct: int
    detectors: int

    def __str__(self) -> str:
        return (
            f"LLM spans sent {self.llm_spans_sent}; llm_calls rows {self.calls} ({self.calls_distinct} distinct); "
            f"findings rows {self.findings} ({self.findings_distinct} distinct, {self.detectors} detectors)"
        )


def assert_stored_exactly_once(query: Query, database: str, traces: Iterable[TracesData]) -> Stored:
    """Every LLM span has its llm_calls row and one finding per detector; nothing else, nothing twice.

    Duplicates from redelivery are legal until the ReplacingMergeTree merges them, so rows
    are counted, then ``OPTIMIZE ... FINAL`` merges them and every identity must be left once.
    """
    expected = set(llm_span_ids(traces))
    calls, findings = (query(f"SELECT count() FROM {database}.{table}")[0][0] for table in ("llm_calls", "findings"))
    stored = set(query(f"SELECT trace_id, span_id FROM {database}.llm_calls FINAL"))
    assert stored == expected, f"{len(expected - stored)} LLM spans lost, {len(stored - expected)} unexpected"
    detectors = query(f"SELECT uniqExact(detector) FROM {database}.findings")[0][0]
    assert detectors >= 5, "one finding per detector per call, flagged or not"
    for table in ("llm_calls", "findings"):
        query(f"OPTIMIZE TABLE {database}.{table} FINAL")
    distinct = [query(f"SELECT count() FROM {database}.{table}")[0][0] for table in ("llm_calls", "findings")]
    assert distinct == [len(expected), len(expected) * detectors], f"duplicates or gaps after merging: {distinct}"
    findings_by_call = query(f"SELECT uniqExact(trace_id, span_id) FROM {database}.findings")[0][0]
    assert findings_by_call == len(expected), "findings for calls that were not sent, or none for some"
    return Stored(len(expected), calls, distinct[0], findings, distinct[1], detectors)


@dataclass(frozen=True)
class Alerted:
    """Alerts the agreement stage published, against what the stored findings call for."""

    published: int  # alert records on the alerts topic, repeats after redelivery included
    traces: int  # distinct traces alerted
    expected_traces: int  # traces whose stored findings make some rule fire

    def __str__(self) -> str:
        return f"alerts published {self.published} for {self.traces} traces ({self.expected_traces} expected)"


def rules_called_for(query: Query, database: str) -> dict[str, list[str]]:
    """The alert rules each trace's stored findings satisfy, highest priority first; traces none fits left out."""
    defaults = AlertingSettings()  # the worker's rules, and its detectors that read one signal (count once)
    rules = [rule.resolved(load_thresholds().alert_probability) for rule in defaults.rules]
    signal_of = defaults.signal_of()
    probability = dict(
        query(f"SELECT trace_id, max(p_hallucination) FROM {database}.llm_calls FINAL GROUP BY trace_id")
    )
    flagged: dict[str, dict[str, int]] = defaultdict(dict)
    sql = f"SELECT trace_id, detector, status, flagged, severity FROM {database}.findings FINAL"
    for trace_id, detector, status, is_flagged, severity in query(sql):
        record = {"trace_id": trace_id, "detector": detector, "status": status, "flagged": is_flagged}
        if counts_toward_agreement(Finding.from_json(record)):
            flagged[trace_id][detector] = severity
    matching = {
        trace: [r.name for r in rules if r.matches(flags, signal_of, probability.get(trace))]
        for trace, flags in flagged.items()
    }
    return {trace: names for trace, names in matching.items() if names}


def assert_alerts_match_findings(query: Query, database: str, alerts: Iterable[Message]) -> Alerted:
    """Exactly the traces whose stored findings satisfy an alert rule were alerted, with the right rules.

    A trace's findings may reach the agreement stage in two batches, so a lower-priority
    rule may fire before the one all its flags make; every rule fired must match the
    trace's flags, and the first (highest-priority) rule they match must be among them.
    """
    expected = rules_called_for(query, database)
    fired: dict[str, set[str]] = defaultdict(set)
    published = 0
    for message in alerts:
        alert = json.loads(message.value() or b"{}")
        fired[alert["trace_id"]].add(alert["rule"])
        published += 1
    missing, wrong = expected.keys() - fired.keys(), fired.keys() - expected.keys()
    assert not missing and not wrong, f"{len(missing)} traces not alerted, {len(wrong)} alerted wrongly"
    for trace, names in expected.items():
        assert names[0] in fired[trace] and fired[trace] <= set(names), (trace, names, fired[trace])
    return Alerted(published, len(fired), len(expected))


def read_topic(bootstrap: str, topic: str, idle_seconds: float = 2.0) -> list[Message]:
    """Every record of ``topic`` from its start, read until none came for ``idle_seconds``.

    For topics nothing writes to any more: Tansu's high watermarks lag behind multi-record
    batches, so "the end" is where records stop coming.
    """
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
    partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
    messages: list[Message] = []
    quiet_since = time.monotonic()
    try:
        while time.monotonic() - quiet_since < idle_seconds:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                messages.append(message)
                quiet_since = time.monotonic()
        return messages
    finally:
        consumer.close()


def records_in(messages: Iterable[Message]) -> int:
    """How many offsets ``messages`` (a whole topic) span: what a group must commit to have read it all."""
    ends: dict[int | None, int] = {}
    for message in messages:
        ends[message.partition()] = max(ends.get(message.partition(), 0), (message.offset() or 0) + 1)
    return sum(ends.values())


class ClickHouseFault(StrEnum):
    """How :class:`ClickHouseShim` treats requests."""

    NONE = "none"  # answers from chDB
    ERROR = "error"  # 503 to everything, as a load balancer with no ClickHouse behind it
    HANG = "hang"  # reads the request, never answers; drops the connection once the fault ends
    REFUSE = "refuse"  # nothing listens: connections are refused


# A statement's trailing FORMAT clause, which picks the answer's format.
_TRAILING_FORMAT = re.compile(r"\s+FORMAT\s+(\w+)\s*;?\s*$", re.IGNORECASE)


class ClickHouseShim:
    """ClickHouse's HTTP interface over an in-process chDB, as far as clickhouse-connect uses it; with faults.

    No ClickHouse server can run here, and embedded chDB has no HTTP interface, so this
    executes requests the way the server does: the SQL is the ``query`` URL parameter, then
    the body; an INSERT's rows follow its ``FORMAT Native`` line (loaded with ``FROM INFILE``);
    a trailing FORMAT picks the answer's format (TabSeparated without one, as for commands);
    errors come back as 500 with ``X-ClickHouse-Exception-Code``.  URL settings and
    ``database`` are ignored (the worker names tables in full); compressed bodies are not
    understood, so clients use :attr:`dsn`, which switches compression off.
    """

    def __init__(self, chdb_path: Path, read_timeout_seconds: float) -> None:
        self._connection = chdb.connect(str(chdb_path.resolve()))  # type: ignore[no-untyped-call]  # chdb: no hints
        self._lock = threading.Lock()  # one statement at a time on the chDB handle; guards `requests` too
        self._fault = ClickHouseFault.NONE
        self._fault_over = threading.Event()
        self._fault_over.set()
        self.requests: Counter[ClickHouseFault] = Counter()  # requests received, by the fault they met
        self._read_timeout_seconds = read_timeout_seconds
        self._server: ThreadingHTTPServer | None = None
        self.port = self._listen(0)

    @property
    def dsn(self) -> str:
        """The worker's ``clickhouse_dsn``: uncompressed, and giving up a request unanswered this long."""
        return f"http://127.0.0.1:{self.port}/?compress=false&send_receive_timeout={self._read_timeout_seconds:g}"

    def set_fault(self, fault: ClickHouseFault) -> None:
        """Start treating requests as ``fault`` says (``NONE``: answer them again)."""
        previous, self._fault = self._fault, fault
        if fault is ClickHouseFault.HANG:
            self._fault_over.clear()
        else:
            self._fault_over.set()  # hung requests end: their connections are dropped unanswered
        if fault is ClickHouseFault.REFUSE and previous is not ClickHouseFault.REFUSE:
            self._close_listener()
        elif previous is ClickHouseFault.REFUSE and fault is not ClickHouseFault.REFUSE:
            self._listen(self.port)

    def close(self) -> None:
        """Stop listening, release hung requests, close the chDB handle."""
        self._fault_over.set()
        self._close_listener()
        self._connection.close()

    def __enter__(self) -> ClickHouseShim:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _listen(self, port: int) -> int:
        server = ThreadingHTTPServer(("127.0.0.1", port), self._handler_class())
        server.daemon_threads = True
        server.block_on_close = False  # a hung request must not hold up close()
        threading.Thread(target=server.serve_forever, args=(0.05,), name="clickhouse-shim", daemon=True).start()
        self._server = server
        return int(server.server_address[1])

    def _close_listener(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def _handle(self, request: BaseHTTPRequestHandler) -> None:
        fault = self._fault
        with self._lock:
            self.requests[fault] += 1
        body = _read_body(request)
        if fault is ClickHouseFault.HANG:
            self._fault_over.wait()
            request.close_connection = True
            return
        if fault is ClickHouseFault.ERROR:
            _reply(request, 503, b"ClickHouse is unavailable (fault injected)")
            return
        if request.headers.get("Content-Encoding"):
            _reply(request, 400, b"the shim takes uncompressed bodies only (compress=false)")
            return
        body, path = _bind_parameters(body, request.path)  # as the server binds {name:Type}
        query = parse_qs(urlsplit(path).query).get("query", [""])[0]
        text = (query.encode() + b"\n" if query else b"") + body
        try:
            answer = self._execute(text)
        except Exception as exc:  # chDB's errors, as ClickHouse reports them
            message = str(exc)
            code = re.search(r"Code: (\d+)", message)
            headers = {"X-ClickHouse-Exception-Code": code.group(1)} if code else {}
            _reply(request, 500, message.encode(), headers)
            return
        _reply(request, 200, answer)

    def _execute(self, text: bytes) -> bytes:
        if re.match(rb"\s*INSERT\s", text, re.IGNORECASE):
            statement, rows = text.split(b"\n", 1)
            head, _, fmt = statement.decode().rpartition(" FORMAT ")
            with tempfile.NamedTemporaryFile(suffix=".native") as file:
                file.write(rows)
                file.flush()
                return self._query(f"{head} FROM INFILE '{file.name}' FORMAT {fmt.strip()}", "TabSeparated")
        sql = text.decode()
        trailing = _TRAILING_FORMAT.search(sql)
        if trailing is None:
            return self._query(sql, "TabSeparated")
        return self._query(sql[: trailing.start()], trailing.group(1))

    def _query(self, sql: str, fmt: str) -> bytes:
        with self._lock:
            return bytes(self._connection.query(sql, fmt).bytes())

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        shim = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                shim._handle(self)

            def do_POST(self) -> None:
                shim._handle(self)

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet: tests count ``requests`` instead."""

        return Handler


def _read_body(request: BaseHTTPRequestHandler) -> bytes:
    """The request body, plain or chunked (clickhouse-connect streams inserts chunked)."""
    if request.headers.get("Transfer-Encoding", "").lower() != "chunked":
        return request.rfile.read(int(request.headers.get("Content-Length") or 0))
    chunks = []
    while size := int(request.rfile.readline().split(b";")[0], 16):
        chunks.append(request.rfile.read(size))
        request.rfile.readline()  # the CRLF after each chunk
    request.rfile.readline()  # the CRLF after the last, empty chunk (no trailers)
    return b"".join(chunks)


def _reply(request: BaseHTTPRequestHandler, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
    with contextlib.suppress(ConnectionError):  # a client that gave up has gone
        request.send_response(status)
        for name, value in (headers or {}).items():
            request.send_header(name, value)
        request.send_header("Content-Length", str(len(body)))
        request.end_headers()
        request.wfile.write(body)


class TcpProxy:
    """A loopback TCP forwarder that can cut every connection and refuse new ones, then come back.

    Runs its own asyncio loop in a thread.  :meth:`cut` aborts both ends of every proxied
    connection (clients see resets) and closes the listening socket (new connections are
    refused), as a broker host that went away would look; :meth:`restore` listens again on
    the same port.
    """

    def __init__(self, port: int, upstream_port: int) -> None:
        self.port = port
        self._upstream_port = upstream_port
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="tcp-proxy", daemon=True)
        self._server: asyncio.Server | None = None
        self._connections: set[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = set()
        self.cuts = 0  # connections aborted by cut()

    @property
    def address(self) -> str:
        """``host:port`` to give Kafka clients."""
        return f"127.0.0.1:{self.port}"

    def __enter__(self) -> TcpProxy:
        self._thread.start()
        self.restore()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.cut()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        self._loop.close()

    def cut(self) -> None:
        """Drop every connection and stop listening."""
        self._run(self._cut())

    def restore(self) -> None:
        """Listen (again) and forward new connections."""
        self._run(self._listen())

    def _run(self, coroutine: Coroutine[Any, Any, None]) -> None:
        asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout=10)

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(self._forward, "127.0.0.1", self.port, reuse_address=True)

    async def _cut(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        for client, upstream in list(self._connections):
            client.transport.abort()
            upstream.transport.abort()
            self.cuts += 1
        self._connections.clear()

    async def _forward(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", self._upstream_port)
        except OSError:
            client_writer.transport.abort()
            return
        pair = (client_writer, upstream_writer)
        self._connections.add(pair)
        try:
            await asyncio.gather(_pipe(client_reader, upstream_writer), _pipe(upstream_reader, client_writer))
        finally:
            self._connections.discard(pair)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy until either side ends, then close the writing side."""
    try:
        while data := await reader.read(1 << 16):
            writer.write(data)
            await writer.drain()
    except OSError:
        pass
    finally:
        writer.close()


def rss_bytes(pid: int) -> int:
    """Resident memory of a running process, from Linux's /proc."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for process {pid}")


class PasswordClickHouseShim(ClickHouseShim):
    """:class:`ClickHouseShim` behind a user and password, taking compressed bodies, as a real server does.

    A request without the right credentials (HTTP basic auth, ``X-ClickHouse-User`` /
    ``X-ClickHouse-Key`` headers, or ``user`` / ``password`` URL parameters, as ClickHouse
    accepts them) is answered 516 ``AUTHENTICATION_FAILED`` and counted in
    :attr:`refused`.  Bodies compressed by clickhouse-connect's default ``compress=True``
    (``Content-Encoding: lz4``: one LZ4 frame per block, or gzip) are decompressed first, so
    the client needs no ``compress=false`` in its DSN: :meth:`dsn_for` is a plain server URL.
    """

    def __init__(self, chdb_path: Path, user: str, password: str, others: Mapping[str, str] | None = None) -> None:
        self.user, self.password = user, password
        self.users = {user: password, **(others or {})}  # every user it lets in (``others``: name -> password)
        self.refused = 0
        super().__init__(chdb_path, read_timeout_seconds=30)

    def dsn_for(self, user: str, password: str) -> str:
        return f"http://{user}:{password}@127.0.0.1:{self.port}"

    def _authenticated(self, request: BaseHTTPRequestHandler) -> bool:
        url = parse_qs(urlsplit(request.path).query)
        user = request.headers.get("X-ClickHouse-User") or url.get("user", ["default"])[0]
        password = request.headers.get("X-ClickHouse-Key") or url.get("password", [""])[0]
        scheme, _, credentials = (request.headers.get("Authorization") or "").partition(" ")
        if scheme.lower() == "basic":
            user, _, password = base64.b64decode(credentials).decode(errors="replace").partition(":")
        return user in self.users and password == self.users[user]

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        shim = self
        plain = super()._handler_class()

        class Handler(plain):  # type: ignore[valid-type,misc]  # a class made at run time
            def do_GET(self) -> None:
                self._checked()

            def do_POST(self) -> None:
                self._checked()

            def _checked(self) -> None:
                body = _read_body(self)
                if not shim._authenticated(self):
                    shim.refused += 1
                    message = f"Code: 516. DB::Exception: {shim.user}: Authentication failed: password is incorrect"
                    _reply(self, 516, f"{message}. (AUTHENTICATION_FAILED)".encode(),
                           {"X-ClickHouse-Exception-Code": "516"})  # fmt: skip
                    return
                try:
                    body = _decompressed(body, self.headers.get("Content-Encoding", ""))
                except ValueError as exc:
                    _reply(self, 400, str(exc).encode())
                    return
                for header in ("Content-Encoding", "Transfer-Encoding", "Content-Length"):
                    del self.headers[header]
                self.headers["Content-Length"] = str(len(body))
                connection, self.rfile = self.rfile, io.BytesIO(body)  # what ClickHouseShim._handle reads
                try:
                    shim._handle(self)
                finally:
                    self.rfile = connection  # the next request on this keep-alive connection

        return Handler


def _bind_parameters(body: bytes, path: str) -> tuple[bytes, str]:
    """Query and URL with ``{name:Type}`` replaced by the ``param_name`` URL parameters, as the server binds them.

    (chDB takes no parameters; ``CAST('value' AS Type)`` is what the server's binding amounts to.)
    """
    url = urlsplit(path)
    fields = parse_qs(url.query, keep_blank_values=True)
    values = {key.removeprefix("param_"): value[0] for key, value in fields.items() if key.startswith("param_")}
    if not values:
        return body, path

    def bind(text: str) -> str:
        def literal(match: re.Match[str]) -> str:
            value, kind = values.get(match[1]), match[2]
            if value is None:
                return match[0]
            if kind == "Identifier":
                return "`" + value.replace("`", "``") + "`"
            return "CAST('" + value.replace("\\", "\\\\").replace("'", "\\'") + f"' AS {kind})"

        return re.sub(r"\{(\w+):([^{}]+)\}", literal, text)

    if "query" in fields:
        fields["query"] = [bind(fields["query"][0])]
    with contextlib.suppress(UnicodeDecodeError):  # an INSERT's rows are not SQL
        body = bind(body.decode()).encode()
    return body, url._replace(query=urlencode(fields, doseq=True)).geturl()


def _decompressed(body: bytes, encoding: str) -> bytes:
    """``body`` decoded from clickhouse-connect's write compression (LZ4 frames, one per block; or gzip)."""
    if encoding == "gzip":
        return gzip.decompress(body)
    if encoding != "lz4":
        if encoding:
            raise ValueError(f"the shim does not take Content-Encoding {encoding}")
        return body
    blocks = []
    while body:
        decompressor = lz4.frame.LZ4FrameDecompressor()
        blocks.append(decompressor.decompress(body))
        body = decompressor.unused_data
    return b"".join(blocks)
