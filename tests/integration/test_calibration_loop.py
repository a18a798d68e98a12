"""The weekly loop (docs/operations.md, Calibration): findings -> labels -> calibrate -> a new version, stamped.

Everything as a user runs it: a `halluwatch worker` on a Tansu broker with embedded
ClickHouse, then `halluwatch label import` and `halluwatch calibrate --from-clickhouse`
against the worker's database, then the worker restarted on the new thresholds file.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from detectors.thresholds import load_thresholds
from pipeline.tools.demo_broker import TansuBroker
from pipeline.tools.example_traces import EXAMPLES, example_traces
from tests.integration.support import WorkerProcess, produce
from tests.integration.test_cli import halluwatch

pytestmark = pytest.mark.usefixtures("exported_model")


def _run_on(worker: WorkerProcess, traces, bootstrap: str) -> None:
    worker.start()
    try:
        keyed = [(t.resource_spans[0].scope_spans[0].spans[0].trace_id.hex().encode(), t.SerializeToString())
                 for t in traces]  # fmt: skip
        produce(bootstrap, worker.input_topic, keyed)
        worker.wait_for("halluwatch_messages_done_total", len(keyed))
    finally:
        assert worker.stop() == 0, worker.log()


def test_labels_calibrate_and_the_restarted_worker_stamps_the_new_version(
    tansu: TansuBroker, topic_prefix: str, tmp_path: Path
):
    worker = WorkerProcess(tansu.bootstrap, topic_prefix, tmp_path / "worker")
    traces = example_traces()
    _run_on(worker, traces, tansu.bootstrap)
    env = {"HALLUWATCH_DATA_DIR": str(worker.data_dir)}

    # People label what the worker saw (here: the examples' ground truth).
    truth = {t.resource_spans[0].scope_spans[0].spans[0].trace_id.hex(): e.hallucinated
             for e, t in zip(EXAMPLES, traces, strict=True)}  # fmt: skip
    calls = worker.query("SELECT trace_id, span_id FROM halluwatch.llm_calls FINAL")
    labels = tmp_path / "labels.jsonl"
    labels.write_text(
        "".join(json.dumps({"trace_id": t, "span_id": s, "label": truth[t]}) + "\n" for t, s in calls)
        + json.dumps({"trace_id": "ab" * 16, "span_id": "cd" * 8, "label": None})
        + "\n"  # not labelled yet
    )
    imported = halluwatch("label", "import", str(labels), "--labeller", "alice", **env)
    assert imported.returncode == 0, imported.stderr
    assert f"imported {len(calls)} labels" in imported.stdout and "1 lines not labelled yet" in imported.stdout

    too_strict = halluwatch("calibrate", "--from-clickhouse", "--output", str(tmp_path / "x"), **env)
    assert too_strict.returncode == 1 and "calibration needs at least 30 positives" in too_strict.stderr

    out = tmp_path / "calibration"
    calibrated = halluwatch(
        "calibrate", "--from-clickhouse", "--output", str(out), "--min-positives", "3", "--holdout", "0", **env
    )
    assert calibrated.returncode == 0, calibrated.stderr
    document = yaml.safe_load((out / "thresholds.yaml").read_text())
    assert document["version"].startswith("cal-") and document["dataset_size"] == len(calls)
    assert document["positives"] == sum(truth.values())
    assert {"pr_agreement.png", "score_histograms.png"} <= {p.name for p in out.iterdir()}
    diff = halluwatch("calibrate", "--diff", "detectors/data/thresholds.yaml", str(out / "thresholds.yaml"))
    built_in = load_thresholds().version
    assert f"version: {built_in} -> {document['version']}" in diff.stdout

    # The restarted worker loads the new file; what it writes from now on carries its version.
    worker.env["HALLUWATCH_THRESHOLDS_FILE"] = str(out / "thresholds.yaml")
    later = example_traces()[:2]
    _run_on(worker, later, tansu.bootstrap)
    versions = dict(
        worker.query("SELECT trace_id, any(thresholds_version) FROM halluwatch.findings FINAL GROUP BY trace_id")
    )
    assert {versions[t.resource_spans[0].scope_spans[0].spans[0].trace_id.hex()] for t in later} == {
        document["version"]
    }
    assert {versions[t] for t in truth} == {built_in}
    assert f"thresholds {document['version']}" in worker.log_path.read_text()


def test_label_import_reports_every_bad_line(tmp_path: Path):
    labels = tmp_path / "labels.jsonl"
    labels.write_text('{"trace_id": "zz", "span_id": "cdcdcdcdcdcdcdcd", "label": true}\n{not json\n')
    result = halluwatch("label", "import", str(labels), HALLUWATCH_DATA_DIR=str(tmp_path))
    assert result.returncode == 1
    assert "labels.jsonl:1: trace_id" in result.stderr and "labels.jsonl:2" in result.stderr
