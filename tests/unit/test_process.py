from __future__ import annotations

from collections.abc import Sequence

import pytest
from opentelemetry.proto.trace.v1.trace_pb2 import TracesData

from detectors.base import Detector, DetectorResult, DetectorStatus
from detectors.llm_call import LLMCall
from detectors.suite import DetectorSuite
from pipeline.config.content_policy import ContentLimits
from pipeline.ingest.otlp_traces import encode_traces_json, iter_spans
from pipeline.spans.processor import InboundMessage, SpanBatchProcessor
from pipeline.tools.example_traces import example_traces, mixed_traffic


class FixedScoreDetector(Detector):
    name = "fixed"
    version = "1"

    def detect_batch(self, calls: Sequence[LLMCall]) -> list[DetectorResult]:
        return [DetectorResult(self.name, self.version, 0.9, True, 0.5, severity=2) for _ in calls]


class ExplodingDetector(Detector):
    name = "exploding"
    version = "1"

    def detect_batch(self, calls: Sequence[LLMCall]) -> list[DetectorResult]:
        raise RuntimeError("model file vanished")


def _keyed(traces: TracesData) -> InboundMessage:
    return InboundMessage(
        traces.resource_spans[0].scope_spans[0].spans[0].trace_id.hex().encode(), traces.SerializeToString()
    )


def test_keyed_messages_yield_calls_and_one_finding_per_detector_and_call():
    traces = example_traces()[:4]
    processor = SpanBatchProcessor(DetectorSuite([FixedScoreDetector(), ExplodingDetector()]), "v-test")
    result = processor.process([_keyed(t) for t in traces])
    assert result.spans == sum(len(list(iter_spans(t))) for t in traces)
    assert len(result.llm_calls) == 4
    assert [f.detector for f in result.findings] == ["fixed", "exploding"] * 4  # call by call
    exploded = [f for f in result.findings if f.detector == "exploding"]
    assert {f.status for f in exploded} == {str(DetectorStatus.ERROR)}
    assert "model file vanished" in exploded[0].summary
    assert all(f.thresholds_version == "v-test" for f in result.findings)
    assert not result.dead_letters and not result.rekeyed


def test_non_llm_traffic_produces_no_calls():
    traces = list(mixed_traffic(5, spans_per_trace=6, llm_spans_per_trace=0))
    result = SpanBatchProcessor(DetectorSuite([FixedScoreDetector()]), "v").process([_keyed(t) for t in traces])
    assert (result.spans, result.llm_calls, result.findings) == (30, [], [])


@pytest.mark.parametrize("no_key", [None, b""])
def test_unkeyed_mixed_batch_is_split_and_rekeyed_not_processed(no_key):
    """A null key (collector-contrib without partition_traces_by_id) or an empty one (Rotel's)."""
    traces = example_traces()[:3]
    mixed = InboundMessage(no_key, b"".join(t.SerializeToString() for t in traces))
    result = SpanBatchProcessor(DetectorSuite([FixedScoreDetector()]), "v").process([mixed])
    assert result.llm_calls == [] and result.spans == 0
    keys = sorted(key for key, _ in result.rekeyed)
    assert keys == sorted(t.resource_spans[0].scope_spans[0].spans[0].trace_id.hex().encode() for t in traces)
    reprocessed = SpanBatchProcessor(DetectorSuite([FixedScoreDetector()]), "v").process(
        [InboundMessage(key, value) for key, value in result.rekeyed]
    )
    assert len(reprocessed.llm_calls) == 3


def test_unkeyed_single_trace_is_processed_in_place_and_json_is_detected():
    trace = example_traces()[0]
    result = SpanBatchProcessor(DetectorSuite([FixedScoreDetector()]), "v").process(
        [InboundMessage(None, encode_traces_json(trace))]
    )
    assert len(result.llm_calls) == 1 and not result.rekeyed


def test_bad_input_is_dead_lettered_with_reason_and_the_rest_goes_on():
    good = _keyed(example_traces()[0])
    big = InboundMessage(b"k", b"{" + b" " * 5000, "spans", 3, 17)
    garbage = InboundMessage(None, b"\xff\x00 not otlp", "spans", 0, 1)
    empty = InboundMessage(b"k", b"", "spans", 0, 2)
    bad_ids = TracesData()
    bad_ids.CopyFrom(example_traces()[0])
    bad_ids.resource_spans[0].scope_spans[0].spans[0].trace_id = b"\x01\x02"
    processor = SpanBatchProcessor(DetectorSuite([FixedScoreDetector()]), "v", max_message_bytes=4096)
    result = processor.process([garbage, big, good, empty, InboundMessage(b"k", bad_ids.SerializeToString())])
    kinds = [letter.reason_kind for letter in result.dead_letters]
    assert kinds == ["undecodable", "too_large", "undecodable", "invalid_id"]
    assert result.dead_letters[1].message.value == big.value
    headers = dict(result.dead_letters[1].headers())
    assert headers["halluwatch.source"] == result.dead_letters[1].key == b"spans/3/17"  # one identity per message
    assert headers["halluwatch.original_key"] == b"k" and "halluwatch.original_key" not in dict(
        result.dead_letters[0].headers()
    )  # an unkeyed message has none
    assert b"max_message_bytes=4096" in headers["halluwatch.reason"]
    # the good message, and the good spans of the message with one bad span, still count
    assert len(result.llm_calls) == 2


def test_attributes_of_unexpected_types_do_not_raise():
    trace = example_traces()[0]
    span = next(s.span for s in iter_spans(trace) if any(kv.key.startswith("gen_ai.") for kv in s.span.attributes))
    for kv in span.attributes:
        if kv.key.startswith("gen_ai."):
            kv.value.Clear()
            kv.value.int_value = 7  # an int where JSON strings belong
    result = SpanBatchProcessor(DetectorSuite([FixedScoreDetector()]), "v").process([_keyed(trace)])
    assert len(result.llm_calls) + len(result.dead_letters) == 1


def test_calls_the_log_join_completes_are_bounded_and_detected_like_span_calls():
    processor = SpanBatchProcessor(DetectorSuite([FixedScoreDetector()]), "v", limits=ContentLimits(max_call_chars=40))
    normalized = processor.normalize([_keyed(example_traces()[0])])
    assert normalized.llm_calls and not normalized.findings  # normalize alone never detects

    joined = processor.detect_joined(normalized.llm_calls)
    (call,) = joined.llm_calls
    assert sum(len(m.text) for m in call.output_messages) <= 40 and "output_messages" in call.truncated
    assert [(f.span_id, f.detector) for f in joined.findings] == [(call.span_id, "fixed")]
