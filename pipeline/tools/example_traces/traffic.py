"""Benchmark traffic: SDK-recorded template spans cloned with fresh ids.

A benchmark needs ~100k spans in seconds, too many to run the SDK per span; the templates
are recorded once (infrastructure spans from traffic.yaml, LLM spans from the examples).
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span, TracesData
from opentelemetry.trace import SpanKind

from pipeline.tools.example_traces.data import ExampleDataError, Row, read
from pipeline.tools.example_traces.examples import EXAMPLES
from pipeline.tools.example_traces.recorder import MS, Recorder, record_span
from pipeline.tools.example_traces.recording import recorded
from pipeline.tools.example_traces.writers import LLM_WRITERS, SpanSpec


@dataclass(frozen=True, slots=True)
class _Template:
    """A recorded span with the envelope it needs, ready to be cloned with fresh ids."""

    resource_spans: ResourceSpans  # resource and schema url; its own spans are ignored
    scope_spans: ScopeSpans
    span: Span


@dataclass(frozen=True, slots=True)
class _Infra:
    """traffic.yaml: the tracer's service and scope, the root span, the children to draw from."""

    service: str
    scope: str
    root: tuple[SpanSpec, int]  # (span, duration in milliseconds)
    children: tuple[tuple[SpanSpec, int], ...]


def _infra_span(value: object, where: str) -> tuple[SpanSpec, int]:
    with Row(value, where) as row:
        kind = row.need("kind", str)
        if kind not in SpanKind.__members__:
            raise ExampleDataError(f"{where}.kind: {kind!r} is none of {list(SpanKind.__members__)}")
        attributes: dict[str, Any] = row.need("attributes", dict)
        return SpanSpec(row.need("name", str), SpanKind[kind], attributes), row.need("duration_ms", int)


def _load_infra() -> _Infra:
    with read("traffic.yaml") as document:
        return _Infra(
            service=document.need("service", str),
            scope=document.need("scope", str),
            root=_infra_span(document.need("root", dict), "traffic.yaml root"),
            children=tuple(
                _infra_span(child, f"traffic.yaml children[{i}]")
                for i, child in enumerate(document.need("children", list))
            ),
        )


_INFRA = _load_infra()


def _templates(traces: TracesData) -> list[_Template]:
    return [_Template(rs, ss, span) for rs in traces.resource_spans for ss in rs.scope_spans for span in ss.spans]


def _infra_templates(start_ns: int) -> tuple[_Template, list[_Template]]:
    """Record the HTTP server root of traffic.yaml and one of each of its children with the SDK."""
    recorder = Recorder()
    tracer = recorder.tracer(_INFRA.service, _INFRA.scope)
    root_spec, root_ms = _INFRA.root
    root = tracer.start_span(root_spec.name, kind=root_spec.kind, start_time=start_ns, attributes=root_spec.attributes)
    for spec, duration_ms in _INFRA.children:
        record_span(tracer, spec, root, start_ns + MS, duration_ms * MS)
    root.end(end_time=start_ns + root_ms * MS)
    templates = _templates(recorder.collect())
    roots = [t for t in templates if not t.span.parent_span_id]
    return roots[0], [t for t in templates if t.span.parent_span_id]


def _llm_templates(start_ns: int) -> list[_Template]:
    """Record the examples and keep their LLM spans (the spans the convention writers produced)."""
    llm_names = {LLM_WRITERS[e.convention](e).name for e in EXAMPLES}
    return [t for traces in recorded(EXAMPLES, start_ns) for t in _templates(traces) if t.span.name in llm_names]


def _envelope(out: TracesData, template: _Template) -> ScopeSpans:
    """Append the template's resource and scope to ``out``; return the scope to add spans to."""
    resource_spans = out.resource_spans.add()
    resource_spans.resource.CopyFrom(template.resource_spans.resource)
    resource_spans.schema_url = template.resource_spans.schema_url
    scope_spans: ScopeSpans = resource_spans.scope_spans.add()
    scope_spans.scope.CopyFrom(template.scope_spans.scope)
    scope_spans.schema_url = template.scope_spans.schema_url
    return scope_spans


def _stamp(span: Span, template: Span, ids: tuple[bytes, bytes, bytes], start_ns: int) -> None:
    """Make ``span`` a copy of ``template`` with (trace, span, parent) ids, moved to ``start_ns``."""
    span.CopyFrom(template)
    span.trace_id, span.span_id, span.parent_span_id = ids
    span.start_time_unix_nano = start_ns
    span.end_time_unix_nano = start_ns + template.end_time_unix_nano - template.start_time_unix_nano


def mixed_traffic(
    n_traces: int, spans_per_trace: int = 20, llm_spans_per_trace: int = 1, seed: int = 0
) -> Iterator[TracesData]:
    """Benchmark traffic: mostly HTTP/DB/cache spans, a few LLM spans from :data:`EXAMPLES`.

    Each trace is one ``TracesData`` with ``spans_per_trace`` spans under an HTTP server
    root, ``llm_spans_per_trace`` of them LLM spans; trace and span ids are random from
    ``seed`` (same seed, same ids), timestamps start now, 10 ms apart.  Templates are
    recorded with the SDK once and cloned per span, which is what makes it fast.
    """
    if n_traces < 0:
        raise ValueError(f"n_traces must be >= 0, got {n_traces}")
    if not 0 <= llm_spans_per_trace < spans_per_trace:
        raise ValueError(
            f"llm_spans_per_trace must be >= 0 and below spans_per_trace ({spans_per_trace}) "
            f"so every trace keeps its HTTP root span, got {llm_spans_per_trace}"
        )
    rng = random.Random(seed)  # noqa: S311 - reproducible benchmark traffic, not a secret
    base_ns = time.time_ns()
    root, children = _infra_templates(base_ns)
    llm_spans = _llm_templates(base_ns)
    infra_children = spans_per_trace - 1 - llm_spans_per_trace
    for i in range(n_traces):
        trace_start_ns = base_ns + i * 10 * MS
        trace_id, root_id = rng.randbytes(16), rng.randbytes(8)
        out = TracesData()
        infra = _envelope(out, root)
        _stamp(infra.spans.add(), root.span, (trace_id, root_id, b""), trace_start_ns)
        for _ in range(infra_children):
            _stamp(
                infra.spans.add(),
                rng.choice(children).span,
                (trace_id, rng.randbytes(8), root_id),
                trace_start_ns + MS + rng.randrange(50 * MS),
            )
        for _ in range(llm_spans_per_trace):
            template = rng.choice(llm_spans)
            _stamp(
                _envelope(out, template).spans.add(),
                template.span,
                (trace_id, rng.randbytes(8), root_id),
                trace_start_ns + 2 * MS,
            )
        yield out
