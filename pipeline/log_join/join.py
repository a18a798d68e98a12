"""Joining LLM spans with what completes them from elsewhere: a pure state machine.

Two things complete a call after its span: the GenAI log records that carry its content,
and the facts of other spans of its trace (retriever documents, tool runs;
:mod:`pipeline.ingest.trace_facts`) that came in other messages.  Per (trace id, span id)
an entry collects the span's ``LLMCall`` and its log records, whichever arrives first:

- a span with content on it never waits: it is released as it is (``span``);
- a content-free span waits ``window_seconds`` from its arrival for its records, then is
  released merged with what came (``logs``), or marked ``absent`` when nothing did
  (only content-free checks can judge it).  A ``gen_ai.client.inference.operation.details``
  record holds the whole call, so a span that has one is released at once;
- records wait for their span up to ``max_age_seconds`` (input messages are logged when
  the call starts, the span is exported when it ends), then are dropped as ``orphaned``;
- a released span leaves a marker for ``max_age_seconds``, so records arriving after
  their window are counted (``late``, or ``redundant`` when the span had content) and
  dropped, and a redelivered span is not released twice;
- beyond ``max_entries`` the oldest entries go: spans released early (``evicted``) with
  what they have, records, facts and markers dropped.

Facts (:meth:`LogJoin.offer_facts`) are kept per trace, under the id of the span they came
from, for ``max_age_seconds``; those of a trace whose waiting call already went without them
are counted ``late``.  Every call the join releases gets the facts of its trace that
precede it (:func:`~pipeline.ingest.trace_facts.attach_trace_facts`).  A call with content
that lacks sources may wait for them (``awaits_facts``): it is released as soon as facts of its
trace come, or with none when its ``window_seconds`` (``facts_window_seconds``) closes; one that
does not wait is released at once with the facts already held.

Releasing is two-phase, so a crash can only repeat a release, never lose one: ``offer_*``
and :meth:`LogJoin.due` hand out releases (:class:`Release`), the caller processes them, then
:meth:`LogJoin.settle` records that they are done.  All state lives in ``store``, a
mapping of trace id to ``{span id: entry}`` of plain JSON values, so it can be a faust
changelog table (:mod:`pipeline.log_join.stage`) and survive restarts; only the set of
releases handed out and not yet settled is process-local, and a restart that loses it
re-releases them.  ``now`` is wall-clock seconds, which keeps meaning across restarts.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, MutableMapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from detectors.llm_call import ContentSource, LLMCall
from pipeline import metrics
from pipeline.config.stream import JoinConfig
from pipeline.ingest.conventions.log_events import is_complete, merge_log_content
from pipeline.ingest.otlp_logs import GenAIRecord, SpanKey
from pipeline.ingest.trace_facts import Fact, attach_trace_facts, fact_dict, fact_from_dict, fact_span_id

if TYPE_CHECKING:
    pass

# A waiting entry {"seen", "due", "span": LLMCall dict | None, "records": [record dicts]}
# (with "awaits_facts": true for a call held for its trace's facts), a released marker
# {"seen", "due", "released": outcome}, or a fact {"seen", "due", "fact": fact dict};
# "due" is when the timer acts.
Entry = dict[str, Any]
# trace id -> {span id -> entry}, plain JSON throughout.
Store = MutableMapping[str, dict[str, Entry]]

# Share of max_entries evicted at once when full, so a full state does not scan per insert.
_EVICT_FRACTION = 0.1


class Outcome(StrEnum):
    """What a release is."""

    SPAN = "span"  # the span carried its content
    LOGS = "logs"  # the span merged with its log records
    ABSENT = "absent"  # the window closed with no content
    EVICTED = "evicted"  # the state was full: released early with what had come
    ORPHANED = "orphaned"  # log records whose span never came (no call)


@dataclass(frozen=True, slots=True)
class Release:
    """A span ready for the detectors (``call``), or orphaned records to forget (``call`` None)."""

    trace_id: str
    span_id: str
    outcome: Outcome
    call: LLMCall | None


class LogJoin:
    """The join state machine over ``store`` (a dict, or a faust table adapter)."""

    def __init__(self, config: JoinConfig, store: Store | None = None) -> None:
        self.config = config
        self.store: Store = {} if store is None else store
        # Handed out, not settled: never released twice by this process.
        self._handed_out: set[SpanKey] = set()
        # Entries held; recounted by every due() scan, since recovery and rebalances
        # change the store behind our back.
        self._size = sum(len(spans) for spans in self.store.values())
        # Evicted spans handed out, not settled: already gone as far as the bound is concerned.
        self._evicting = 0

    def __len__(self) -> int:
        """Entries held: waiting spans, waiting records and released markers."""
        return self._size

    def offer_span(self, call: LLMCall, now: float, *, awaits_facts: bool = False) -> list[Release]:
        """Take an LLM span; returns what is released now (it, and entries evicted to make room).

        ``awaits_facts``: a call with content but no sources that should wait for facts of
        its trace (its message did not hold the whole trace).
        """
        key = (call.trace_id, call.span_id)
        entry = self._entry(key)
        if key in self._handed_out or (entry is not None and _is_marker(entry)):
            metrics.LOG_JOIN_SPANS.labels("duplicate").inc()  # a redelivery of a released span
            return []
        if call.has_content and not (awaits_facts and not self.facts_of(call.trace_id)):
            if entry is not None and _is_waiting(entry):
                self._handed_out.add(key)  # its waiting records are redundant: settle() drops them
            return [Release(*key, Outcome.SPAN, self._with_facts(call))]
        evicted: list[Release] = []
        if entry is None or not _is_waiting(entry):
            entry, evicted = self._add(key, now)
        if entry["span"] is None:
            window = self.config.facts_window_seconds if call.has_content else self.config.window_seconds
            entry["due"] = now + window  # a redelivered waiting span keeps its window
        entry["span"] = call.to_dict()
        if call.has_content:
            entry["awaits_facts"] = True
        self._put(key, entry)
        if not call.has_content and is_complete(map(GenAIRecord.from_dict, entry["records"])):
            return [*evicted, self._release(key, entry)]
        return evicted

    def offer_facts(self, trace_id: str, facts: Sequence[Fact], now: float) -> list[Release]:
        """Take facts of a trace from other spans; returns the calls they release (and evictions)."""
        evicted: list[Release] = []
        for fact in facts:
            key = (trace_id, fact_span_id(fact))
            if self._entry(key) is None:
                evicted += self._add(key, now)[1]
            self._put(key, {"seen": now, "due": now + self.config.max_age_seconds, "fact": fact_dict(fact)})
        metrics.TRACE_FACTS.labels("stored").inc(len(facts))
        if any(entry.get("without_facts") for entry in self.store.get(trace_id, {}).values()):
            metrics.TRACE_FACTS.labels("late").inc(len(facts))  # a call of the trace stopped waiting for them
        waiting = [
            ((trace_id, span_id), entry)
            for span_id, entry in self.store.get(trace_id, {}).items()
            if entry.get("awaits_facts") and (trace_id, span_id) not in self._handed_out
        ]
        return evicted + [self._release(key, entry) for key, entry in waiting]

    def offer_records(self, trace_id: str, span_id: str, records: Sequence[GenAIRecord], now: float) -> list[Release]:
        """Take log records of one span; returns what is released now."""
        key = (trace_id, span_id)
        entry = self._entry(key)
        if key in self._handed_out or (entry is not None and _is_marker(entry)):
            redundant = entry is not None and entry.get("released") == Outcome.SPAN
            metrics.LOG_RECORDS.labels("redundant" if redundant else "late").inc(len(records))
            return []
        evicted: list[Release] = []
        if entry is None or not _is_waiting(entry):
            entry, evicted = self._add(key, now)
        room = self.config.max_records_per_span - len(entry["records"])
        if len(records) > room:
            metrics.LOG_RECORDS.labels("over_cap").inc(len(records) - max(room, 0))
            records = records[: max(room, 0)]
        entry["records"].extend(record.to_dict() for record in records)
        self._put(key, entry)
        if entry["span"] is not None and is_complete(records):
            return [*evicted, self._release(key, entry)]
        return evicted

    def due(self, now: float) -> list[Release]:
        """Spans whose window closed and records whose span never came; forgets old markers."""
        released: list[Release] = []
        stale: list[SpanKey] = []
        size = 0
        # The timer's scan over every entry: one comparison for each that is not due.
        for trace_id, spans in list(self.store.items()):
            size += len(spans)
            for span_id, entry in spans.items():
                if entry["due"] > now or (key := (trace_id, span_id)) in self._handed_out:
                    continue
                if not _is_waiting(entry):
                    stale.append(key)  # a marker or a fact past max_age_seconds
                elif entry["span"] is not None:
                    released.append(self._release(key, entry))
                else:
                    released.append(self._hand_out(key, Outcome.ORPHANED, None))
        self._size = size
        for key in stale:
            self._delete(key)
        metrics.LOG_JOIN_ENTRIES.set(self._size)
        return released

    def settle(self, releases: Sequence[Release], now: float) -> None:
        """Record that ``releases`` were processed: their entries become markers or go."""
        for release in releases:
            key = (release.trace_id, release.span_id)
            self._handed_out.discard(key)
            if release.outcome is Outcome.EVICTED:
                self._evicting = max(0, self._evicting - 1)
            if release.call is not None:
                metrics.LOG_JOIN_SPANS.labels(release.outcome).inc()
            entry = self._entry(key)
            if entry is None or not _is_waiting(entry):
                continue
            records = len(entry["records"])
            if release.outcome in (Outcome.ORPHANED, Outcome.EVICTED):
                # No marker: when the state is full, or the span is lost, memory goes first.
                metrics.LOG_RECORDS.labels(str(release.outcome)).inc(records)
                self._delete(key)
                continue
            metrics.LOG_RECORDS.labels("redundant" if release.outcome is Outcome.SPAN else "joined").inc(records)
            marker = {"seen": now, "due": now + self.config.max_age_seconds, "released": str(release.outcome)}
            if entry.get("awaits_facts") and release.call is not None and not release.call.retriever_span_ids:
                marker["without_facts"] = True  # facts coming after this are late
            self._put(key, marker)

    def _release(self, key: SpanKey, entry: Entry, outcome: Outcome | None = None) -> Release:
        call = LLMCall.from_dict(entry["span"])
        records = [GenAIRecord.from_dict(record) for record in entry["records"]]
        if records:
            call = merge_log_content(call, records)
        elif not call.has_content:
            call = replace(call, content_source=ContentSource.ABSENT)
        return self._hand_out(key, outcome or Outcome(call.content_source), self._with_facts(call))

    def facts_of(self, trace_id: str) -> list[Fact]:
        """The facts held for ``trace_id`` (none when its partition of the state is elsewhere)."""
        entries = self.store.get(trace_id, {}).values()
        return [fact_from_dict(entry["fact"]) for entry in entries if "fact" in entry]

    def _with_facts(self, call: LLMCall) -> LLMCall:
        facts = self.facts_of(call.trace_id)
        if not facts:
            return call
        (joined,) = attach_trace_facts([call], facts)
        if joined.retriever_span_ids and not call.retriever_span_ids:
            metrics.TRACE_FACTS.labels("sources_attached").inc()
        return joined

    def _hand_out(self, key: SpanKey, outcome: Outcome, call: LLMCall | None) -> Release:
        self._handed_out.add(key)
        return Release(*key, outcome, call)

    def _add(self, key: SpanKey, now: float) -> tuple[Entry, list[Release]]:
        """A new waiting entry for ``key``, and what was evicted to make room for it."""
        evicted = self._evict() if self._size - self._evicting >= self.config.max_entries else []
        self._size += 1
        return {"seen": now, "due": now + self.config.max_age_seconds, "span": None, "records": []}, evicted

    def _evict(self) -> list[Release]:
        """Make room: drop markers, then release or drop the oldest entries, a batch at a time."""
        count = max(1, math.ceil(self.config.max_entries * _EVICT_FRACTION))
        candidates = [
            (_is_waiting(entry), entry["seen"], key, entry)
            for key, entry in self._entries()
            if key not in self._handed_out
        ]
        candidates.sort(key=lambda item: item[:2])
        released = []
        for _, _, key, entry in candidates[:count]:
            if _is_waiting(entry) and entry["span"] is not None:
                released.append(self._release(key, entry, Outcome.EVICTED))
                self._evicting += 1
                continue
            if _is_waiting(entry):
                metrics.LOG_RECORDS.labels("evicted").inc(len(entry["records"]))
            self._delete(key)
        return released

    def _entries(self) -> Iterator[tuple[SpanKey, Entry]]:
        for trace_id, spans in list(self.store.items()):
            for span_id, entry in spans.items():
                yield (trace_id, span_id), entry

    def _entry(self, key: SpanKey) -> Entry | None:
        spans = self.store.get(key[0])
        return spans.get(key[1]) if spans else None

    def _put(self, key: SpanKey, entry: Entry) -> None:
        trace_id, span_id = key
        # Always assign the trace's value back: a faust table writes its changelog on set.
        self.store[trace_id] = {**self.store.get(trace_id, {}), span_id: entry}

    def _delete(self, key: SpanKey) -> None:
        trace_id, span_id = key
        spans = {**self.store.get(trace_id, {})}
        if spans.pop(span_id, None) is None:
            return
        self._size -= 1
        if spans:
            self.store[trace_id] = spans
        else:
            del self.store[trace_id]


def _is_marker(entry: Entry) -> bool:
    return "released" in entry


def _is_waiting(entry: Entry) -> bool:
    """A span or records waiting to be released (not a marker, not a fact)."""
    return "records" in entry
