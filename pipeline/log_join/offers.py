"""The join topic's messages, read back: a call, its trace's facts, or its GenAI log records.

The logs agent and the spans stage write them (:mod:`pipeline.log_join.stage`); the join agent
reads them with :func:`join_offer`, which turns anything else into one
:class:`~pipeline.untrusted.MalformedRecord` for the stage to dead-letter.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from detectors.llm_call import LLMCall
from pipeline.ingest.otlp_logs import GenAIRecord
from pipeline.ingest.trace_facts import Fact, fact_from_dict
from pipeline.log_join.join import LogJoin, Release
from pipeline.untrusted import MalformedRecord, call_from_record, decoded, field_of, json_document, valid_trace_id

WHAT = "a log-join record"


@dataclass(frozen=True, slots=True)
class SpanOffer:
    """An LLM call waiting for its content or for its trace's facts."""

    call: LLMCall
    awaits_facts: bool

    def make(self, join: LogJoin, now: float) -> list[Release]:
        """Offer it to ``join``."""
        return join.offer_span(self.call, now, awaits_facts=self.awaits_facts)


@dataclass(frozen=True, slots=True)
class FactsOffer:
    """Facts of a trace (retrieved documents, tool runs) from spans of other messages."""

    trace_id: str
    facts: tuple[Fact, ...]

    def make(self, join: LogJoin, now: float) -> list[Release]:
        """Offer them to ``join``."""
        return join.offer_facts(self.trace_id, self.facts, now)


@dataclass(frozen=True, slots=True)
class RecordsOffer:
    """GenAI log records of a trace, by the id of the span they belong to."""

    trace_id: str
    records: Mapping[str, tuple[GenAIRecord, ...]]

    def make(self, join: LogJoin, now: float) -> list[Release]:
        """Offer them to ``join``, span by span."""
        return [
            release
            for span_id, records in self.records.items()
            for release in join.offer_records(self.trace_id, span_id, records, now)
        ]


JoinOffer = SpanOffer | FactsOffer | RecordsOffer


def join_offer(key: bytes | None, value: bytes) -> JoinOffer:
    """What one join-topic message offers; :class:`MalformedRecord` for anything else."""
    document = json_document(value)
    if not isinstance(document, dict):
        raise MalformedRecord(f"not {WHAT}: a {type(document).__name__}, not an object")
    if "span" in document:
        call = call_from_record(document["span"])  # checked whole already: only the flag is left to check
        awaits_facts = document.get("awaits_facts", False)
        if not isinstance(awaits_facts, bool):
            raise MalformedRecord(f"not {WHAT}: awaits_facts is a {type(awaits_facts).__name__}")
        return SpanOffer(call, awaits_facts)
    if not key:
        raise MalformedRecord(f"not {WHAT}: records or facts without a trace id key")
    trace_id = valid_trace_id(decoded(key.decode, "a trace id key"))
    if "trace_facts" in document:
        return decoded(lambda: FactsOffer(trace_id, tuple(fact_from_dict(f) for f in document["trace_facts"])), WHAT)
    records = field_of(document, "records")
    return decoded(
        lambda: RecordsOffer(
            trace_id, {str(span): tuple(GenAIRecord.from_dict(r) for r in rs) for span, rs in records.items()}
        ),
        WHAT,
    )
