"""``halluwatch baseline``: statistics, the versioned file, trace-file and ClickHouse inputs."""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from detectors.baselines import BaselineError, load_baselines, write_baselines
from detectors.config import ModelBaseline
from detectors.llm_call import LLMCall, TokenLogprob, TopLogprob
from pipeline.offline.baseline import (
    baselines_from_entropies,
    calls_from_clickhouse,
    calls_from_trace_file,
    compute_baselines,
    parse_logprobs_json,
    response_entropies,
    run_baseline,
)
from pipeline.tools.example_traces import EXAMPLES, example_traces
from pipeline.tools.replay import write_json_lines
from tests.calls import make_llm_call


def uniform_call(model: str, k: int, tokens: int = 6) -> LLMCall:
    """A call whose every position is a uniform top-k: mean entropy exactly log k."""
    top = tuple(TopLogprob(f" t{i}", math.log(1 / k)) for i in range(k))
    logprobs = tuple(TokenLogprob(" t0", math.log(1 / k), top) for _ in range(tokens))
    return make_llm_call(" t0" * tokens, model=model, logprobs=logprobs)


def test_baseline_is_mean_and_sample_stdev_per_model() -> None:
    ks = [2, 3, 4, 2, 3]
    calls = [uniform_call("a", k) for k in ks] + [uniform_call("b", 5)] * 2 + [uniform_call("c", 2)]
    baselines = compute_baselines(calls, min_responses=2)
    expected = [math.log(k) for k in ks]
    assert set(baselines) == {"a"}  # b: no variance, c: one response
    assert baselines["a"].mean == pytest.approx(statistics.fmean(expected), abs=1e-6)
    assert baselines["a"].stdev == pytest.approx(statistics.stdev(expected), abs=1e-6)
    assert baselines["a"].n == 5
    assert baselines["a"].version.startswith("entropy-")


def test_calls_without_usable_logprobs_do_not_count() -> None:
    no_logprobs = LLMCall("0" * 32, "1" * 16, None, "svc", "chat", 0, 1, "gen_ai", model="a")
    assert response_entropies([no_logprobs, uniform_call("a", 3, tokens=2)], min_tokens=5) == {}


def test_version_depends_only_on_the_statistics() -> None:
    first = baselines_from_entropies({"a": [0.1, 0.2, 0.3]}, min_responses=2)
    again = baselines_from_entropies({"a": [0.3, 0.2, 0.1]}, min_responses=2)
    other = baselines_from_entropies({"a": [0.1, 0.2, 0.4]}, min_responses=2)
    assert first["a"].version == again["a"].version != other["a"].version


def test_yaml_round_trip(tmp_path: Path) -> None:
    baselines = baselines_from_entropies({"gpt-4o-mini": [0.1, 0.2, 0.3], "llama": [1.0, 1.5]}, min_responses=2)
    path = tmp_path / "baselines.yaml"
    version = write_baselines(path, baselines, "unit test", top_k=5)
    document = yaml.safe_load(path.read_text())
    assert document["version"] == version == baselines["llama"].version
    assert document["source"] == "unit test" and document["top_k"] == 5 and document["created"]
    assert set(document["models"]["llama"]) == {"mean", "stdev", "n"}
    assert load_baselines(path) == baselines


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"models": {}}, "'version'"),
        ({"version": "v1", "models": {"m": {"mean": 0.1, "stdev": 0.0, "n": 9}}}, "models.m"),
        ({"version": "v1", "models": {"m": {"mean": 0.1, "stdev": 0.1, "n": 9, "extra": 1}}}, "models.m"),
        ({"version": "v1", "models": {"m": "0.1"}}, "models.m"),
    ],
)
def test_bad_baselines_files_name_the_problem(tmp_path: Path, document: dict[str, Any], message: str) -> None:
    path = tmp_path / "baselines.yaml"
    path.write_text(yaml.safe_dump(document))
    with pytest.raises(BaselineError, match=message):
        load_baselines(path)


def test_missing_baselines_file_is_a_baseline_error(tmp_path: Path) -> None:
    with pytest.raises(BaselineError, match="cannot read"):
        load_baselines(tmp_path / "absent.yaml")


def test_calls_from_trace_file_reads_what_the_worker_would(tmp_path: Path) -> None:
    path = tmp_path / "traces.jsonl"
    write_json_lines(path, example_traces())
    calls = list(calls_from_trace_file(path))
    assert len(calls) == len(EXAMPLES)  # one LLM call each
    with_logprobs = [call for call in calls if call.logprobs]
    # Layouts that record the response write the answer's token logprobs where an example gives its confidence.
    assert len(with_logprobs) == sum(1 for e in EXAMPLES if e.confidence is not None and e.answer)
    assert all("".join(p.token for p in call.logprobs) == call.answer for call in with_logprobs)
    assert set(compute_baselines(calls, min_responses=2)) == {"gpt-4o-mini"}


def test_run_baseline_from_a_trace_file(tmp_path: Path) -> None:
    traces = tmp_path / "traces.jsonl.gz"
    write_json_lines(traces, example_traces())
    out = tmp_path / "baselines.yaml"
    summary = run_baseline(out, input_path=traces, min_responses=2)
    assert f"wrote {out}" in summary and "gpt-4o-mini: mean" in summary
    assert load_baselines(out)["gpt-4o-mini"].n == 6


def test_run_baseline_refuses_too_little_data_and_writes_nothing(tmp_path: Path) -> None:
    traces = tmp_path / "traces.jsonl"
    write_json_lines(traces, example_traces())
    out = tmp_path / "baselines.yaml"
    with pytest.raises(BaselineError, match=r"gpt-4o-mini: skipped \(6 responses, need 30"):
        run_baseline(out, input_path=traces)
    assert not out.exists()


def test_run_baseline_needs_exactly_one_input(tmp_path: Path) -> None:
    with pytest.raises(BaselineError, match="exactly one input"):
        run_baseline(tmp_path / "out.yaml")
    with pytest.raises(BaselineError, match="exactly one input"):
        run_baseline(tmp_path / "out.yaml", input_path=tmp_path / "x", client=FakeClickHouse([], has_column=True))  # type: ignore[arg-type]


class FakeClickHouse:
    """The two clickhouse-connect calls the loader makes, answering from fixed rows."""

    def __init__(self, rows: list[tuple[Any, ...]], has_column: bool) -> None:
        self.rows = rows
        self.has_column = has_column
        self.queries: list[tuple[str, dict[str, Any]]] = []

    def query(self, sql: str, parameters: dict[str, Any]) -> Any:
        self.queries.append((sql, parameters))
        return type("Result", (), {"result_rows": [[1 if self.has_column else 0]]})()

    @contextmanager
    def query_rows_stream(self, sql: str, parameters: dict[str, Any]) -> Iterator[Iterator[tuple[Any, ...]]]:
        self.queries.append((sql, parameters))
        yield iter(self.rows)


LOGPROBS = [{"token": "Hi", "logprob": -0.1, "top_logprobs": [{"token": "Hi", "logprob": -0.1}]}]


def row(span_id: str, logprobs_json: str) -> tuple[Any, ...]:
    return ("a" * 32, span_id, "svc", "chat", "gen_ai", "gpt-4o", 10, 20, "Hi", logprobs_json)


def test_calls_from_clickhouse_without_the_column_says_what_to_do() -> None:
    with pytest.raises(BaselineError, match="no logprobs_json column"):
        list(calls_from_clickhouse(FakeClickHouse([], has_column=False), "halluwatch"))  # type: ignore[arg-type]


def test_calls_from_clickhouse_rejects_odd_database_names() -> None:
    with pytest.raises(BaselineError, match="invalid database name"):
        list(calls_from_clickhouse(FakeClickHouse([], has_column=True), "x; DROP TABLE y"))  # type: ignore[arg-type]


def test_calls_from_clickhouse_parses_rows_and_skips_unreadable_ones() -> None:
    client = FakeClickHouse([row("1" * 16, json.dumps(LOGPROBS)), row("2" * 16, "{not json")], has_column=True)
    calls = list(calls_from_clickhouse(client, "halluwatch"))  # type: ignore[arg-type]
    assert [(c.span_id, c.model, c.answer, c.start_time_unix_nano) for c in calls] == [("1" * 16, "gpt-4o", "Hi", 10)]
    assert calls[0].logprobs == (TokenLogprob("Hi", -0.1, (TopLogprob("Hi", -0.1),)),)
    sql = client.queries[-1][0]
    assert "logprobs_json != ''" in sql and "NOT IN" in sql and "{since" not in sql


def test_calls_from_clickhouse_binds_since_as_a_parameter() -> None:
    client = FakeClickHouse([], has_column=True)
    since = datetime(2026, 1, 1, tzinfo=UTC)
    list(calls_from_clickhouse(client, "halluwatch", since=since, exclude_flagged=False))  # type: ignore[arg-type]
    sql, parameters = client.queries[-1]
    assert parameters == {"since": since} and "NOT IN" not in sql


def test_parse_logprobs_json_tolerates_missing_top_logprobs() -> None:
    assert parse_logprobs_json('[{"token": "a", "logprob": -1}]') == (TokenLogprob("a", -1.0),)


def test_model_baseline_rejects_nonsense() -> None:
    with pytest.raises(ValueError):
        ModelBaseline(mean=0.1, stdev=math.nan, n=10)
