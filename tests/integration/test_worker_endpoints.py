"""A real `halluwatch worker` serves Prometheus metrics and a health endpoint on one port."""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from dashboards import prometheus_panels
from pipeline.tools.demo_broker import TansuBroker
from pipeline.ui.defences import SECURITY_HEADERS
from tests.integration.demo_data import demo_messages
from tests.integration.support import WorkerProcess, produce

pytestmark = pytest.mark.usefixtures("exported_model")


def _get(port: int, path: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:  # noqa: S310 - an http:// URL built here
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def _security_headers(port: int, path: str, headers: dict[str, str]) -> dict[str, str]:
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=5) as response:  # noqa: S310 - an http:// URL built here
            received = response.headers
    except urllib.error.HTTPError as error:
        received = error.headers
    return {name: received[name] for name, _ in SECURITY_HEADERS if name in received}


def _health_until_ready(worker: WorkerProcess, timeout_seconds: float = 120) -> list[tuple[int, dict[str, object]]]:
    """Every /healthz answer up to and including the first 200."""
    answers: list[tuple[int, dict[str, object]]] = []
    deadline = time.monotonic() + timeout_seconds
    while time.monotonic() < deadline:
        assert worker.process is not None and worker.process.poll() is None, worker.log()
        try:
            status, body = _get(worker.metrics_port, "/healthz")
        except OSError:  # not listening yet: the model loads before the endpoint opens
            time.sleep(0.2)
            continue
        answers.append((status, json.loads(body)))
        if status == 200:
            return answers
        time.sleep(0.1)
    raise AssertionError(f"/healthz never answered 200: {answers[-3:]}\n{worker.log()}")


def _samples(port: int) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Sample name -> (labels, value) of the /metrics page, parsed as Prometheus does."""
    status, text = _get(port, "/metrics")
    assert status == 200
    samples: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        samples.setdefault(family.name, [])  # families without samples yet (labelled, unused) still count
        for sample in family.samples:
            samples.setdefault(sample.name, []).append((sample.labels, sample.value))
    return samples


def test_worker_serves_health_and_metrics(tansu: TansuBroker, topic_prefix: str, tmp_path: Path):
    worker = WorkerProcess(tansu.bootstrap, topic_prefix, tmp_path).start()
    answers = _health_until_ready(worker)
    assert all(status == 503 and body["status"] == "starting" for status, body in answers[:-1])
    assert answers[-1][1]["status"] == "ok"

    sent = produce(tansu.bootstrap, worker.input_topic, demo_messages())
    traces = sent - 1  # and one garbage message
    worker.wait_for("halluwatch_messages_done_total", sent)

    samples = _samples(worker.metrics_port)
    findings = {(labels["detector"], labels["status"]) for labels, _ in samples["halluwatch_findings_total"]}
    assert {("schema_violation", "ok"), ("grounding", "ok"), ("confidence", "skipped")} <= findings
    scored = {labels["detector"] for labels, _ in samples["halluwatch_detector_score_count"]}
    assert {"schema_violation", "grounding", "contradiction"} <= scored
    assert "confidence" not in scored  # skipped everywhere: no score to observe
    assert {labels["detector"] for labels, _ in samples["halluwatch_detector_seconds_count"]} >= {"grounding"}
    assert sum(value for _, value in samples["halluwatch_batch_messages_sum"]) == sent
    inserts = {labels["table"]: value for labels, value in samples["halluwatch_clickhouse_insert_rows_sum"]}
    assert inserts["findings"] >= traces and inserts["llm_calls"] >= traces - 1
    assert {labels["table"] for labels, _ in samples["halluwatch_clickhouse_insert_seconds_count"]} >= {"findings"}
    assert [(labels["reason"], value) for labels, value in samples["halluwatch_dead_letters_total"]] == [
        ("undecodable", 1.0)
    ]
    # Exported; a write may be retried on a loaded machine (a slow broker ack), and each retry says why.
    ((labels, retries),) = samples["halluwatch_write_retries_total"]
    assert labels == {} and (retries == 0 or "failed, retrying in" in worker.log_path.read_text(errors="replace"))
    assert samples["halluwatch_worker_ready"] == [({}, 1.0)]

    # Consumer lag per input partition, once the worker has committed what it processed.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        lag = {
            labels["partition"]: value
            for labels, value in _samples(worker.metrics_port)["halluwatch_consumer_lag"]
            if labels["topic"] == worker.input_topic
        }
        if lag and all(value == 0 for value in lag.values()):
            break
        time.sleep(0.5)
    assert lag and set(lag) <= {"0", "1"} and all(value == 0 for value in lag.values()), lag

    # Every metric the worker dashboard queries exists.
    for panel in prometheus_panels():
        for name in re.findall(r"\bhalluwatch_\w+", panel.query):
            assert name in samples, f"{panel.name} queries {name}, which the worker does not export"

    # The triage pages, from the worker's own embedded ClickHouse session (chDB admits one process).
    token_file = tmp_path / "ui_token"
    assert token_file.stat().st_mode & 0o077 == 0, "the made-up token is the owner's alone"
    log = worker.log_path.read_text(errors="replace")
    assert f"sign in with the token in {token_file}" in log and token_file.read_text().strip() not in log
    status, page = _get(worker.metrics_port, "/")
    assert status == 200 and "Paste the UI token" in page  # redirected to sign in
    bearer = {"Authorization": f"Bearer {token_file.read_text().strip()}"}
    status, page = _get(worker.metrics_port, "/?service=travel-guide", bearer)
    (trace,) = set(re.findall(r'href="/trace/([0-9a-f]{32})#', page))
    status, page = _get(worker.metrics_port, f"/trace/{trace}", bearer)
    assert status == 200 and re.search(r"<mark [^>]*>1950</mark>", page), page[:2000]
    for path in ("/healthz", "/metrics", "/", f"/trace/{trace}", "/no-such-page"):  # one policy for the whole port
        assert _security_headers(worker.metrics_port, path, bearer) == dict(SECURITY_HEADERS), path

    assert worker.stop() == 0
