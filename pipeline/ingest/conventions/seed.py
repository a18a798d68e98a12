"""The convention of seed ``000_*``: span name ``llm.*`` with ``llm.response.content``.

The seed's detector reads ``llm.response.content``, ``rag.sources_json``
(``{"1": "source text"}``, keys are the citation ids), ``llm.response.tokens_json`` and
``llm.operation``; ``llm.prompt``, ``llm.model`` and ``llm.provider`` are the obvious
companions an app of that style sets.  Requiring the response attribute keeps the seed's
own ``llm.detector.result`` spans out.
"""

from __future__ import annotations

from pipeline.ingest.conventions import values
from pipeline.ingest.conventions.common import HALLUWATCH_ROWS
from pipeline.ingest.conventions.engine import Convention, Row, SpanMarkers

ROWS: tuple[Row, ...] = (
    ("llm.operation", "operation", values.text),
    ("llm.model", "model", values.text),
    ("llm.provider", "provider", values.text),
    ("llm.prompt", "input_messages.0.text", values.text),
    ("llm.response.content", "output_messages.0.text", values.text),
    ("llm.response.finish_reason", "output_messages.0.finish_reason", values.text),
    # Hand-instrumented apps often add the standard GenAI finish reasons beside the seed layout.
    ("gen_ai.response.finish_reasons", "finish_reasons", values.text_list),
    ("rag.sources_json", "sources", values.sources_map),
    ("llm.response.tokens_json", "logprobs", values.token_logprobs),
    *HALLUWATCH_ROWS,
)


def claims(markers: SpanMarkers) -> bool:
    """Span name ``llm.*`` and a response content attribute."""
    return markers.name.startswith("llm.") and "llm.response.content" in markers.keys


SEED = Convention("seed", ROWS, claims)
