"""The log-join state machine: arrival orders, windows, late records, bounds, restarts."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from prometheus_client import REGISTRY

from detectors.llm_call import (
    ContentSource,
    LLMCall,
    Message,
    Source,
    TokenLogprob,
    ToolDefinition,
    ToolSpan,
    TopLogprob,
    Usage,
)
from pipeline.config.settings import Settings
from pipeline.config.stream import JoinConfig
from pipeline.ingest.conventions.log_events import merge_log_content
from pipeline.ingest.normalize import normalize_span
from pipeline.ingest.otlp_logs import GenAIRecord, decode_logs, genai_records
from pipeline.ingest.otlp_traces import decode_traces, iter_spans
from pipeline.ingest.trace_facts import Retrieval, ToolExecution
from pipeline.log_join.join import LogJoin, Outcome, Release
from pipeline.log_join.stage import RecentTraces
from tests.genai_logs import ANSWER, QUESTION, Telemetry, deprecated_events, details_event

CONFIG = JoinConfig(window_seconds=5.0, max_entries=1000, max_age_seconds=60.0, max_records_per_span=16)
T0 = 1_800_000_000.0


def _recorded(events: str = "deprecated") -> tuple[LLMCall, list[GenAIRecord]]:
    """One content-free openai-v2-style span and its records, SDK-made and decoded."""
    telemetry = Telemetry()
    with telemetry.chat_span():
        if events == "deprecated":
            deprecated_events(telemetry)
        elif events == "details":
            details_event(telemetry)
    spans_payload, logs_payload = telemetry.payloads()
    (ctx,) = iter_spans(decode_traces(spans_payload))
    call = normalize_span(ctx)
    assert call is not None and not call.has_content
    if not logs_payload:
        return call, []
    return call, genai_records(decode_logs(logs_payload))[call.trace_id, call.span_id]


def _records_metric(outcome: str) -> float:
    return REGISTRY.get_sample_value("halluwatch_log_records_total", {"outcome": outcome}) or 0.0


def _settled(join: LogJoin, releases: list[Release], now: float) -> list[Release]:
    join.settle(releases, now)
    return releases


def _assert_joined(release: Release) -> None:
    assert release.outcome is Outcome.LOGS
    assert release.call is not None
    assert (release.call.prompt, release.call.answer) == (QUESTION, ANSWER)
    assert release.call.content_source is ContentSource.LOGS


def test_span_first_waits_for_its_records_until_the_window_closes() -> None:
    call, records = _recorded()
    join = LogJoin(CONFIG)
    assert join.offer_span(call, T0) == []
    assert join.offer_records(call.trace_id, call.span_id, records, T0 + 1) == []
    assert join.due(T0 + 4.9) == []  # deprecated events have no end marker: the window decides
    (release,) = _settled(join, join.due(T0 + 5), T0 + 5)
    _assert_joined(release)
    assert join.due(T0 + 30) == []


def test_records_first_then_span() -> None:
    call, records = _recorded()
    join = LogJoin(CONFIG)
    assert join.offer_records(call.trace_id, call.span_id, records, T0) == []
    assert join.due(T0 + 30) == []  # records wait for their span (a long LLM call)
    assert join.offer_span(call, T0 + 30) == []
    assert join.due(T0 + 34) == []  # the window runs from the span's arrival
    (release,) = join.due(T0 + 35)
    _assert_joined(release)


def test_records_split_across_messages_are_all_joined() -> None:
    call, records = _recorded()
    join = LogJoin(CONFIG)
    join.offer_records(call.trace_id, call.span_id, records[2:], T0)
    join.offer_span(call, T0 + 1)
    join.offer_records(call.trace_id, call.span_id, records[:2], T0 + 2)
    (release,) = join.due(T0 + 6)
    _assert_joined(release)
    assert release.call is not None and len(release.call.input_messages) == 2


@pytest.mark.parametrize("span_first", [True, False])
def test_operation_details_record_releases_at_once(span_first: bool) -> None:
    call, records = _recorded("details")
    join = LogJoin(CONFIG)
    if span_first:
        assert join.offer_span(call, T0) == []
        (release,) = join.offer_records(call.trace_id, call.span_id, records, T0 + 0.1)
    else:
        assert join.offer_records(call.trace_id, call.span_id, records, T0) == []
        (release,) = join.offer_span(call, T0 + 0.1)
    _assert_joined(release)
    assert join.due(T0 + 10) == []  # handed out once, not again by the timer


def test_missing_content_is_released_absent_when_the_window_closes() -> None:
    call, _ = _recorded(events="none")
    join = LogJoin(CONFIG)
    join.offer_span(call, T0)
    (release,) = join.due(T0 + 5)
    assert release.outcome is Outcome.ABSENT
    assert release.call == replace(call, content_source=ContentSource.ABSENT)


def test_span_with_content_does_not_wait_or_hold_state() -> None:
    call, _ = _recorded()
    with_content = replace(call, input_messages=(Message("user", QUESTION),))
    join = LogJoin(CONFIG)
    (release,) = join.offer_span(with_content, T0)
    assert (release.outcome, release.call) == (Outcome.SPAN, with_content)
    join.settle([release], T0)
    assert len(join) == 0 and join.store == {}


def test_records_of_a_span_with_content_are_redundant() -> None:
    call, records = _recorded()
    join = LogJoin(CONFIG)
    join.offer_records(call.trace_id, call.span_id, records[:1], T0)
    with_content = replace(call, output_messages=(Message("assistant", ANSWER),))
    before = _records_metric("redundant")
    join.settle(join.offer_span(with_content, T0 + 1), T0 + 1)
    join.offer_records(call.trace_id, call.span_id, records[1:], T0 + 2)
    assert _records_metric("redundant") - before == len(records)
    assert join.due(T0 + 100) == []


def test_late_records_are_counted_and_dropped() -> None:
    call, records = _recorded()
    join = LogJoin(CONFIG)
    join.offer_span(call, T0)
    join.settle(join.due(T0 + 5), T0 + 5)
    before = _records_metric("late")
    assert join.offer_records(call.trace_id, call.span_id, records, T0 + 6) == []
    assert _records_metric("late") - before == len(records)
    assert join.due(T0 + 7) == []


def test_records_arriving_while_the_release_is_processed_are_late() -> None:
    call, records = _recorded()
    join = LogJoin(CONFIG)
    join.offer_span(call, T0)
    (release,) = join.due(T0 + 5)
    before = _records_metric("late")
    join.offer_records(call.trace_id, call.span_id, records, T0 + 5.5)  # not settled yet
    assert _records_metric("late") - before == len(records)
    assert release.outcome is Outcome.ABSENT


def test_orphaned_records_are_dropped_after_max_age() -> None:
    call, records = _recorded()
    join = LogJoin(CONFIG)
    join.offer_records(call.trace_id, call.span_id, records, T0)
    before = _records_metric("orphaned")
    (release,) = join.due(T0 + 60)
    assert (release.outcome, release.call) == (Outcome.ORPHANED, None)
    join.settle([release], T0 + 60)
    assert _records_metric("orphaned") - before == len(records)
    assert len(join) == 0
    # The span of a very slow call still gets through, absent.
    join.offer_span(call, T0 + 61)
    (late_span,) = join.due(T0 + 66)
    assert late_span.outcome is Outcome.ABSENT


def test_redelivered_span_is_not_released_twice() -> None:
    call, records = _recorded()
    join = LogJoin(CONFIG)
    join.offer_span(call, T0)
    join.offer_span(call, T0 + 3)  # redelivered while waiting: the window stays
    join.offer_records(call.trace_id, call.span_id, records, T0 + 3)
    (release,) = _settled(join, join.due(T0 + 5), T0 + 5)
    _assert_joined(release)
    assert join.offer_span(call, T0 + 8) == []  # after release: a duplicate
    assert join.due(T0 + 20) == []


def test_markers_expire_with_max_age() -> None:
    call, _ = _recorded()
    join = LogJoin(CONFIG)
    join.offer_span(call, T0)
    join.settle(join.due(T0 + 5), T0 + 5)
    assert len(join) == 1  # the marker
    join.due(T0 + 65)
    assert len(join) == 0 and join.store == {}


def test_full_state_releases_oldest_spans_early_and_drops_oldest_records() -> None:
    call, records = _recorded()
    join = LogJoin(replace(CONFIG, max_entries=10))
    spans = [replace(call, span_id=f"{i:016x}") for i in range(6)]
    for i, span in enumerate(spans):
        assert join.offer_span(span, T0 + i) == []
    for i in range(4):
        join.offer_records(call.trace_id, f"{100 + i:016x}", records, T0 + 6 + i)
    assert len(join) == 10
    before = _records_metric("evicted")
    (evicted,) = join.offer_span(replace(call, span_id=f"{99:016x}"), T0 + 11)  # one over: 10% goes
    assert (evicted.outcome, evicted.span_id) == (Outcome.EVICTED, spans[0].span_id)
    assert evicted.call is not None and evicted.call.content_source is ContentSource.ABSENT
    join.settle([evicted], T0 + 11)
    assert len(join) == 10
    assert _records_metric("evicted") == before  # a span went, not records
    # Records-only entries are dropped when they are the oldest.
    small = LogJoin(replace(CONFIG, max_entries=2))
    small.offer_records(call.trace_id, "a" * 16, records, T0)
    small.offer_records(call.trace_id, "b" * 16, records, T0 + 1)
    assert small.offer_span(call, T0 + 2) == []
    assert _records_metric("evicted") - before == len(records)
    assert sorted(span_id for spans_of in small.store.values() for span_id in spans_of) == sorted(
        ["b" * 16, call.span_id]
    )


def test_evictions_waiting_to_be_settled_count_as_gone() -> None:
    """A batch of offers over a full state evicts one batch, not one batch per offer."""
    call, _ = _recorded()
    join = LogJoin(replace(CONFIG, max_entries=20))
    for i in range(20):
        join.offer_span(replace(call, span_id=f"{i:016x}"), T0 + i)
    evicted = join.offer_span(replace(call, span_id=f"{20:016x}"), T0 + 20)
    evicted += join.offer_span(replace(call, span_id=f"{21:016x}"), T0 + 21)
    assert [release.span_id for release in evicted] == [f"{0:016x}", f"{1:016x}"]
    join.settle(evicted, T0 + 21)
    assert len(join) == 20


def test_markers_are_evicted_before_waiting_entries() -> None:
    call, records = _recorded()
    join = LogJoin(replace(CONFIG, max_entries=3))
    join.offer_records(call.trace_id, "a" * 16, records, T0)  # the oldest, waiting for a slow call
    join.offer_span(call, T0 + 1)
    join.settle(join.due(T0 + 6), T0 + 6)  # the span became a marker
    join.offer_span(replace(call, span_id="b" * 16), T0 + 7)
    assert join.offer_span(replace(call, span_id="c" * 16), T0 + 8) == []  # the marker went
    assert sorted(span_id for spans_of in join.store.values() for span_id in spans_of) == ["a" * 16, "b" * 16, "c" * 16]


def test_records_per_span_are_capped() -> None:
    call, records = _recorded()
    join = LogJoin(replace(CONFIG, max_records_per_span=2))
    before = _records_metric("over_cap")
    join.offer_records(call.trace_id, call.span_id, records, T0)
    assert _records_metric("over_cap") - before == len(records) - 2
    join.offer_span(call, T0)
    (release,) = join.due(T0 + 5)
    assert release.call is not None and release.call.answer == ""  # the choice was past the cap


def test_state_survives_a_restart_mid_window_as_json() -> None:
    call, records = _recorded()
    join = LogJoin(CONFIG)
    join.offer_span(call, T0)
    join.offer_records(call.trace_id, call.span_id, records[:1], T0 + 1)
    restored = LogJoin(CONFIG, json.loads(json.dumps(join.store)))
    assert len(restored) == 1
    restored.offer_records(call.trace_id, call.span_id, records[1:], T0 + 2)
    assert restored.due(T0 + 4) == []
    (release,) = restored.due(T0 + 5)
    _assert_joined(release)


def test_a_release_not_settled_before_a_restart_is_released_again() -> None:
    call, records = _recorded("details")
    join = LogJoin(CONFIG)
    join.offer_span(call, T0)
    (first,) = join.offer_records(call.trace_id, call.span_id, records, T0 + 1)
    restored = LogJoin(CONFIG, json.loads(json.dumps(join.store)))  # crashed before settle
    (again,) = restored.due(T0 + 5)
    assert again.call == first.call
    restored.settle([again], T0 + 5)
    assert LogJoin(CONFIG, json.loads(json.dumps(restored.store))).offer_span(call, T0 + 6) == []


def test_config_from_settings() -> None:
    settings = Settings(log_join_window_seconds=2.5, log_join_max_entries=7, log_join_max_age_seconds=30)
    assert settings.log_join().join == JoinConfig(2.5, 7, 30.0, 256, 2.0)


def test_llm_call_survives_json_with_every_field() -> None:
    call, records = _recorded()
    rich = merge_log_content(
        replace(
            call,
            sources=(Source("1", "doc", 0.5),),
            tool_definitions=(ToolDefinition("f", "does f", {"type": "object"}),),
            logprobs=(TokenLogprob("It", -0.1, (TopLogprob("It", -0.1), TopLogprob("This", -2.3))),),
            usage=Usage(12, 3),
        ),
        records,
    )
    assert rich.input_messages and rich.content_source is ContentSource.LOGS
    assert LLMCall.from_dict(json.loads(json.dumps(rich.to_dict()))) == rich


# --- trace facts from other messages --------------------------------------------------------

DOCUMENT = Source("kb-7", "Casa Lisboa opens at 18:00.")
GIVEN = Source("prompt", "When does it open?")  # the call's own prompt, kept beside the documents


def _chat_call(span_id: str = "1" * 16, start: int = 2_000) -> LLMCall:
    """A call with content and no sources, as an app that pastes nothing into the prompt records it."""
    call, _ = _recorded("none")
    return replace(
        call,
        span_id=span_id,
        start_time_unix_nano=start,
        input_messages=(Message("user", "When does it open?"),),
        output_messages=(Message("assistant", "At 18:00."),),
    )


def _retrieval(call: LLMCall, end: int = 1_000, span_id: str = "a" * 16) -> Retrieval:
    return Retrieval(call.trace_id, span_id, call.parent_span_id, end, (DOCUMENT,))


def test_facts_first_a_call_is_released_at_once_with_them() -> None:
    join = LogJoin(CONFIG)
    call = _chat_call()
    assert join.offer_facts(call.trace_id, [_retrieval(call)], T0) == []
    assert join.facts_of(call.trace_id) == [_retrieval(call)]
    (release,) = join.offer_span(call, T0 + 1, awaits_facts=True)
    assert release.outcome is Outcome.SPAN and release.call is not None
    assert release.call.sources == (DOCUMENT, GIVEN) and release.call.sources_from == "trace"


def test_a_call_waiting_for_facts_is_released_when_they_come() -> None:
    join = LogJoin(CONFIG)
    call = _chat_call()
    assert join.offer_span(call, T0, awaits_facts=True) == []
    assert join.due(T0 + 1) == []
    tool = ToolExecution(
        call.trace_id, ToolSpan("b" * 16, "lookup", "c1", failed=True, error="timeout", end_time_unix_nano=1_500)
    )
    (release,) = _settled(join, join.offer_facts(call.trace_id, [_retrieval(call), tool], T0 + 1.5), T0 + 1.5)
    assert release.call is not None and release.call.sources == (DOCUMENT, GIVEN)
    assert release.call.tool_spans == (tool.tool,) and release.call.content_source is ContentSource.SPAN
    assert join.offer_span(call, T0 + 2, awaits_facts=True) == []  # a redelivery: released already


def test_a_call_waiting_for_facts_that_never_come_goes_with_none_when_its_window_closes() -> None:
    join = LogJoin(CONFIG)
    call = _chat_call()
    join.offer_span(call, T0, awaits_facts=True)
    assert join.due(T0 + CONFIG.facts_window_seconds - 0.1) == []
    (release,) = join.due(T0 + CONFIG.facts_window_seconds)
    assert release.call is not None and release.call.sources == () and release.call.content_source is ContentSource.SPAN


def _facts_metric(outcome: str) -> float:
    return REGISTRY.get_sample_value("halluwatch_trace_facts_total", {"outcome": outcome}) or 0.0


def test_facts_after_their_waiting_call_gave_up_are_counted_late() -> None:
    join = LogJoin(CONFIG)
    call = _chat_call()
    join.offer_span(call, T0, awaits_facts=True)
    _settled(join, join.due(T0 + CONFIG.facts_window_seconds), T0 + CONFIG.facts_window_seconds)
    late = _facts_metric("late")
    assert join.offer_facts(call.trace_id, [_retrieval(call)], T0 + 3) == []  # released already: not again
    assert _facts_metric("late") == late + 1


def test_facts_after_their_call_started_and_facts_past_max_age_are_not_attached() -> None:
    join = LogJoin(CONFIG)
    call = _chat_call(start=2_000)
    join.offer_facts(call.trace_id, [_retrieval(call, end=3_000)], T0)  # ended after the call started
    (release,) = join.offer_span(call, T0 + 1)
    assert release.call is not None and release.call.sources == ()
    join.due(T0 + CONFIG.max_age_seconds + 1)
    assert join.facts_of(call.trace_id) == [] and len(join) == 0


def test_waiting_for_facts_survives_a_restart_mid_window() -> None:
    join = LogJoin(CONFIG)
    call = _chat_call()
    join.offer_span(call, T0, awaits_facts=True)
    restored = LogJoin(CONFIG, json.loads(json.dumps(join.store)))
    (release,) = restored.offer_facts(call.trace_id, [_retrieval(call)], T0 + 1)
    assert release.call is not None and release.call.sources == (DOCUMENT, GIVEN)


def test_facts_are_evicted_with_markers_before_waiting_spans() -> None:
    join = LogJoin(replace(CONFIG, max_entries=2))
    first, waiting, last = (replace(_chat_call(), trace_id=str(n) * 32) for n in (1, 2, 3))
    join.offer_facts(first.trace_id, [_retrieval(first)], T0)
    join.offer_span(waiting, T0 + 1, awaits_facts=True)
    assert join.offer_facts(last.trace_id, [_retrieval(last)], T0 + 2) == []
    assert join.facts_of(first.trace_id) == [] and join.facts_of(last.trace_id) == [_retrieval(last)]
    (release,) = join.due(T0 + 1 + CONFIG.facts_window_seconds)  # the waiting call stayed
    assert release.span_id == waiting.span_id


def test_recent_traces_forget_the_oldest_beyond_their_size() -> None:
    recent = RecentTraces(2)
    recent.update(["a", "b"])
    recent.update(["a"])  # seen again: the newest now
    recent.update(["c"])
    assert "a" in recent and "c" in recent and "b" not in recent
