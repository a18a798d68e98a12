"""Human labels for calibration: label files out and in, and the ``labels`` table (docs/operations.md).

The loop: :func:`export_for_labelling` writes a score-stratified sample of recent LLM calls
as JSONL with ``"label": null``; a person sets ``label`` on the lines they judged;
:func:`read_label_file` validates that same file and :func:`~pipeline.sinks.labels.insert_labels` stores it;
:func:`labelled_scores_from_clickhouse` joins the labels to the findings the workers wrote,
which is what calibration consumes.

A label is JSON ``true`` / ``"hallucinated"`` or ``false`` / ``"ok"``; nothing else is
accepted, so a typo never silently becomes a verdict.
"""

from __future__ import annotations

import hashlib
import heapq
import itertools
import json
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from clickhouse_connect.driver.client import Client

from detectors.verdict import NOT_HALLUCINATION_EVIDENCE, threshold_relative
from pipeline.offline.scored_calls import DetectorScore, LabelledScores
from pipeline.sinks.labels import SPAN_ID, TRACE_ID, Label, to_utc_ms

logger = logging.getLogger(__name__)

MAX_ERRORS = 20  # enough to fix a file in one pass; past that the file is probably not a label file
LABEL_WORDS = {"hallucinated": True, "ok": False}

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# Float32 columns read through their shortest decimal, so a stored 0.7 comes back as 0.7,
# not 0.699999988: thresholds chosen from these scores are written to a file people read.
_SCORE = "toFloat64(toString(score))"
_THRESHOLD = "toFloat64(toString(threshold))"


class LabelFileError(ValueError):
    """A label file with invalid lines; ``errors`` holds one ``path:line: field: problem`` each."""

    def __init__(self, errors: list[str], truncated: bool) -> None:
        message = "\n".join(errors)
        if truncated:
            message += f"\n(stopped after {len(errors)} errors)"
        super().__init__(message)
        self.errors = errors


@dataclass(frozen=True, slots=True)
class LabelFile:
    """What a label file held: its labels, and how many lines were not labelled yet."""

    labels: list[Label]
    unlabelled: int


class _InvalidLine(ValueError):
    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


def read_label_file(path: str | Path, default_labeller: str) -> LabelFile:
    """Parse and validate a JSONL label file; raise :class:`LabelFileError` listing every bad line.

    Each line is an object with ``trace_id`` (32 hex), ``span_id`` (16 hex) and ``label``,
    optionally ``labeller`` (default ``default_labeller``), ``labelled_at`` (ISO 8601, UTC
    when it has no offset; default: the file's modification time, when the labeller saved
    it) and ``note``; other keys (an exported line's prompt, answer, detectors) are ignored.
    Blank lines are skipped, and so are lines whose ``label`` is still null, counted in
    :attr:`LabelFile.unlabelled`.
    """
    if not default_labeller.strip():
        raise ValueError("default_labeller must not be empty")
    path = Path(path)
    saved_at = to_utc_ms(datetime.fromtimestamp(path.stat().st_mtime, tz=UTC))
    labels: list[Label] = []
    unlabelled = 0
    errors: list[str] = []
    first_line: dict[tuple[str, str, str], int] = {}
    with path.open("rb") as lines:
        for line_number, raw in enumerate(lines, 1):
            if not raw.strip():
                continue
            try:
                label = _parse_line(raw, default_labeller, saved_at)
            except _InvalidLine as exc:
                problems = exc.problems
            else:
                if label is None:
                    unlabelled += 1
                    continue
                key = (label.trace_id, label.span_id, label.labeller)
                if key not in first_line:
                    first_line[key] = line_number
                    labels.append(label)
                    continue
                problems = [f"span_id: labelled twice (line {first_line[key]} has the same span and labeller)"]
            errors.extend(f"{path}:{line_number}: {problem}" for problem in problems)
            if len(errors) > MAX_ERRORS:
                raise LabelFileError(errors[:MAX_ERRORS], truncated=True)
    if errors:
        raise LabelFileError(errors, truncated=False)
    return LabelFile(labels, unlabelled)


def export_for_labelling(
    client: Client,
    database: str,
    output_path: str | Path,
    *,
    limit: int = 200,
    since: datetime | None = None,
    bins: int = 5,
    seed: int = 0,
) -> int:
    """Write up to ``limit`` unlabelled LLM calls for people to label; returns the lines written.

    Candidates are calls that started at or after ``since`` with at least one ``ok`` finding
    of a hallucination detector (a call with none adds nothing to calibration) and no label
    yet.  Each call's score is its highest threshold-relative finding score (0.5 = "at the
    threshold"); calls are sampled from ``bins`` equal-width score bins, as equal a share
    per bin as the data allows, so rare high scores are not drowned by clean traffic.  The
    sample and the line order are a function of ``seed``; the order is not by score, so the
    scores do not anchor the person labelling.
    """
    if limit < 1 or bins < 1:
        raise ValueError("limit and bins must be at least 1")
    # Per bin, the `limit` spans with the lowest sample keys (negated: heapq pops the smallest).
    strata: list[list[tuple[int, str, str]]] = [[] for _ in range(bins)]
    query = f"""
        SELECT trace_id, span_id, groupArray(({_SCORE}, {_THRESHOLD}))
        FROM {database}.findings FINAL
        WHERE status = 'ok'
          AND NOT has({{not_evidence:Array(String)}}, detector)
          AND span_start_time >= {{since:DateTime64(6, 'UTC')}}
          AND (trace_id, span_id) NOT IN (SELECT trace_id, span_id FROM {database}.labels FINAL WHERE NOT withdrawn)
        GROUP BY trace_id, span_id
    """  # noqa: S608 - identifiers validated, values bound
    parameters = {"not_evidence": sorted(NOT_HALLUCINATION_EVIDENCE), "since": since or _EPOCH}
    with client.query_rows_stream(query, parameters=parameters) as rows:
        for trace_id, span_id, scores in rows:
            score = max(threshold_relative(s, t) for s, t in scores)
            stratum = strata[min(int(score * bins), bins - 1)]
            entry = (-_sample_key(seed, trace_id, span_id), trace_id, span_id)
            if len(stratum) < limit:
                heapq.heappush(stratum, entry)
            else:
                heapq.heappushpop(stratum, entry)
    quotas = _allocate([len(stratum) for stratum in strata], limit)
    chosen = sorted(
        (-negated_key, trace_id, span_id)
        for stratum, quota in zip(strata, quotas, strict=True)
        for negated_key, trace_id, span_id in heapq.nlargest(quota, stratum)
    )
    ids = [(trace_id, span_id) for _, trace_id, span_id in chosen]
    lines = _labelling_lines(client, database, ids)
    Path(output_path).write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), "utf-8")
    return len(lines)


def labelled_scores_from_clickhouse(
    client: Client, database: str, since: datetime | None = None
) -> list[LabelledScores]:
    """Labelled spans with their detectors' findings, from labels given at or after ``since``.

    Each person counts once, with their newest verdict (a review-queue verdict and a second look
    on the trace page are two rows of theirs); where several people labelled a span, the majority
    decides and a tie goes to the newest label.  Labelled spans with no findings (not processed, or processed before the
    findings' retention ran out) are skipped, and their number logged.
    """
    query = f"""
        SELECT labelled.trace_id, labelled.span_id, labelled.hallucinated, judged.p_hallucination,
               found.detector, found.score, found.status, found.severity, found.detector_version, found.policy
        FROM
        (
            SELECT trace_id, span_id,
                   countIf(verdict) AS yes, countIf(NOT verdict) AS no,
                   if(yes = no, argMax(verdict, (given_at, labeller)), yes > no) AS hallucinated
            FROM
            (
                -- one verdict per person: their newest, given in the review queue or elsewhere
                SELECT trace_id, span_id, labeller, argMax(label, labelled_at) AS verdict, max(labelled_at) AS given_at
                FROM {database}.labels FINAL
                WHERE labelled_at >= {{since:DateTime64(3, 'UTC')}} AND NOT withdrawn
                GROUP BY trace_id, span_id, labeller
            )
            GROUP BY trace_id, span_id
        ) AS labelled
        LEFT JOIN
        (
            SELECT trace_id, span_id, p_hallucination FROM {database}.llm_calls FINAL
            WHERE (trace_id, span_id) IN (SELECT trace_id, span_id FROM {database}.labels)
        ) AS judged
        USING (trace_id, span_id)
        LEFT JOIN
        (
            SELECT trace_id, span_id, detector, {_SCORE} AS score, status, severity, detector_version, policy
            FROM {database}.findings FINAL
            -- only labelled spans' findings go into the join's in-memory table
            WHERE (trace_id, span_id) IN (SELECT trace_id, span_id FROM {database}.labels)
        ) AS found
        USING (trace_id, span_id)
        ORDER BY labelled.trace_id, labelled.span_id, found.detector
    """  # noqa: S608 - identifiers validated, values bound
    rows = client.query(query, parameters={"since": since or _EPOCH}).result_rows
    labelled = []
    without_findings = 0
    for (trace_id, span_id, hallucinated, p), group in itertools.groupby(rows, key=lambda row: tuple(row[:4])):
        # LEFT JOIN fills an unmatched span's finding columns with defaults: detector ''.
        found = [row for row in group if row[4]]
        detectors = {
            detector: DetectorScore(score, status, severity, version)
            for *_, detector, score, status, severity, version, _ in found
        }
        if detectors:
            policy = found[0][-1]  # the spans stage judged the call under one policy: every finding names it
            labelled.append(LabelledScores(f"{trace_id}:{span_id}", bool(hallucinated), detectors, policy,
                                           None if p is None else float(p)))  # fmt: skip
        else:
            without_findings += 1
    if without_findings:
        logger.warning("%d labelled spans have no findings in %s.findings; skipped", without_findings, database)
    return labelled


def _parse_line(raw: bytes, default_labeller: str, default_time: datetime) -> Label | None:
    """The line's label, ``None`` when it is not labelled yet; raises :class:`_InvalidLine`."""
    try:
        text = raw.decode("utf-8-sig").rstrip("\r\n")  # -sig: editors on Windows start files with a BOM
    except UnicodeDecodeError as exc:
        raise _InvalidLine([f"not UTF-8 (byte {exc.start + 1})"]) from None
    try:
        record = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _InvalidLine([f"invalid JSON: {exc.msg} (column {exc.colno})"]) from None
    if not isinstance(record, dict):
        raise _InvalidLine(["not a JSON object"])
    if "label" not in record:
        raise _InvalidLine(["label: missing (null marks a line not labelled yet)"])
    if record["label"] is None:
        return None
    fields: dict[str, Callable[[Any], Any]] = {
        "trace_id": lambda value: _hex_id(value, TRACE_ID, 32),
        "span_id": lambda value: _hex_id(value, SPAN_ID, 16),
        "label": _label_value,
        "labeller": lambda value: default_labeller if value is None else _non_empty_string(value),
        "labelled_at": lambda value: default_time if value is None else _timestamp(value),
        "note": lambda value: "" if value is None else _string(value),
    }
    values: dict[str, Any] = {}
    problems: list[str] = []
    for name, parse in fields.items():
        try:
            values[name] = parse(record.get(name))
        except ValueError as exc:
            problems.append(f"{name}: {exc}")
    if problems:
        raise _InvalidLine(problems)
    return Label(
        trace_id=values["trace_id"],
        span_id=values["span_id"],
        hallucinated=values["label"],
        labeller=values["labeller"],
        labelled_at=values["labelled_at"],
        note=values["note"],
    )


def _hex_id(value: Any, pattern: re.Pattern[str], length: int) -> str:
    if value is None:
        raise ValueError("missing")
    if not isinstance(value, str) or not pattern.fullmatch(value.lower()):
        raise ValueError(f"must be {length} hex characters, got {json.dumps(value)}")
    return value.lower()  # OTLP ids are stored as lowercase hex


def _label_value(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value in LABEL_WORDS:
        return LABEL_WORDS[value]
    raise ValueError(f'must be true, false, "hallucinated" or "ok", got {json.dumps(value)}')


def _string(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"must be a string, got {json.dumps(value)}")
    return value


def _non_empty_string(value: Any) -> str:
    text = _string(value)
    if not text.strip():
        raise ValueError("must not be empty")
    return text


def _timestamp(value: Any) -> datetime:
    try:
        parsed = datetime.fromisoformat(_string(value))
    except ValueError:
        raise ValueError(f"must be an ISO 8601 time, got {json.dumps(value)}") from None
    return to_utc_ms(parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC))


def _sample_key(seed: int, trace_id: str, span_id: str) -> int:
    """A pseudo-random rank of the span, fixed for a seed (independent of the order rows arrive in)."""
    digest = hashlib.blake2b(f"{seed}:{trace_id}:{span_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def _allocate(available: list[int], total: int) -> list[int]:
    """Split ``total`` over bins as evenly as their sizes allow; a short bin's share goes to the rest.

    A remainder that does not divide evenly goes to the higher-score bins: flagged calls are
    the rarer ones and the ones a threshold is decided on.
    """
    quotas = [0] * len(available)
    remaining = min(total, sum(available))
    while remaining:
        open_bins = [i for i in reversed(range(len(available))) if quotas[i] < available[i]]
        share, extra = divmod(remaining, len(open_bins))
        for rank, i in enumerate(open_bins):
            given = min(share + (rank < extra), available[i] - quotas[i])
            quotas[i] += given
            remaining -= given
    return quotas


def _labelling_lines(client: Client, database: str, ids: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """One export line per span in ``ids``, in that order."""
    parameters = {"ids": ids}
    calls = {
        (row[0], row[1]): row[2:]
        for row in client.query(
            f"""
            SELECT trace_id, span_id, content_mode, prompt, grounding, answer
            FROM {database}.llm_calls FINAL
            WHERE (trace_id, span_id) IN {{ids:Array(Tuple(String, String))}}
            """,  # noqa: S608 - identifiers validated, values bound
            parameters=parameters,
        ).result_rows
    }
    findings = client.query(
        f"""
        SELECT trace_id, span_id, service, model, operation, span_start_time,
               detector, status, {_SCORE}, {_THRESHOLD}, flagged, summary
        FROM {database}.findings FINAL
        WHERE (trace_id, span_id) IN {{ids:Array(Tuple(String, String))}}
        ORDER BY trace_id, span_id, detector
        """,  # noqa: S608 - identifiers validated, values bound
        parameters=parameters,
    ).result_rows
    lines: dict[tuple[str, str], dict[str, Any]] = {}
    for row in findings:
        trace_id, span_id, service, model, operation, start, detector, status, score, threshold, flagged, summary = row
        # A call missing from llm_calls (other retention) is still labelled by its ids.
        content_mode, prompt, grounding, answer = calls.get((trace_id, span_id), ("", "", "", ""))
        line = lines.setdefault(
            (trace_id, span_id),
            {
                "trace_id": trace_id,
                "span_id": span_id,
                "start_time": start.replace(tzinfo=UTC).isoformat(),
                "service": service,
                "model": model,
                "operation": operation,
                "content_mode": content_mode,
                "prompt": prompt,
                "grounding": grounding,
                "answer": answer,
                "detectors": {},
                "label": None,
                "labeller": None,
                "note": "",
            },
        )
        line["detectors"][detector] = {
            "status": status,
            "score": score,
            "threshold": threshold,
            "flagged": bool(flagged),
            "summary": summary,
        }
    return [lines[span] for span in ids]
