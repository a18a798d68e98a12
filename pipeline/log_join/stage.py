"""The join stage of the worker: log-record content and other messages' trace facts meet their LLM spans.

GenAI content comes from ``otlp_logs``; trace facts (retriever documents, tool runs) come
from spans of the same trace in other messages of the spans topic.

Two agents, one table, one timer, on the app the worker builds:

- ``halluwatch.logs`` reads the collector's unkeyed logs topic, keeps the GenAI event
  records (:mod:`pipeline.ingest.otlp_logs`) and re-produces them, keyed by trace id, to the
  join topic (``kafka_log_join_topic``);
- the spans stage hands its LLM calls to :meth:`LogJoinStage.offer_spans`, which produces
  the content-free ones and those that wait for facts of their trace to the same topic, so a
  trace's spans, records and facts meet in one partition, on one worker, next to its table
  partition, however the spans topic is partitioned.  Facts (retriever documents, tool runs)
  of traces that go on in other messages go there too, ahead of the calls of the same batch;
- ``halluwatch.log_join`` feeds both to :class:`pipeline.log_join.join.LogJoin`, whose state is
  a changelog-backed table keyed by trace id (restarts and rebalances recover it);
- the timer releases spans whose window closed.

Every released call goes to ``on_release`` (the worker's: detect, write, publish), and
only once that returned is the release settled in the table: a crash in between releases
the call again after the restart, which the idempotent sinks absorb.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Iterator, MutableMapping, Sequence, Set
from typing import Any

import faust
from faust.types import Message, StreamT

from detectors.llm_call import LLMCall
from pipeline.config.stream import LogJoinSettings, StreamSettings
from pipeline.ingest.otlp_logs import decode_logs, genai_records
from pipeline.ingest.otlp_traces import Encoding, UndecodableMessage
from pipeline.ingest.trace_facts import Fact, attach_trace_facts, fact_dict
from pipeline.log_join.join import Entry, LogJoin, Release
from pipeline.log_join.offers import join_offer
from pipeline.stream.plumbing import (
    DeadLetterSender,
    TraceTable,
    durable_batches,
    isolating_failures,
    publish,
    raw_topic,
    trace_table,
    withholding,
)
from pipeline.untrusted import MalformedRecord

logger = logging.getLogger(__name__)

TABLE_NAME = "halluwatch-log-join"
# How many traces the stage remembers having sent facts, or calls waiting for facts, to the
# join lately (the join agent may not have read them into the table yet).
_RECENT_TRACES = 10_000
# How often the timer looks for closed windows, as a share of the window (and at most 1 s).
_TICKS_PER_WINDOW = 4

# Processes calls the join released (detect, write, publish); returns once they are durable.
ReleasedCalls = Callable[[Sequence[LLMCall]], Awaitable[None]]


class LogJoinStage:
    """Registers the logs and join agents, the join table and its timer on ``app``."""

    def __init__(
        self,
        app: faust.App,
        stream: StreamSettings,
        config: LogJoinSettings,
        on_release: ReleasedCalls,
        dead_letter: DeadLetterSender,
    ) -> None:
        self._stream = stream
        self._config = config
        self._on_release = on_release
        self._dead_letter = withholding(dead_letter, stream.content.llm_calls)
        self._encoding = None if config.input_encoding == "auto" else Encoding(config.input_encoding)
        partitions = stream.topic_partitions
        self.logs_topic = raw_topic(app, partitions, config.logs_topic)
        self.join_topic = raw_topic(app, partitions, config.join_topic)
        self.table = trace_table(app, TABLE_NAME, partitions)
        self.join = LogJoin(config.join, TableStore(self.table))
        self.logs_messages_done = 0  # logs-topic messages fully handled by this process
        self.calls_held = 0  # calls this process handed to the join (content-free, or waiting for facts)
        # Sent to the join lately: their later calls go behind the facts, their later facts to the calls.
        self._facts_sent = RecentTraces(_RECENT_TRACES)
        self._calls_waiting = RecentTraces(_RECENT_TRACES)
        self.calls_released = 0  # calls the join released to on_release in this process
        app.agent(self.logs_topic, name="halluwatch.logs")(self._rekey_logs)
        app.agent(self.join_topic, name="halluwatch.log_join")(self._join)
        app.timer(min(1.0, config.join.window_seconds / _TICKS_PER_WINDOW))(self._expire)

    async def offer_spans(
        self, calls: Sequence[LLMCall], facts: Sequence[Fact] = (), incomplete_traces: Set[str] = frozenset()
    ) -> list[LLMCall]:
        """Hand the join what it completes; return the calls to detect now.

        ``facts`` are the batch's trace facts and ``incomplete_traces`` the traces whose root
        span was not in their message.  Held calls and shared facts are acknowledged by the
        broker when this returns, so the caller may then commit the spans they came from.
        """
        shared: dict[str, list[Fact]] = {}
        for fact in facts:
            if (
                fact.trace_id in incomplete_traces
                or fact.trace_id in self._calls_waiting
                or self._awaited(fact.trace_id)
            ):
                shared.setdefault(fact.trace_id, []).append(fact)
        # Facts first: on the join topic they precede the calls of their trace (one partition per key).
        await self._publish_all(
            [_keyed(trace, {"trace_facts": list(map(fact_dict, fs))}) for trace, fs in shared.items()]
        )
        self._facts_sent.update(shared)
        ready: list[LLMCall] = []
        held: list[tuple[bytes, bytes]] = []
        for call in calls:
            if not call.has_content:
                held.append(_keyed(call.trace_id, {"span": call.to_dict()}))
            elif call.sources:
                ready.append(call)
            elif stored := self.join.facts_of(call.trace_id):
                ready += attach_trace_facts([call], stored)
            elif call.trace_id in self._facts_sent:  # behind its facts, just sent to the join
                held.append(_keyed(call.trace_id, {"span": call.to_dict(), "awaits_facts": False}))
            elif call.trace_id in incomplete_traces and self._config.join.facts_window_seconds > 0:
                held.append(_keyed(call.trace_id, {"span": call.to_dict(), "awaits_facts": True}))
                self._calls_waiting.update([call.trace_id])
            else:
                ready.append(call)
        await self._publish_all(held)
        self.calls_held += len(held)
        return ready

    def _awaited(self, trace_id: str) -> bool:
        """Whether the join holds a call of ``trace_id`` waiting for facts (in this process's partitions)."""
        return any(entry.get("awaits_facts") for entry in self.join.store.get(trace_id, {}).values())

    async def _rekey_logs(self, stream: StreamT[bytes]) -> None:
        s = self._stream
        async for events in durable_batches(stream, s.batch_max_messages, s.batch_max_wait_seconds):
            await isolating_failures([event.message for event in events], self._rekey, self._dead_letter, "logs")

    async def _rekey(self, messages: Sequence[Message]) -> None:
        outgoing: list[tuple[bytes, bytes]] = []
        for message in messages:
            outgoing.extend(await self._split(message))
        await self._publish_all(outgoing)
        self.logs_messages_done += len(messages)

    async def _split(self, message: Message) -> list[tuple[bytes, bytes]]:
        """One join-topic message per trace with GenAI records; bad input goes to the DLQ."""
        value = message.value or b""
        if len(value) > self._config.max_message_bytes:
            reason = f"message of {len(value)} bytes exceeds max_message_bytes={self._config.max_message_bytes}"
            await self._dead_letter(message, "too_large", reason)
            return []
        try:
            # Protobuf decoding of a big batch is CPU work: keep it off the event loop.
            per_trace = await asyncio.to_thread(self._genai_records_by_trace, value)
        except UndecodableMessage as exc:
            await self._dead_letter(message, "undecodable", exc.reason)
            return []
        return [_keyed(trace_id, {"records": spans}) for trace_id, spans in per_trace.items()]

    def _genai_records_by_trace(self, value: bytes) -> dict[str, dict[str, list[dict[str, Any]]]]:
        per_trace: dict[str, dict[str, list[dict[str, Any]]]] = {}
        for (trace_id, span_id), records in genai_records(decode_logs(value, self._encoding)).items():
            per_trace.setdefault(trace_id, {})[span_id] = [record.to_dict() for record in records]
        return per_trace

    async def _join(self, stream: StreamT[bytes]) -> None:
        s = self._stream
        async for events in durable_batches(stream, s.batch_max_messages, s.batch_max_wait_seconds):
            messages = [event.message for event in events]
            await isolating_failures(messages, self._join_batch, self._dead_letter, "log join")

    async def _join_batch(self, messages: Sequence[Message]) -> None:
        now = time.time()
        releases: list[Release] = []
        for message in messages:
            try:
                offer = join_offer(message.key, message.value or b"")
            except MalformedRecord as exc:
                await self._dead_letter(message, "malformed_log_join", f"not a log-join record: {exc}")
                continue
            releases += offer.make(self.join, now)
        await self._release(releases)

    async def _expire(self) -> None:
        await self._release(self.join.due(time.time()))

    async def _release(self, releases: list[Release]) -> None:
        calls = [release.call for release in releases if release.call is not None]
        if calls:
            await self._on_release(calls)
            self.calls_released += len(calls)
        self.join.settle(releases, time.time())

    async def _publish_all(self, messages: list[tuple[bytes, bytes]]) -> None:
        max_delay = self._stream.write_retry_max_seconds
        await asyncio.gather(*(publish(self.join_topic, key, value, max_delay) for key, value in messages))


def _keyed(trace_id: str, document: dict[str, Any]) -> tuple[bytes, bytes]:
    return trace_id.encode(), json.dumps(document, ensure_ascii=False).encode()


class RecentTraces:
    """A bounded set of trace ids: the oldest added is forgotten first."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._traces: OrderedDict[str, None] = OrderedDict()

    def __contains__(self, trace_id: object) -> bool:
        return trace_id in self._traces

    def update(self, trace_ids: Iterable[str]) -> None:
        """Remember ``trace_ids`` as the newest."""
        for trace_id in trace_ids:
            self._traces[trace_id] = None
            self._traces.move_to_end(trace_id)
        while len(self._traces) > self._size:
            self._traces.popitem(last=False)


class TableStore(MutableMapping[str, dict[str, Entry]]):
    """A :class:`~pipeline.stream.plumbing.TraceTable` (raw trace-id keys) as the join's ``str``-keyed store."""

    def __init__(self, table: TraceTable) -> None:
        self._table = table

    def __getitem__(self, trace_id: str) -> dict[str, Entry]:
        value: dict[str, Entry] | None = self._table.get(trace_id.encode())
        if value is None:
            raise KeyError(trace_id)
        return value

    def __setitem__(self, trace_id: str, spans: dict[str, Entry]) -> None:
        self._table[trace_id.encode()] = spans

    def __delitem__(self, trace_id: str) -> None:
        del self._table[trace_id.encode()]

    def __iter__(self) -> Iterator[str]:
        return (key.decode() for key in list(self._table.keys()))

    def __len__(self) -> int:
        return len(self._table)
