from __future__ import annotations

from dataclasses import astuple
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path

import jsonschema
import pytest
import yaml

from detectors.thresholds import Thresholds, load_thresholds
from pipeline.agreement.rules import AgreementRule
from pipeline.config.alerting import AlertRule
from pipeline.offline.calibrate import (
    CalibrationError,
    OperatingPoint,
    calibrate,
    choose_at_precision,
    cost_ratio_threshold,
    dataset_sha256,
    diff_thresholds,
    is_held_out,
    labelled_from_eval,
    load_thresholds_schema,
    operating_point,
    sweep,
    write_thresholds,
)
from pipeline.offline.calibration_plots import write_plots
from pipeline.offline.evaluate import EvalOutput, EvalRecord
from pipeline.offline.scored_calls import DetectorScore, LabelledScores

TWO_DETECTORS = AgreementRule([AlertRule(name="two", route="slack")], window_seconds=600)
CURRENT = Thresholds("builtin-test", {"a": 0.5, "b": 0.5, "sentinel": 0.3, "unseen": 0.4})
NOW = datetime(2026, 11, 23, 10, 15, tzinfo=UTC)


def record(id_: str, hallucinated: bool, **scores: float | None) -> LabelledScores:
    """A labelled record; a score of None is a skipped run."""
    return LabelledScores(
        id_,
        hallucinated,
        {
            name: DetectorScore(0.0, "skipped") if score is None else DetectorScore(score, "ok", detector_version="1")
            for name, score in scores.items()
        },
    )


# Six records, scores (a, b) and label, worked through by hand in the tests below.
TINY = [
    record("r1", True, a=0.9, b=0.9, sentinel=0.9),
    record("r2", True, a=0.8, b=0.2, sentinel=0.1),
    record("r3", False, a=0.7, b=0.6),
    record("r4", True, a=0.2, b=0.7),
    record("r5", False, a=0.1, b=0.1),
    record("r6", True, a=0.6, b=None),
]


def test_sweep_one_point_per_distinct_score_exact():
    points = sweep([0.9, 0.8, 0.8, 0.3, 0.1], [True, True, False, True, False])
    # (threshold, precision, recall, f1, TP, FP, FN)
    assert [astuple(p) for p in points] == [
        (0.1, 3 / 5, 1.0, pytest.approx(0.75), 3, 2, 0),
        (0.3, 3 / 4, 1.0, pytest.approx(6 / 7), 3, 1, 0),
        (0.8, 2 / 3, 2 / 3, pytest.approx(2 / 3), 2, 1, 1),
        (0.9, 1.0, 1 / 3, pytest.approx(0.5), 1, 0, 2),
    ]
    assert sweep([], []) == []
    with pytest.raises(ValueError):
        sweep([0.1], [])


def test_operating_point_matches_sweep_and_nothing_flagged_is_zero_precision():
    scores, labels = [0.9, 0.8, 0.8, 0.3, 0.1], [True, True, False, True, False]
    assert operating_point(scores, labels, 0.8) == sweep(scores, labels)[2]
    assert operating_point(scores, labels, 0.95) == OperatingPoint(0.95, 0.0, 0.0, 0.0, 0, 0, 3)


def test_choose_at_precision_best_recall_then_higher_threshold():
    points = sweep([0.9, 0.8, 0.8, 0.3, 0.1], [True, True, False, True, False])
    chosen = choose_at_precision(points, 0.67)
    assert chosen is not None and chosen.threshold == 0.3  # P 0.75 R 1.0
    chosen = choose_at_precision(points, 0.8)
    assert chosen is not None and chosen.threshold == 0.9  # only P 1.0 qualifies
    chosen = choose_at_precision(points, 0.6)
    assert chosen is not None and chosen.threshold == 0.3  # 0.1 and 0.3 both reach R 1.0
    assert choose_at_precision(points, 1.01) is None
    chosen = choose_at_precision(points, 0.6, min_flagged=5)
    assert chosen is not None and chosen.threshold == 0.1  # the only point flagging 5 records
    assert choose_at_precision(points, 0.8, min_flagged=2) is None  # P 1.0 rests on one record


def test_few_flagged_records_do_not_make_a_threshold():
    # 40 positives at 0.1..0.4 mixed with 60 negatives, and 3 positives alone at the top.
    records = [record(f"p{i}", True, a=0.1 + (i % 4) / 10) for i in range(40)]
    records += [record(f"n{i}", False, a=0.1 + (i % 4) / 10) for i in range(60)]
    records += [record(f"top{i}", True, a=0.9) for i in range(3)]
    lucky = calibrate(records, CURRENT, TWO_DETECTORS, min_flagged=1, holdout=0.0).detectors["a"]
    assert (lucky.threshold, lucky.chosen_by) == (0.9, "target_precision")
    kept = calibrate(records, CURRENT, TWO_DETECTORS, holdout=0.0).detectors["a"]
    assert (kept.threshold, kept.chosen_by) == (
        0.5,
        "kept: no threshold flagging >= 30 records reaches precision 0.67 (best 0.434)",
    )


def test_cost_ratio_threshold():
    assert cost_ratio_threshold(1.0, 0.5) == pytest.approx(0.5)
    assert cost_ratio_threshold(2.0, 0.2) == pytest.approx(1 / 9)  # 1 / (1 + 2 * 0.8 / 0.2)
    assert cost_ratio_threshold(0.0, 0.1) == 1.0  # misses cost nothing: never flag
    with pytest.raises(ValueError):
        cost_ratio_threshold(1.0, 0.0)
    with pytest.raises(ValueError):
        cost_ratio_threshold(-1.0, 0.5)


def test_calibrate_tiny_set_by_hand():
    calibration = calibrate(
        TINY, CURRENT, TWO_DETECTORS, target_precision=0.8, min_positives=2, min_flagged=1, holdout=0.0
    )
    a, b = calibration.detectors["a"], calibration.detectors["b"]
    # a (6 ok, 4 positive): at 0.2 flags all but r5: P 4/5, R 1 — the best recall at P >= 0.8.
    assert a.fit is not None and (a.threshold, a.chosen_by) == (0.2, "target_precision")
    assert astuple(a.fit) == (0.2, 0.8, 1.0, pytest.approx(8 / 9), 4, 1, 0)
    # b (r6 skipped: 5 ok, 3 positive): 0.2 gives P 3/4 < 0.8, so 0.7: P 1, R 2/3.
    assert b.fit is not None and astuple(b.fit) == (0.7, 1.0, 2 / 3, pytest.approx(0.8), 2, 0, 1)
    assert a.heldout is None and a.detector_version == "1"
    assert (calibration.dataset_size, calibration.positives, calibration.label_prior) == (6, 4, 4 / 6)
    # Two detectors flag r1 (a, b) and r4 (a at 0.2, b at 0.7) only: P 2/2, R 2/4.
    agreement = calibration.agreement
    assert (agreement.fit.precision, agreement.fit.recall) == (1.0, 0.5)
    assert agreement.rules == ("two",)
    # On the curve, the lowest agreement score >= 0.5 is that same rule.
    at_half = min((p for p in agreement.curve if p.threshold >= 0.5), key=lambda p: p.threshold)
    assert (at_half.true_positives, at_half.false_positives) == (2, 0)


def test_detectors_kept_with_reasons():
    calibration = calibrate(
        TINY, CURRENT, TWO_DETECTORS, target_precision=0.8, min_positives=4, min_flagged=1, holdout=0.0
    )
    b = calibration.detectors["b"]
    assert (b.threshold, b.chosen_by) == (0.5, "kept: 3 positives among 5 ok fitting records, minimum 4")
    assert b.fit == operating_point([0.9, 0.2, 0.6, 0.7, 0.1], [True, True, False, True, False], 0.5)
    assert calibration.detectors["a"].chosen_by == "target_precision"
    assert calibration.detectors["unseen"].chosen_by == "kept: no ok scores among the fitting records"
    sentinel = calibration.detectors["sentinel"]
    assert (sentinel.threshold, sentinel.chosen_by, sentinel.curve) == (0.3, "kept: not a hallucination detector", ())
    unreachable = calibrate(
        TINY, CURRENT, TWO_DETECTORS, target_precision=1.0, min_positives=2, min_flagged=1, holdout=0.0
    )
    assert unreachable.detectors["a"].threshold == 0.8  # r1 and r2: P 1, R 2/4
    assert unreachable.detectors["b"].threshold == 0.7
    no_point = calibrate(
        [record("p1", True, a=0.1), record("p2", True, a=0.1), record("n1", False, a=0.5)],
        CURRENT,
        TWO_DETECTORS,
        target_precision=0.9,
        min_positives=2,
        min_flagged=1,
        holdout=0.0,
    )
    assert (
        no_point.detectors["a"].chosen_by
        == "kept: no threshold flagging >= 1 records reaches precision 0.90 (best 0.667)"
    )


def test_refuses_too_few_positives():
    with pytest.raises(CalibrationError, match=r"only 4 of 6 .* at least 30 positives"):
        calibrate(TINY, CURRENT, TWO_DETECTORS)


def test_cost_ratio_sets_tau_star():
    calibration = calibrate(TINY, CURRENT, TWO_DETECTORS, cost_ratio=1.0, min_positives=2, min_flagged=1, holdout=0.0)
    tau = 1 / (1 + (2 / 6) / (4 / 6))  # λ 1, π 4/6
    a = calibration.detectors["a"]
    assert (a.threshold, a.chosen_by) == (pytest.approx(tau), "cost_ratio")
    assert a.fit == operating_point([r.detectors["a"].score for r in TINY], [r.hallucinated for r in TINY], tau)
    assert calibration.target_precision is None and calibration.cost_ratio == 1.0


def test_split_is_deterministic_and_sized():
    ids = [f"rec-{i}" for i in range(2000)]
    held = [i for i in ids if is_held_out(i, 0.3)]
    assert held == [i for i in ids if is_held_out(i, 0.3)]
    assert 0.25 < len(held) / len(ids) < 0.35
    assert not any(is_held_out(i, 0.0) for i in ids)
    records = [record(f"id{i}", i % 3 == 0, a=(i * 37 % 100) / 100) for i in range(300)]
    calibration = calibrate(records, CURRENT, TWO_DETECTORS, min_positives=10, holdout=0.3)
    heldout = [r for r in records if is_held_out(r.id, 0.3)]
    a = calibration.detectors["a"]
    expected = operating_point(
        [r.detectors["a"].score for r in heldout], [r.hallucinated for r in heldout], a.threshold
    )
    assert calibration.heldout_size == len(heldout) and a.heldout == expected


def test_dataset_hash_ignores_order_and_sees_scores():
    assert dataset_sha256(TINY) == dataset_sha256(list(reversed(TINY)))
    changed = [*TINY[:-1], record("r6", True, a=0.61, b=None)]
    assert dataset_sha256(changed) != dataset_sha256(TINY)


def test_labelled_from_eval_skips_unlabelled():
    records = [EvalRecord("x", "q", ("c",), "a", hallucinated=True), EvalRecord("y", "q", ("c",), "a")]
    outputs = [
        EvalOutput(i, 0.1, False, {"a": {"score": 0.7, "flagged": True, "status": "ok", "severity": 2}})
        for i in ("x", "y")
    ]
    assert labelled_from_eval(records, outputs) == [LabelledScores("x", True, {"a": DetectorScore(0.7, "ok", 2, "")})]


def builtin_path() -> Path:
    return Path(str(resources.files("detectors.data").joinpath("thresholds.yaml")))


def test_written_file_loads_and_validates(tmp_path: Path):
    calibration = calibrate(
        TINY, CURRENT, TWO_DETECTORS, target_precision=0.8, min_positives=2, min_flagged=1, holdout=0.0
    )
    path = tmp_path / "out" / "thresholds.yaml"
    version = write_thresholds(calibration, path, models={"embeddings": "all-MiniLM-L6-v2 int8"}, now=NOW)
    assert version == f"cal-20261123T101500Z-{calibration.dataset_sha256[:8]}"
    loaded = load_thresholds(path)
    assert (loaded.version, loaded.own) == (version, {"a": 0.2, "b": 0.7, "sentinel": 0.3, "unseen": 0.4})
    document = yaml.safe_load(path.read_text())
    jsonschema.validate(document, load_thresholds_schema())
    assert document["created"] == "2026-11-23T10:15:00Z"
    assert document["detectors"]["b"] == {
        "threshold": 0.7,
        "previous_threshold": 0.5,
        "precision": 1.0,
        "recall": 0.6667,
        "f1": 0.8,
        "positives": 3,
        "chosen_by": "target_precision",
        "detector_version": "1",
    }
    assert document["agreement"] == {"rules": ["two"], "precision": 1.0, "recall": 0.5}
    assert document["models"] == {"embeddings": "all-MiniLM-L6-v2 int8"}
    assert document["target_precision"] == 0.8 and "cost_ratio" not in document


def test_builtin_thresholds_validate_and_schema_is_strict():
    schema = load_thresholds_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(yaml.safe_load(builtin_path().read_text()), schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"version": "x", "detectors": {"a": {"threshold": 1.5}}}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"detectors": {}}, schema)


def test_diff_thresholds(tmp_path: Path):
    old = tmp_path / "old.yaml"
    old.write_text(
        yaml.safe_dump(
            {
                "version": "v1",
                "detectors": {"a": {"threshold": 0.5}, "gone": {"threshold": 0.4}, "same": {"threshold": 0.3}},
            }
        )
    )
    new = tmp_path / "new.yaml"
    new.write_text(
        yaml.safe_dump(
            {
                "version": "v2",
                "dataset_sha256": "ab" * 32,
                "dataset_size": 100,
                "positives": 40,
                "detectors": {
                    "a": {
                        "threshold": 0.25,
                        "precision": 0.7,
                        "recall": 0.4,
                        "heldout_precision": 0.65,
                        "heldout_recall": 0.38,
                        "chosen_by": "target_precision",
                    },
                    "added": {"threshold": 0.6},
                    "same": {"threshold": 0.3, "chosen_by": "kept: no ok scores among the fitting records"},
                },
                "agreement": {"precision": 0.8, "recall": 0.2},
            }
        )
    )
    assert diff_thresholds(old, new).splitlines() == [
        "version: v1 -> v2",
        "dataset: none -> 100 records, 40 positives, sha256 abababababab",
        "detectors:",
        "    a      0.5 -> 0.25  (P 0.70 R 0.40; held-out P 0.65 R 0.38; target_precision)",
        "  + added  0.6 (added)",
        "  - gone   0.4 (removed)",
        "    same   0.3 (unchanged)  (kept: no ok scores among the fitting records)",
        "agreement: - -> P 0.80 R 0.20",
    ]


def test_diff_against_builtin(tmp_path: Path):
    calibration = calibrate(TINY, load_thresholds(), TWO_DETECTORS, min_positives=2, min_flagged=1, holdout=0.0)
    path = tmp_path / "t.yaml"
    version = write_thresholds(calibration, path, now=NOW)
    text = diff_thresholds(builtin_path(), path)
    builtin = load_thresholds().version
    assert text.startswith(f"version: {builtin} -> {version}\ndataset: none -> 6 records, 4 positives")
    assert "sentinel" in text and "kept: not a hallucination detector" in text


def test_plots_are_pngs(tmp_path: Path):
    calibration = calibrate(
        TINY, CURRENT, TWO_DETECTORS, target_precision=0.8, min_positives=2, min_flagged=1, holdout=0.0
    )
    paths = write_plots(calibration, tmp_path / "plots")
    assert sorted(p.name for p in paths) == ["pr_a.png", "pr_agreement.png", "pr_b.png", "score_histograms.png"]
    for path in paths:
        data = path.read_bytes()
        assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 1000
