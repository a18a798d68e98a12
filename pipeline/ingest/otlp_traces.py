"""Decoding the OpenTelemetry Collector's Kafka payloads (docs/architecture.md).

Two encodings reach us: ``otlp_proto`` (one protobuf ``TracesData`` per message, wire
identical to ``ExportTraceServiceRequest``) and ``otlp_json`` (OTLP/JSON, either the
``{"resourceSpans": [...]}`` object or, as Rotel's ``--kafka-exporter-format json`` writes
it, the bare array of ``ResourceSpans`` / ``ResourceLogs``).  OTLP/JSON
writes trace and span ids as *hex* strings while protobuf's canonical JSON mapping
reads ``bytes`` fields as base64, so ids are rewritten to base64 before the generic
parser sees them; everything else is the stock protobuf JSON parser.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, TypeVar

from google.protobuf import json_format
from google.protobuf.message import DecodeError, Message
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, Span, TracesData

from pipeline.untrusted import MalformedRecord, json_document

_ID_FIELDS = ("traceId", "spanId", "parentSpanId")
# First bytes of an OTLP/JSON value: an object, or Rotel's bare array of resources.
_JSON_STARTS = (b"{", b"[")
_Payload = TypeVar("_Payload", bound=Message)
# The objects of an OTLP/JSON document whose ids are hex strings.
IdObjects = Callable[[dict[str, Any]], Iterator[dict[str, Any]]]


class Encoding(StrEnum):
    """Value encodings of the collector's kafka exporter."""

    OTLP_PROTO = "otlp_proto"
    OTLP_JSON = "otlp_json"


class UndecodableMessage(MalformedRecord):
    """A Kafka message value that is not a trace (or logs) payload; ``reason`` goes to the DLQ."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def decode_traces(value: bytes, encoding: Encoding | None = None) -> TracesData:
    """Decode one message value; with no ``encoding`` given, detect it.

    Detection cannot rely on a leading newline meaning JSON: every ``TracesData`` starts
    with byte 0x0A.  A value starting with ``{`` or ``[`` is JSON; anything else is tried
    as protobuf first and as JSON (pretty-printed, leading whitespace) second.
    """
    return decode_payload(value, encoding, TracesData(), _span_objects)


def decode_payload(value: bytes, encoding: Encoding | None, payload: _Payload, id_objects: IdObjects) -> _Payload:
    """Decode an OTLP ``*Data`` message (traces, logs) into the empty ``payload`` given.

    ``id_objects`` yields the OTLP/JSON objects of a document whose ids are hex (spans,
    links, log records); they are rewritten to base64 before the generic parser runs.
    """
    if not value:
        raise UndecodableMessage("empty message value")
    if encoding is Encoding.OTLP_JSON or (encoding is None and value[:1] in _JSON_STARTS):
        return _decode_json(value, payload, id_objects)
    try:
        return _decode_proto(value, payload)
    except UndecodableMessage:
        if encoding is None and value.lstrip()[:1] in _JSON_STARTS:
            return _decode_json(value, payload, id_objects)
        raise


def _resources_field(payload: Message) -> str:
    # Every OTLP ``*Data`` message has one field: its repeated ``resource_*`` list.
    return str(payload.DESCRIPTOR.fields[0].name)


def _decode_proto(value: bytes, payload: _Payload) -> _Payload:
    name = payload.DESCRIPTOR.name
    try:
        payload.ParseFromString(value)
    except (DecodeError, RecursionError, ValueError) as exc:
        raise UndecodableMessage(f"not an OTLP protobuf {name}: {exc}") from exc
    resources = _resources_field(payload)
    if not getattr(payload, resources):
        # Protobuf parsing is lenient: foreign bytes often parse as unknown fields only.
        signal = name.removesuffix("Data").lower()
        raise UndecodableMessage(f"no {resources.replace('_', ' ')} in a non-empty payload: not OTLP {signal}")
    return payload


def _decode_json(value: bytes, payload: _Payload, id_objects: IdObjects) -> _Payload:
    try:
        document = json_document(value)
    except MalformedRecord as exc:
        raise UndecodableMessage(f"not OTLP/JSON: {exc}") from exc
    if isinstance(document, list):
        # Rotel's JSON: the list of resources without the ``*Data`` object around it.
        document = {payload.DESCRIPTOR.fields[0].json_name: document}
    if not isinstance(document, dict):
        raise UndecodableMessage("OTLP/JSON payload is neither an object nor an array of resources")
    try:
        for obj in id_objects(document):
            _hex_ids_to_base64(obj)
        json_format.ParseDict(document, payload, ignore_unknown_fields=True)
    except Exception as exc:  # the generic parser on any shape of JSON: its errors come in many types
        raise UndecodableMessage(f"malformed OTLP/JSON: {type(exc).__name__}: {exc}") from exc
    return payload


def _span_objects(document: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for resource_spans in document.get("resourceSpans", ()):
        for scope_spans in resource_spans.get("scopeSpans", ()):
            for span in scope_spans.get("spans", ()):
                yield span
                yield from span.get("links", ())


def _hex_ids_to_base64(obj: dict[str, Any]) -> None:
    for key in _ID_FIELDS:
        hex_id = obj.get(key)
        if hex_id:
            obj[key] = base64.b64encode(bytes.fromhex(hex_id)).decode()


def encode_traces_json(traces: TracesData) -> bytes:
    """OTLP/JSON with hex ids, as the collector's file and kafka exporters write it."""
    return encode_payload_json(traces, _span_objects)


def encode_payload_json(payload: Message, id_objects: IdObjects) -> bytes:
    """OTLP/JSON of an OTLP ``*Data`` message, with the ids of ``id_objects`` in hex."""
    document = json_format.MessageToDict(payload)
    for obj in id_objects(document):
        for key in _ID_FIELDS:
            if key in obj:
                obj[key] = base64.b64decode(obj[key]).hex()
    return json.dumps(document, separators=(",", ":")).encode()


def any_value(value: AnyValue) -> Any:
    """Convert an OTLP ``AnyValue`` to plain Python (str, bool, int, float, bytes, list, dict)."""
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [any_value(item) for item in value.array_value.values]
    if kind == "kvlist_value":
        return attributes(value.kvlist_value.values)
    return getattr(value, kind)


def attributes(key_values: Any) -> dict[str, Any]:
    """Convert repeated ``KeyValue`` to a dict (later duplicates win, as in the SDK)."""
    result: dict[str, Any] = {}
    kv: KeyValue
    for kv in key_values:
        result[kv.key] = any_value(kv.value)
    return result


@dataclass(frozen=True, slots=True)
class SpanContext:
    """A span with what it inherits from its envelope: resource attributes and scope name."""

    span: Span
    resource: Mapping[str, Any]
    scope_name: str

    @property
    def trace_id(self) -> str:
        """Lowercase hex trace id."""
        return self.span.trace_id.hex()


def iter_spans(traces: TracesData) -> Iterator[SpanContext]:
    """Every span of a payload with its resource attributes (converted once per resource)."""
    resource_spans: ResourceSpans
    for resource_spans in traces.resource_spans:
        resource = attributes(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                yield SpanContext(span, resource, scope_spans.scope.name)


def split_by_trace(traces: TracesData) -> dict[str, TracesData]:
    """Split a mixed batch into one payload per trace id, keeping resource and scope.

    This is what the collector does with ``partition_traces_by_id``; we do it for
    unkeyed traffic so every downstream record is keyed by its trace id.
    """
    per_trace: dict[str, TracesData] = {}
    for resource_spans in traces.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                out = per_trace.setdefault(span.trace_id.hex(), TracesData())
                target = _matching_scope(out, resource_spans, scope_spans)
                target.spans.append(span)
    return per_trace


def _matching_scope(out: TracesData, resource_spans: ResourceSpans, scope_spans: Any) -> Any:
    if not out.resource_spans or out.resource_spans[-1].resource != resource_spans.resource:
        new_resource = out.resource_spans.add()
        new_resource.resource.CopyFrom(resource_spans.resource)
        new_resource.schema_url = resource_spans.schema_url
    current = out.resource_spans[-1]
    if not current.scope_spans or current.scope_spans[-1].scope != scope_spans.scope:
        new_scope = current.scope_spans.add()
        new_scope.scope.CopyFrom(scope_spans.scope)
        new_scope.schema_url = scope_spans.schema_url
    return current.scope_spans[-1]
