"""``halluwatch baseline``: per-model entropy statistics for the confidence detector (docs/detectors.md).

The confidence detector scores how far an answer's mean token entropy lies from what is
normal *for that model*; this module measures "normal" on traffic the user vouches for
(a trace file of labelled-good calls, or ClickHouse rows) and writes it as the versioned
YAML file the workers load (its format: :mod:`detectors.baselines`).

Responses are measured with :func:`detectors.confidence.mean_entropy`, the very function
the detector uses.  A model with fewer than ``min_responses`` measurable responses (or
with no variance at all) gets no baseline: a z-score against a handful of samples would
make every answer look anomalous.  Such models are named in the summary.
"""

from __future__ import annotations

import json
import logging
import re
import statistics
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from clickhouse_connect.driver.client import Client

from detectors.baselines import BaselineError, content_version, write_baselines
from detectors.confidence.detector import mean_entropy
from detectors.config import DEFAULT_MIN_TOKENS, DEFAULT_TOP_K, ModelBaseline
from detectors.llm_call import LLMCall, Message, TokenLogprob, TopLogprob
from pipeline.ingest.normalize import MalformedLLMSpan, normalize_span
from pipeline.ingest.otlp_traces import iter_spans
from pipeline.tools.replay import PathLike, read_file

logger = logging.getLogger(__name__)

DEFAULT_MIN_RESPONSES = 30
LOGPROBS_COLUMN = "logprobs_json"
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_STAT_DECIMALS = 6


def response_entropies(
    calls: Iterable[LLMCall], top_k: int = DEFAULT_TOP_K, min_tokens: int = DEFAULT_MIN_TOKENS
) -> dict[str, list[float]]:
    """Mean entropy of every measurable response, by model; calls without usable logprobs are left out."""
    by_model: dict[str, list[float]] = {}
    for call in calls:
        entropy = mean_entropy(call.logprobs, top_k, min_tokens) if call.logprobs else None
        if entropy is not None:
            by_model.setdefault(call.model, []).append(entropy)
    return by_model


def baselines_from_entropies(
    entropies: Mapping[str, list[float]], min_responses: int = DEFAULT_MIN_RESPONSES
) -> dict[str, ModelBaseline]:
    """Mean and sample standard deviation per model with enough responses and some variance."""
    if min_responses < 2:
        raise ValueError(f"min_responses must be at least 2, got {min_responses!r}")
    stats = {
        model: (round(statistics.fmean(values), _STAT_DECIMALS), round(statistics.stdev(values), _STAT_DECIMALS))
        for model, values in entropies.items()
        if len(values) >= min_responses
    }
    counts = {model: len(entropies[model]) for model, (_, stdev) in stats.items() if stdev > 0.0}
    version = content_version({model: (*stats[model], n) for model, n in counts.items()})
    return {
        model: ModelBaseline(mean=stats[model][0], stdev=stats[model][1], n=n, version=version)
        for model, n in counts.items()
    }


def compute_baselines(
    calls: Iterable[LLMCall],
    top_k: int = DEFAULT_TOP_K,
    min_tokens: int = DEFAULT_MIN_TOKENS,
    min_responses: int = DEFAULT_MIN_RESPONSES,
) -> dict[str, ModelBaseline]:
    """Per-model baselines of ``calls``; models with too few responses are logged and left out."""
    entropies = response_entropies(calls, top_k, min_tokens)
    baselines = baselines_from_entropies(entropies, min_responses)
    for model, count in _skipped(entropies, baselines).items():
        logger.warning("no baseline for model %r: %d measurable responses, or no variance", model, count)
    return baselines


def _skipped(entropies: Mapping[str, list[float]], baselines: Mapping[str, ModelBaseline]) -> dict[str, int]:
    return {model: len(values) for model, values in sorted(entropies.items()) if model not in baselines}


# --- inputs ------------------------------------------------------------------------------


def calls_from_trace_file(path: PathLike) -> Iterator[LLMCall]:
    """The LLM calls of a collector file-exporter file (JSON lines or protobuf, gzip or not).

    Spans that fail to normalize are logged and skipped: one bad span must not void a
    baseline over thousands.  A damaged file still raises (``TraceFileError``).
    """
    for traces in read_file(path):
        for context in iter_spans(traces):
            try:
                call = normalize_span(context)
            except MalformedLLMSpan as exc:
                logger.warning("%s: skipping malformed LLM span: %s", path, exc.reason)
                continue
            if call is not None:
                yield call


def calls_from_clickhouse(
    client: Client, database: str, since: datetime | None = None, exclude_flagged: bool = True
) -> Iterator[LLMCall]:
    """LLM calls with logprobs from the ``llm_calls`` table, started at or after ``since``.

    Rows carry logprob numbers in every content mode (tokens in ``store`` mode only).  With ``exclude_flagged``
    calls flagged by a hallucination detector are left out, the nearest thing to
    "labelled good" the tables hold; the confidence detector's own flags do not count, or
    each recomputation would narrow the baseline around itself.
    """
    if not _IDENTIFIER.fullmatch(database):
        raise BaselineError(f"invalid database name {database!r}")
    if not _has_logprobs_column(client, database):
        raise BaselineError(
            f"{database}.llm_calls has no {LOGPROBS_COLUMN} column: apply the schema migrations (migration 003 adds it)"
        )
    conditions = [f"{LOGPROBS_COLUMN} != ''"]
    parameters: dict[str, Any] = {}
    if since is not None:
        conditions.append("start_time >= {since:DateTime64(6, 'UTC')}")
        parameters["since"] = since
    if exclude_flagged:
        conditions.append(
            f"(trace_id, span_id) NOT IN (SELECT trace_id, span_id FROM {database}.findings FINAL "  # noqa: S608 - identifiers validated, values bound
            "WHERE flagged AND detector NOT IN ('confidence', 'sentinel'))"
        )
    query = (
        "SELECT trace_id, span_id, service, span_name, convention, model, "  # noqa: S608 - identifiers validated, values bound
        "toUnixTimestamp64Nano(start_time), toUnixTimestamp64Nano(end_time), answer, "
        f"{LOGPROBS_COLUMN} FROM {database}.llm_calls FINAL WHERE " + " AND ".join(conditions)
    )
    with client.query_rows_stream(query, parameters=parameters) as rows:
        for row in rows:
            call = _call_from_row(row)
            if call is not None:
                yield call


def _has_logprobs_column(client: Client, database: str) -> bool:
    result = client.query(
        "SELECT count() FROM system.columns WHERE database = {database:String} "
        "AND table = 'llm_calls' AND name = {column:String}",
        parameters={"database": database, "column": LOGPROBS_COLUMN},
    )
    return bool(result.result_rows[0][0])


def _call_from_row(row: tuple[Any, ...] | list[Any]) -> LLMCall | None:
    """An ``LLMCall`` with what the baseline needs; ``None`` (logged) for unreadable logprobs."""
    trace_id, span_id, service, span_name, convention, model, start, end, answer, logprobs_json = row
    try:
        logprobs = parse_logprobs_json(logprobs_json)
    except (ValueError, TypeError, KeyError) as exc:
        logger.warning("span %s/%s: unreadable %s: %s", trace_id, span_id, LOGPROBS_COLUMN, exc)
        return None
    return LLMCall(
        trace_id=trace_id,
        span_id=span_id,
        parent_span_id=None,
        service=service,
        span_name=span_name,
        start_time_unix_nano=int(start),
        end_time_unix_nano=int(end),
        convention=convention,
        model=model,
        output_messages=(Message("assistant", answer),),
        logprobs=logprobs,
    )


def parse_logprobs_json(text: str) -> tuple[TokenLogprob, ...]:
    """Logprobs from their stored JSON: ``[{"token", "logprob", "top_logprobs": [{"token", "logprob"}]}]``."""
    return tuple(
        TokenLogprob(
            token=str(position["token"]),
            logprob=float(position["logprob"]),
            top=tuple(
                TopLogprob(str(alternative["token"]), float(alternative["logprob"]))
                for alternative in position.get("top_logprobs") or ()
            ),
        )
        for position in json.loads(text)
    )


# --- the command ------------------------------------------------------------------------------


def run_baseline(
    output_path: Path,
    *,
    input_path: Path | None = None,
    client: Client | None = None,
    database: str = "halluwatch",
    since: datetime | None = None,
    top_k: int = DEFAULT_TOP_K,
    min_tokens: int = DEFAULT_MIN_TOKENS,
    min_responses: int = DEFAULT_MIN_RESPONSES,
) -> str:
    """Compute baselines from a trace file *or* ClickHouse, write them, return a summary for humans.

    Raises :class:`BaselineError` when no model has enough responses (no file is written then).
    """
    calls: Iterable[LLMCall]
    if input_path is not None and client is None:
        calls = calls_from_trace_file(input_path)
        source = f"trace file {input_path}"
    elif client is not None and input_path is None:
        calls = calls_from_clickhouse(client, database, since)
        source = f"clickhouse {database}.llm_calls" + (f" since {since.isoformat()}" if since else "")
    else:
        raise BaselineError("give exactly one input: a trace file or a ClickHouse client")
    entropies = response_entropies(calls, top_k, min_tokens)
    baselines = baselines_from_entropies(entropies, min_responses)
    skipped = _skipped(entropies, baselines)
    lines = [f"{model}: mean {b.mean:.4f}, stdev {b.stdev:.4f} nats, n={b.n}" for model, b in baselines.items()]
    lines += [
        f"{model}: skipped ({count} responses, need {min_responses}, or no variance)"
        for model, count in skipped.items()
    ]
    if not baselines:
        found = "; ".join(lines) or "no calls with usable logprobs"
        raise BaselineError(f"no model has {min_responses} measurable responses in {source}: {found}")
    version = write_baselines(output_path, baselines, source, top_k)
    return "\n".join([f"wrote {output_path} (version {version}) from {source}", *lines])
