"""``halluwatch train``'s pieces: the fit, the split by document, and a reproducible model file."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from detectors.support_features import WORD_FEATURES
from detectors.unsupported_spans.detector import SupportModel
from detectors.verdict import VERDICT_FEATURES, load_verdict_model
from pipeline.calibration.alert_probability import RouteTargets
from pipeline.config.alerting import AlertingSettings
from pipeline.offline.evaluate import EvalOutput, EvalRecord
from pipeline.offline.train import (
    RecordFeatures,
    TrainingDataError,
    data_files,
    fit_logistic,
    held_out,
    predicted_spans,
    train,
    train_verdict,
    verdict_file,
)

ABSENT = WORD_FEATURES.index("absent")
BEST = WORD_FEATURES.index("best")


def test_newton_fit_finds_the_direction_that_separates_the_classes():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(400, 2))
    y = (x[:, 0] - 0.5 * x[:, 1] + rng.normal(scale=0.3, size=400) > 0).astype(float)
    coef, _ = fit_logistic(x, y, np.ones(400), l2=1.0)
    assert coef[0] > 1.0 and coef[1] < -0.3


def test_the_split_follows_the_source_document():
    record = EvalRecord("a", "", ("one document",), "an answer", "qa", True)
    same_document = EvalRecord("b", "other question", ("one document",), "another answer", "qa", False)
    assert held_out(record) == held_out(same_document)
    sides = {held_out(EvalRecord(str(i), "", (f"document {i}",), "x", "qa", False)) for i in range(50)}
    assert sides == {True, False}


def synthetic_rows(n: int = 240, seed: int = 1) -> list[RecordFeatures]:
    """Records whose hallucinated words are absent from the sources and poorly matched."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        words = 12
        labels = rng.random(words) < (0.25 if i % 2 else 0.0)
        features = rng.random((words, len(WORD_FEATURES)))
        features[:, WORD_FEATURES.index("stop")] = 0.0
        features[:, ABSENT] = (labels | (rng.random(words) < 0.1)).astype(float)
        features[:, BEST] = np.where(labels, 0.3, 0.8) + rng.normal(scale=0.1, size=words)
        spans = tuple((5 * w, 5 * w + 4) for w in range(words) if labels[w])
        record = EvalRecord(str(i), "", (f"document {i}",), "x" * 60, "qa", bool(labels.any()), spans)
        word_spans = tuple((5 * w, 5 * w + 4) for w in range(words))
        rows.append(RecordFeatures("ragtruth" if i % 3 else "summedits", record, features, labels, 100,
                                   held_out(record), word_spans, "json" if i % 4 == 1 else "prose"))  # fmt: skip
    return rows


def test_training_is_reproducible_and_learns_the_planted_signal():
    rows = synthetic_rows()
    first = train(rows, {"synthetic": 1}).to_dict()
    second = train(rows, {"synthetic": 1}).to_dict()
    assert json.dumps(first, sort_keys=True) == json.dumps(second, sort_keys=True)
    model = SupportModel.from_dict(first)
    held = first["training"]["metrics"]["ragtruth"]["held_out"]
    assert held["word_auroc"] > 0.9 and held["auroc"] > 0.8 and held["span_f1"] > 0.5
    assert held["span_f1_json"] > 0.5 and held["span_f1_prose"] > 0.5  # a model for each kind of support
    assert all(0.0 < t < 1.0 for t in model.span_thresholds.values())
    assert first["version"] == train(rows, {"synthetic": 1}).model.version != train(rows, {"other": 2}).model.version


def test_spans_join_flagged_words_across_stop_words_only():
    row = synthetic_rows(3)[1]
    features = row.features.copy()
    features[:, WORD_FEATURES.index("stop")] = 0.0
    features[3, WORD_FEATURES.index("stop")] = 1.0
    row = RecordFeatures(row.dataset, row.record, features, row.word_labels, 100, False, row.word_spans, row.kind)
    probabilities = np.zeros(12)
    probabilities[[2, 4, 7]] = 0.9  # 2 and 4 around stop word 3; 7 alone
    assert predicted_spans(row, probabilities, 0.5) == [(10, 24), (35, 39)]


def test_missing_sets_are_named(tmp_path):
    (tmp_path / "ragtruth").mkdir()
    with pytest.raises(FileNotFoundError, match="ragtruth"):
        data_files(tmp_path, ["ragtruth"])


ROUTING = RouteTargets.from_settings(AlertingSettings())


def test_the_verdict_learns_which_detector_to_trust_per_set(tmp_path: Path):
    rng = np.random.default_rng(3)
    records, outputs = [], []
    for i in range(400):
        label = bool(i % 2)
        # Detector 0 (contradiction) knows the truth; detector 1 (grounding) is noise.
        features = np.zeros(len(VERDICT_FEATURES))
        features[0:2] = (0.3 + 0.4 * label + rng.normal(scale=0.1), 1.0)
        features[2:4] = (rng.random(), 1.0)
        record = EvalRecord(str(i), "", (f"document {i}",), "x", "qa", label)
        records.append(("summedits" if i % 3 else "ragtruth", record))
        flags = {"contradiction": 2, "grounding": 2} if features[0] > 0.5 else {}
        detectors = {name: {"flagged": True, "status": "ok", "severity": 2} for name in flags}
        outputs.append(EvalOutput(str(i), 0.0, False, detectors, verdict_features=tuple(features)))
    trained = train_verdict(records, outputs, {"contradiction": 0.25, "grounding": 0.4, "tool_facts": 0.5}, ROUTING)
    weights = dict(zip(trained.verdict.model.features, trained.verdict.model.coef, strict=True))
    assert weights["contradiction.score"] > 1.0 and abs(weights["grounding.score"]) < 0.3
    held = trained.metrics["summedits"]["out_of_fold"]
    assert held["auroc"] > 0.9 and sum(b["records"] for b in held["reliability"]) == held["records"]
    # Calibrated on RAGTruth's cross-fitted scores: near what it says on documents no fit saw.
    assert trained.metrics["ragtruth"]["out_of_fold"]["ece"] < 0.1
    # The slack route's minimum keeps false alarms within 3 % and still alerts on most hallucinations.
    slack = next(m for m in trained.minimums if m.route == "slack")
    assert slack.fitting.false_alarm_rate <= 0.03 + 1 / 200 and slack.fitting.recall > 0.5
    assert trained.metrics["ragtruth"]["out_of_fold"]["alerted_faithful"] <= 0.05
    document = verdict_file(trained, {"x": 1})
    assert document["thresholds"] == {"contradiction": 0.25, "grounding": 0.4}  # the verdict's detectors only
    assert document["alert_probability"]["slack"]["min_probability"] == round(slack.min_probability, 4)
    assert document["version"] == verdict_file(trained, {"x": 2})["version"]
    written = tmp_path / "verdict.json"
    written.write_text(json.dumps(document))
    assert load_verdict_model(written) == trained.verdict


def test_the_verdict_needs_ragtruth_records_to_calibrate_on():
    record = EvalRecord("1", "", ("document",), "x", "qa", True)
    output = EvalOutput("1", 0.0, False, {}, verdict_features=(0.0,) * len(VERDICT_FEATURES))
    with pytest.raises(TrainingDataError, match="ragtruth"):
        train_verdict([("wice", record), ("wice", replace(record, hallucinated=False))], [output, output], {}, ROUTING)


def test_each_kind_of_support_needs_span_labels_to_learn_from():
    rows = [r for r in synthetic_rows() if r.kind == "prose"]
    with pytest.raises(TrainingDataError, match="json support"):
        train(rows, {"synthetic": 1})
