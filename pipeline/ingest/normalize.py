"""Normalizing one OTLP span into an ``LLMCall``, whatever its instrumentation convention.

Conventions (``pipeline/ingest/conventions``), tried in this order; the first that claims the
span maps it:

- ``openinference``: ``openinference.span.kind`` = ``LLM``;
- ``seed``: span name ``llm.*`` with ``llm.response.content`` (seed ``000_*``);
- ``vercel_ai``: the Vercel AI SDK's provider-call spans (``ai.operationId``);
- ``openllmetry``: Traceloop markers (flat ``gen_ai.prompt.N.*``, ``llm.request.type``, ...);
- ``gen_ai``: OpenTelemetry GenAI inference spans, current and deprecated forms.

Logprobs have no standard attribute.  Besides the seed's ``llm.response.tokens_json`` and
the raw OpenAI response in OpenInference's ``output.value``, every convention reads
``halluwatch.response.logprobs``: a JSON string
``[{"token": str, "logprob": float, "top_logprobs": [{"token": str, "logprob": float}]}]``,
one entry per output position (OpenAI's ``choices[0].logprobs.content`` fits as is).

Most spans are not LLM calls, so detection looks only at attribute *keys* under a few
prefixes, the span name and event names, and converts a value only when a convention
asks for one.  Bad values are skipped field by field; a span that still cannot become a
record raises :class:`MalformedLLMSpan` for the dead-letter topic.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from detectors.llm_call import LLMCall
from pipeline.ingest.conventions.engine import Convention, SpanMarkers
from pipeline.ingest.conventions.gen_ai import GEN_AI
from pipeline.ingest.conventions.openinference import OPENINFERENCE
from pipeline.ingest.conventions.openllmetry import OPENLLMETRY
from pipeline.ingest.conventions.records import build
from pipeline.ingest.conventions.seed import SEED
from pipeline.ingest.conventions.vercel_ai import VERCEL_AI
from pipeline.ingest.otlp_traces import SpanContext, attributes

CONVENTIONS: tuple[Convention, ...] = (OPENINFERENCE, SEED, VERCEL_AI, OPENLLMETRY, GEN_AI)

_MARKER_PREFIXES = ("gen_ai.", "llm.", "openinference.", "traceloop.", "ai.")
_EVENT_PREFIX = "gen_ai."
_ROUTING_RESOURCE_KEYS = (
    "service.name",
    "service.namespace",
    "service.version",
    "deployment.environment",
    "deployment.environment.name",
)
# The instrumentation library that made the span (its scope), kept with the call's attributes:
# `halluwatch conventions` and `doctor` count per scope the calls that arrived without content.
SCOPE_ATTRIBUTE = "otel.scope.name"
_MAX_ROUTING_VALUE_CHARS = 256
# String attributes whose key says "content" stay out of ``LLMCall.attributes`` even when
# short: a 40-character prompt is still user content (PII), not a routing attribute.
_CONTENT_KEY_HINTS = (
    "input", "output", "prompt", "completion", "content", "message", "document", "source",
    "query", "argument", "result", "template", "json", "instruction", "definition", "logprob",
)  # fmt: skip


class MalformedLLMSpan(ValueError):
    """An LLM span that cannot be normalized; ``reason`` goes to the dead-letter topic."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def normalize_span(ctx: SpanContext) -> LLMCall | None:
    """Return the ``LLMCall`` of an LLM span, ``None`` for any other span.

    Never raises anything but :class:`MalformedLLMSpan`.
    """
    markers = _markers(ctx)
    if markers is None:
        return None
    convention = next((c for c in CONVENTIONS if c.claims(markers)), None)
    if convention is None:
        return None
    try:
        return _normalize(ctx, convention)
    except MalformedLLMSpan:
        raise
    except Exception as exc:  # a converter bug must dead-letter one span, not stop the worker
        raise MalformedLLMSpan(f"{convention.name} span {ctx.span.name!r}: {exc!r}") from exc


def _markers(ctx: SpanContext) -> SpanMarkers | None:
    span = ctx.span
    keys = {kv.key: kv.value for kv in span.attributes if kv.key.startswith(_MARKER_PREFIXES)}
    event_names = frozenset(event.name for event in span.events if event.name.startswith(_EVENT_PREFIX))
    if not keys and not event_names and not span.name.startswith("llm."):
        return None
    return SpanMarkers(span.name, keys, event_names)


def _normalize(ctx: SpanContext, convention: Convention) -> LLMCall:
    span = ctx.span
    if len(span.trace_id) != 16 or len(span.span_id) != 8:
        raise MalformedLLMSpan(f"invalid ids: trace {span.trace_id.hex()!r}, span {span.span_id.hex()!r}")
    span_attrs = attributes(span.attributes)
    wanted = convention.event_names
    events = [(event.name, attributes(event.attributes)) for event in span.events if event.name in wanted]
    service = ctx.resource.get("service.name")
    return LLMCall(
        trace_id=span.trace_id.hex(),
        span_id=span.span_id.hex(),
        parent_span_id=span.parent_span_id.hex() or None,
        service=service if isinstance(service, str) and service else "unknown_service",
        span_name=span.name,
        start_time_unix_nano=span.start_time_unix_nano,
        end_time_unix_nano=span.end_time_unix_nano,
        convention=convention.name,
        attributes=_routing_attributes(ctx.resource, span_attrs) | _scope(ctx.scope_name),
        **build(convention.extract(span_attrs, events)),
    )


def _routing_attributes(resource: Mapping[str, Any], span_attrs: Mapping[str, Any]) -> dict[str, Any]:
    """Small scalar attributes for risk/domain routing rules; never message content."""
    routing = {key: resource[key] for key in _ROUTING_RESOURCE_KEYS if _is_routing_value(key, resource.get(key))}
    routing.update((key, value) for key, value in span_attrs.items() if _is_routing_value(key, value))
    return routing


def _scope(name: str) -> dict[str, str]:
    return {SCOPE_ATTRIBUTE: name[:_MAX_ROUTING_VALUE_CHARS]} if name else {}


def _is_routing_value(key: str, value: Any) -> bool:
    if isinstance(value, bool | int | float):
        return True
    return (
        isinstance(value, str)
        and len(value) <= _MAX_ROUTING_VALUE_CHARS
        and not any(hint in key for hint in _CONTENT_KEY_HINTS)
    )
