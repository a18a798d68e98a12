"""Decoding the collector's logs payloads and picking out the GenAI event records.

The collector's kafka exporter writes logs like traces (docs/architecture.md): one protobuf
``LogsData`` per message (wire-identical to ``ExportLogsServiceRequest``), or OTLP/JSON
with hex ids; the logs topic is unkeyed.  Instrumentations that keep content off the
span (``opentelemetry-instrumentation-openai-v2``, OpenLLMetry with
``use_attributes=False``) emit it as log records carrying the LLM span's trace and span
ids: the deprecated per-message events (``gen_ai.user.message``, ``gen_ai.choice``, ...,
content in the body) and ``gen_ai.client.inference.operation.details`` (content in
attributes).  Only those records are kept; every other log line is dropped here.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, LogsData

from pipeline.ingest.otlp_traces import Encoding, any_value, attributes, decode_payload, encode_payload_json
from pipeline.untrusted import valid_id_bytes

GENAI_PREFIX = "gen_ai."
# Where SDKs older than the ``event_name`` field (OTLP 1.5) put the event name.
_EVENT_NAME_ATTRIBUTE = "event.name"
# An evaluator's verdict on a call, not its content: halluwatch's own findings come back as these
# (pipeline/sinks/findings_otlp.py) when they are sent through the collector that feeds the logs topic.
EVALUATION_RESULT_EVENT = "gen_ai.evaluation.result"

SpanKey = tuple[str, str]  # (hex trace id, hex span id)


def decode_logs(value: bytes, encoding: Encoding | None = None) -> LogsData:
    """Decode one logs message value, detecting the encoding unless one is given.

    Raises :class:`pipeline.ingest.otlp_traces.UndecodableMessage` with the reason, as for traces.
    """
    return decode_payload(value, encoding, LogsData(), _log_record_objects)


def encode_logs_json(logs: LogsData) -> bytes:
    """OTLP/JSON with hex ids, as the collector's file and kafka exporters write it."""
    return encode_payload_json(logs, _log_record_objects)


def _log_record_objects(document: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for resource_logs in document.get("resourceLogs", ()):
        for scope_logs in resource_logs.get("scopeLogs", ()):
            yield from scope_logs.get("logRecords", ())


@dataclass(frozen=True, slots=True)
class GenAIRecord:
    """One GenAI event log record of an LLM span, reduced to what normalization reads.

    ``event_name`` is empty for a record recognised by its ``gen_ai.*`` attributes only;
    ``attributes`` keeps the ``gen_ai.*`` ones.  Values are plain JSON (bytes, i.e.
    binary blobs no detector reads, are dropped), so records can live in a state table.
    """

    event_name: str
    time_unix_nano: int
    body: Any
    attributes: Mapping[str, Any]

    def to_dict(self) -> dict[str, Any]:
        """The record as a JSON-ready dict; :meth:`from_dict` reads it back."""
        return {"event": self.event_name, "time": self.time_unix_nano, "body": self.body, "attrs": self.attributes}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GenAIRecord:
        """The record :meth:`to_dict` wrote."""
        return cls(data["event"], data["time"], data["body"], data["attrs"])


def genai_records(logs: LogsData) -> dict[SpanKey, list[GenAIRecord]]:
    """The GenAI event records of a payload, grouped by the span they belong to.

    Records without a valid trace and span id (an all-zero one included) cannot be joined
    to a span and are left out, like every record that is not a GenAI event.
    """
    grouped: dict[SpanKey, list[GenAIRecord]] = defaultdict(list)
    for resource_logs in logs.resource_logs:
        for scope_logs in resource_logs.scope_logs:
            for record in scope_logs.log_records:
                if not valid_id_bytes(record.trace_id, record.span_id):
                    continue
                genai = _genai_record(record)
                if genai is not None:
                    grouped[record.trace_id.hex(), record.span_id.hex()].append(genai)
    return dict(grouped)


def _genai_record(record: LogRecord) -> GenAIRecord | None:
    # Look at keys before converting any value: most log lines are not GenAI events.
    event_name = record.event_name or next(
        (kv.value.string_value for kv in record.attributes if kv.key == _EVENT_NAME_ATTRIBUTE), ""
    )
    if event_name:
        if not event_name.startswith(GENAI_PREFIX) or event_name == EVALUATION_RESULT_EVENT:
            return None
    elif not any(kv.key.startswith(GENAI_PREFIX) for kv in record.attributes):
        return None
    genai_attributes = attributes(kv for kv in record.attributes if kv.key.startswith(GENAI_PREFIX))
    return GenAIRecord(
        event_name,
        record.time_unix_nano or record.observed_time_unix_nano,
        _json_safe(any_value(record.body)),
        _json_safe(genai_attributes),
    )


def _json_safe(value: Any) -> Any:
    if isinstance(value, bytes):
        return None
    if isinstance(value, list):
        return [_json_safe(item) for item in value]
    if isinstance(value, dict):
        return {key: _json_safe(item) for key, item in value.items()}
    return value
