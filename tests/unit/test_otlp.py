from __future__ import annotations

import json

import pytest
from opentelemetry.proto.trace.v1.trace_pb2 import TracesData

from pipeline.ingest.otlp_traces import (
    Encoding,
    UndecodableMessage,
    any_value,
    attributes,
    decode_traces,
    encode_traces_json,
    iter_spans,
    split_by_trace,
)

TRACE_A = "5b8efff798038103d269b633813fc60c"
TRACE_B = "0af7651916cd43dd8448eb211c80319c"


def _otlp_json(trace_ids=(TRACE_A,)) -> dict:
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "svc"}}]},
                "scopeSpans": [
                    {
                        "scope": {"name": "lib"},
                        "spans": [
                            {
                                "traceId": trace_id,
                                "spanId": f"{i:016x}",
                                "parentSpanId": "",
                                "name": f"span-{i}",
                                "startTimeUnixNano": "1700000000000000000",
                                "endTimeUnixNano": "1700000001000000000",
                                "attributes": [
                                    {"key": "n", "value": {"intValue": "3"}},
                                    {
                                        "key": "tags",
                                        "value": {
                                            "arrayValue": {"values": [{"stringValue": "a"}, {"boolValue": True}]}
                                        },
                                    },
                                    {
                                        "key": "obj",
                                        "value": {
                                            "kvlistValue": {"values": [{"key": "x", "value": {"doubleValue": 1.5}}]}
                                        },
                                    },
                                ],
                            }
                            for i, trace_id in enumerate(trace_ids, start=1)
                        ],
                    }
                ],
            }
        ]
    }


def test_json_ids_are_hex_not_base64():
    traces = decode_traces(json.dumps(_otlp_json()).encode(), Encoding.OTLP_JSON)
    span = traces.resource_spans[0].scope_spans[0].spans[0]
    assert span.trace_id.hex() == TRACE_A
    assert span.span_id.hex() == "0000000000000001"


def test_json_round_trip_and_sniffing():
    traces = decode_traces(json.dumps(_otlp_json()).encode())
    again = decode_traces(encode_traces_json(traces))
    assert again == traces
    assert decode_traces(traces.SerializeToString()) == traces


@pytest.mark.parametrize("encoding", [Encoding.OTLP_JSON, None])
@pytest.mark.parametrize("indent", [None, 2])
def test_bare_array_of_resource_spans_reads_as_the_object(encoding, indent):
    """Rotel's ``--kafka-exporter-format json``: the ``resourceSpans`` list without its object."""
    document = _otlp_json((TRACE_A, TRACE_B))
    bare = json.dumps(document["resourceSpans"], indent=indent).encode()
    traces = decode_traces(bare, encoding)
    assert traces == decode_traces(json.dumps(document).encode())
    assert [ctx.trace_id for ctx in iter_spans(traces)] == [TRACE_A, TRACE_B]


def test_attribute_values_convert_to_python():
    span_context = next(iter_spans(decode_traces(json.dumps(_otlp_json()).encode())))
    assert span_context.resource == {"service.name": "svc"}
    assert attributes(span_context.span.attributes) == {"n": 3, "tags": ["a", True], "obj": {"x": 1.5}}
    assert span_context.trace_id == TRACE_A
    assert any_value(span_context.span.attributes[0].value.__class__()) is None


@pytest.mark.parametrize(
    ("value", "encoding"),
    [
        (b"", None),
        (b"{bad json", Encoding.OTLP_JSON),
        (b"[1, 2]", Encoding.OTLP_JSON),
        (b"[1, 2]", None),
        (b'[{"scopeSpans": [{"spans": [{"traceId": "zz"}]}]}]', None),
        (b'"resourceSpans"', Encoding.OTLP_JSON),
        (b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz"}]}]}]}', Encoding.OTLP_JSON),
        (b"\xff\xfe\x00garbage", Encoding.OTLP_PROTO),
        (b"\xc3\x28", Encoding.OTLP_JSON),
    ],
)
def test_garbage_raises_undecodable_with_reason(value, encoding):
    with pytest.raises(UndecodableMessage) as info:
        decode_traces(value, encoding)
    assert info.value.reason


def test_split_by_trace_keeps_resource_and_scope():
    traces = decode_traces(json.dumps(_otlp_json((TRACE_A, TRACE_B, TRACE_A))).encode())
    parts = split_by_trace(traces)
    assert set(parts) == {TRACE_A, TRACE_B}
    assert [s.span.name for s in iter_spans(parts[TRACE_A])] == ["span-1", "span-3"]
    only_b = list(iter_spans(parts[TRACE_B]))
    assert [(s.span.name, s.resource["service.name"], s.scope_name) for s in only_b] == [("span-2", "svc", "lib")]
    assert isinstance(parts[TRACE_B], TracesData)
