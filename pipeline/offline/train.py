"""``halluwatch train``: the unsupported-spans detector's word and call models, from labelled data.

Reproducible by construction: fixed seeds, records split by source document (a hash of the
context, so no document sits on both sides), data files named with their SHA-256, and the
held-out metrics written next to the coefficients.  Only sets whose licence allows shipping
what is learned from them are trained on (:data:`TRAINING_SETS`); FaithBench (CC BY-NC-SA)
and the sets without context are for evaluation only.

* The **word models** learn from RAGTruth's span labels: a word is hallucinated when a gold
  span covers it.  One per kind of support (prose; JSON records), each with the span
  threshold that gives the best character-overlap span F1 on its training records.
* The **call model** learns from the response labels of every training set, each set given
  the same total weight so no one set's style dominates.  SummEdits is left out: its edited
  summaries reuse the source's words, so word support says nothing about them (contradiction
  is the detector that catches those).

Fitting is L2-regularised logistic regression by Newton's method in numpy: deterministic,
seconds on a laptop, no scikit-learn at run time or here.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from detectors.base import VERDICT_DETECTORS
from detectors.config import DEFAULT_PROFILE, Profile
from detectors.models.learned import BinnedLogistic, Matrix, ScaledLogistic, binned_design
from detectors.support_features import (
    CALL_FEATURES,
    SUPPORT_KINDS,
    WORD_FEATURES,
    SupportKind,
    call_features,
    flagged_runs,
)
from detectors.unsupported_spans import DETECTOR as UNSUPPORTED_SPANS
from detectors.unsupported_spans.detector import SupportModel, UnsupportedSpansDetector
from detectors.verdict import VERDICT_FEATURES, VerdictModel
from pipeline.calibration.alert_probability import RouteMinimum, RouteTargets
from pipeline.calibration.fitting import fit_logistic, fit_scaled
from pipeline.config.settings import Settings
from pipeline.offline.crossfit import (
    CALIBRATION_SET,
    FOLD_SEED,
    FOLDS,
    SPARE_FOLDS,
    VerdictRow,
    fit_verdict,
    fold_of,
    out_of_fold,
    quality,
    scored,
)
from pipeline.offline.eval_metrics import auroc, span_overlap
from pipeline.offline.evaluate import EvalOutput, EvalRecord, hallucination_flags, read_records, record_to_call

logger = logging.getLogger(__name__)

# Sets whose licence allows shipping weights learned from them (each folder's README).  SummEdits
# (Apache-2.0) would be allowed, but word support does not separate its edited summaries (held-out
# AUROC 0.46): training on it only bends the weights that work elsewhere.
TRAINING_SETS = ("ragtruth", "begin", "faithdial_audit", "wice")
SPAN_SETS = frozenset({"ragtruth"})  # sets whose span labels the word model learns from
# The verdict model weighs every detector; on SummEdits contradiction is the one that knows.
VERDICT_SETS = (*TRAINING_SETS, "summedits")
HELD_OUT_SHARE = 0.3
SEED = "halluwatch-train-1"
_QUANTILES = np.linspace(0.1, 0.9, 9)  # inner bin edges of each continuous word feature
_WORD_L2 = 1.0
_CALL_L2 = 1.0
_SPAN_THRESHOLDS = np.round(np.arange(0.02, 0.6, 0.01), 3)


class TrainingDataError(ValueError):
    """The labelled data cannot train a model; the message says what is missing."""


@dataclass(frozen=True, slots=True)
class RecordFeatures:
    """One record's word features, what the words are labelled, and its side of the split."""

    dataset: str
    record: EvalRecord
    features: Matrix
    word_labels: np.ndarray[Any, np.dtype[np.bool_]]
    support_tokens: int
    held_out: bool
    word_spans: tuple[tuple[int, int], ...]
    kind: SupportKind = "prose"


@dataclass
class TrainingReport:
    """What ``train`` did, for the file and the terminal."""

    model: SupportModel
    metrics: dict[str, Any] = field(default_factory=dict)
    data: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The model file: the models, then how they were made."""
        training = {"seed": SEED, "held_out_share": HELD_OUT_SHARE, "data": self.data, "metrics": self.metrics}
        return {**self.model.to_dict(), "training": training}


def held_out(record: EvalRecord) -> bool:
    """Whether the record's source document is on the held-out side (the same for every run)."""
    digest = hashlib.sha256((SEED + "\x00" + "\x00".join(record.context)).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < HELD_OUT_SHARE


def data_files(data_dir: Path, sets: Sequence[str]) -> dict[str, Path]:
    """Each set's JSONL file under ``data_dir/<set>/``; a FileNotFoundError names a missing one."""
    files = {}
    for name in sets:
        found = sorted((data_dir / name).glob("*.jsonl"))
        if not found:
            raise FileNotFoundError(f"no {name} data under {data_dir / name}")
        files[name] = found[0]
    return files


Progress = Callable[[Iterator[tuple[str, EvalRecord]], int], Iterable[tuple[str, EvalRecord]]]


def extract(
    detector: UnsupportedSpansDetector,
    files: dict[str, Path],
    limit: int | None = None,
    progress: Progress = lambda records, _total: records,
) -> list[RecordFeatures]:
    """Word features of every labelled record with context and an answer (the first ``limit`` of each set)."""
    usable = labelled_records(files, limit)
    out = []
    for name, record in progress(iter(usable), len(usable)):
        support = detector.support(record_to_call(record))
        if support is None or not len(support.words):
            continue
        labels = np.array([any(s < w.end and e > w.start for s, e in record.spans) for w in support.words])
        out.append(RecordFeatures(name, record, support.features, labels, support.support_tokens, held_out(record),
                                  tuple((w.start, w.end) for w in support.words), support.kind))  # fmt: skip
    return out


def train_word_model(rows: Sequence[RecordFeatures]) -> BinnedLogistic:
    """The word model over the training side of the span sets."""
    x = np.vstack([r.features for r in rows])
    y = np.concatenate([r.word_labels for r in rows]).astype(float)
    edges: list[tuple[float, ...] | None] = []
    for j in range(x.shape[1]):
        values = np.unique(x[:, j])
        edges.append(None if len(values) <= 2 else tuple(float(v) for v in np.unique(np.quantile(x[:, j], _QUANTILES))))
    coef, intercept = fit_logistic(binned_design(x, edges), y, np.ones(len(y)), _WORD_L2)
    return BinnedLogistic(WORD_FEATURES, tuple(edges), tuple(float(c) for c in coef), intercept)


WordModels = Mapping[SupportKind, BinnedLogistic]


def word_probabilities(row: RecordFeatures, word_models: WordModels) -> Matrix:
    """The row's word probabilities by the word model for its kind of support."""
    return word_models[row.kind].predict(row.features)


def call_rows(rows: Sequence[RecordFeatures], word_models: WordModels) -> Matrix:
    """The call model's input rows for ``rows``."""
    return np.vstack([call_features(r.features, r.support_tokens, word_probabilities(r, word_models)) for r in rows])


def train_call_model(rows: Sequence[RecordFeatures], word_models: WordModels) -> ScaledLogistic:
    """The call model over the training side of every set."""
    y = np.array([float(bool(r.record.hallucinated)) for r in rows])
    return fit_scaled(call_rows(rows, word_models), y, [r.dataset for r in rows], CALL_FEATURES, _CALL_L2)


def predicted_spans(row: RecordFeatures, probabilities: Matrix, threshold: float) -> list[tuple[int, int]]:
    """Character spans of the flagged runs, as the detector makes them."""
    content = row.features[:, WORD_FEATURES.index("stop")] == 0
    runs = flagged_runs(probabilities >= threshold, content)
    return [(row.word_spans[run[0]][0], row.word_spans[run[-1]][1]) for run in runs]


def span_f1(rows: Sequence[RecordFeatures], model: SupportModel) -> float:
    """Character-overlap span F1 over the records that have gold spans.

    Within hallucinated answers only: spans reach users (and eval) only for calls flagged as a
    whole, and that call-level gate, not the word threshold, keeps clean answers unmarked.
    Chosen this way, the thresholds also give the best span F1 over every record, clean ones
    included, once eval's gate applies (RAGTruth training documents).  `bench/QUALITY.md`
    reports that whole-set figure (LettuceDetect's definition).
    """
    with_spans = [r for r in rows if r.record.spans]
    predicted = [
        predicted_spans(r, word_probabilities(r, model.word_models), model.span_thresholds[r.kind]) for r in with_spans
    ]
    return span_overlap(predicted, [r.record.spans for r in with_spans]).f1


def train(rows: Sequence[RecordFeatures], data: dict[str, Any], profile: Profile = DEFAULT_PROFILE) -> TrainingReport:
    """Fit the word models, then the call model, on the training side; measure them on both sides.

    ``profile``: the embedding profile whose features ``rows`` hold, part of the model's version.
    """
    train_rows = [r for r in rows if not r.held_out]
    word_models: dict[SupportKind, BinnedLogistic] = {}
    thresholds: dict[SupportKind, float] = {}
    for kind in SUPPORT_KINDS:
        span_rows = [r for r in train_rows if r.dataset in SPAN_SETS and r.kind == kind]
        if not span_rows:
            raise TrainingDataError(f"no span-labelled training records with {kind} support")
        word_models[kind] = train_word_model(span_rows)
        thresholds[kind] = _best_span_threshold(span_rows, word_models[kind])
    # Named after what made it (data and features), so a rebuild from the same data is the same file.
    # Another profile's features make another model (the default's keeps the versions it had before profiles).
    encoder = [] if profile == DEFAULT_PROFILE else [profile]
    recipe = json.dumps([data, WORD_FEATURES, CALL_FEATURES, SUPPORT_KINDS, SEED, *encoder], sort_keys=True).encode()
    version = f"2-{hashlib.sha256(recipe).hexdigest()[:12]}"
    model = SupportModel(version, word_models, train_call_model(train_rows, word_models), thresholds)
    return TrainingReport(model, measure(rows, model), data)


def _best_span_threshold(rows: Sequence[RecordFeatures], word_model: BinnedLogistic) -> float:
    with_spans = [r for r in rows if r.record.spans]
    probabilities = [word_model.predict(r.features) for r in with_spans]
    gold = [r.record.spans for r in with_spans]

    def f1(threshold: float) -> float:
        predicted = [predicted_spans(r, p, threshold) for r, p in zip(with_spans, probabilities, strict=True)]
        return span_overlap(predicted, gold).f1

    return float(max(_SPAN_THRESHOLDS, key=lambda t: f1(float(t))))


def measure(rows: Sequence[RecordFeatures], model: SupportModel) -> dict[str, Any]:
    """AUROC of the call model per set and side; word AUROC and span F1 on the span sets (also per kind)."""
    metrics: dict[str, Any] = {}
    for name in sorted({r.dataset for r in rows}):
        for side, is_held_out in (("train", False), ("held_out", True)):
            part = [r for r in rows if r.dataset == name and r.held_out == is_held_out]
            if not part:
                continue
            scores = model.call_model.predict(call_rows(part, model.word_models))
            actual = [bool(r.record.hallucinated) for r in part]
            entry: dict[str, Any] = {"records": len(part), "auroc": _rounded(auroc(list(scores), actual))}
            if name in SPAN_SETS:
                words = np.concatenate([r.word_labels for r in part])
                probabilities = np.concatenate([word_probabilities(r, model.word_models) for r in part])
                entry["word_auroc"] = _rounded(auroc(list(probabilities), list(words)))
                entry["span_f1"] = round(span_f1(part, model), 4)
                for kind in SUPPORT_KINDS:
                    entry[f"span_f1_{kind}"] = round(span_f1([r for r in part if r.kind == kind], model), 4)
            metrics.setdefault(name, {})[side] = entry
    return metrics


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def file_sha256(path: Path) -> str:
    """The file's SHA-256, hex."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def describe_data(files: dict[str, Path], rows: Sequence[RecordFeatures]) -> dict[str, Any]:
    """Each training file's name, SHA-256 and split sizes, for the model file."""
    described = {}
    for name, path in files.items():
        part = [r for r in rows if r.dataset == name]
        described[name] = {
            "file": path.name,
            "sha256": file_sha256(path),
            "train": sum(1 for r in part if not r.held_out),
            "held_out": sum(1 for r in part if r.held_out),
        }
    return described


def with_support_model(settings: Settings, path: Path) -> Settings:
    """``settings`` whose unsupported_spans detector reads the model file at ``path``."""
    detectors = settings.detectors
    support = UNSUPPORTED_SPANS.config_in(detectors).model_copy(update={"model_path": path})
    return settings.model_copy(update={"detectors": detectors.model_copy(update={"unsupported_spans": support})})


def labelled_records(files: dict[str, Path], limit: int | None = None) -> list[tuple[str, EvalRecord]]:
    """Each set's labelled records with context and an answer (the first ``limit`` of each set)."""
    records = [(name, r) for name, path in files.items() for r in itertools.islice(read_records(path), limit)]
    return [(name, r) for name, r in records if r.context and r.answer.strip() and r.hallucinated is not None]


@dataclass(frozen=True, slots=True)
class VerdictTraining:
    """The trained, calibrated verdict, its route minimums, and what it does on each set in and out of fold."""

    verdict: VerdictModel
    minimums: tuple[RouteMinimum, ...]
    metrics: dict[str, Any]


def verdict_rows(records: Sequence[tuple[str, EvalRecord]], outputs: Sequence[EvalOutput]) -> list[VerdictRow]:
    """What the verdict fit needs of each scored record, with its document fold."""
    return [
        VerdictRow(name, tuple(output.verdict_features), bool(record.hallucinated), hallucination_flags(output),
                   fold_of(record.context))
        for (name, record), output in zip(records, outputs, strict=True)
    ]  # fmt: skip


def train_verdict(
    records: Sequence[tuple[str, EvalRecord]],
    outputs: Sequence[EvalOutput],
    thresholds: Mapping[str, float],
    routing: RouteTargets,
) -> VerdictTraining:
    """Fit the verdict over every detector, its calibration and the route minimums, cross-fitted by document.

    ``outputs`` are ``halluwatch eval``'s for ``records`` without a verdict model (their
    ``verdict_features``); ``thresholds`` are the detector thresholds the features were made
    relative to, which the model keeps.  The metrics give each set out of fold (every record
    scored by the recipe fitted without its document) and in sample (by the shipped model).
    """
    rows = verdict_rows(records, outputs)
    try:
        fit = fit_verdict(rows, routing)
    except ValueError as exc:
        raise TrainingDataError(str(exc)) from exc
    x = np.array([row.features for row in rows])
    names = sorted({row.group for row in rows})
    recipe = json.dumps(
        [names, VERDICT_FEATURES, FOLD_SEED, FOLDS, SPARE_FOLDS, dict(thresholds)], sort_keys=True
    ).encode()
    verdict = VerdictModel(
        f"3-{hashlib.sha256(recipe + x.tobytes()).hexdigest()[:12]}", fit.model, fit.calibration,
        {name: thresholds[name] for name in VERDICT_DETECTORS if name in thresholds},
    )  # fmt: skip
    sides = {"out_of_fold": out_of_fold(rows, routing), "in_sample": scored(fit, rows, routing)}
    metrics: dict[str, Any] = {}
    for name in names:
        part = [i for i, row in enumerate(rows) if row.group == name]
        labels = [rows[i].hallucinated for i in part]
        for side, results in sides.items():
            metrics.setdefault(name, {})[side] = quality([results[i] for i in part], labels).to_dict()
    return VerdictTraining(verdict, fit.minimums, metrics)


def verdict_file(training: VerdictTraining, data: dict[str, Any]) -> dict[str, Any]:
    """The verdict model file: the model, its calibration, the route minimums it implies, then how it was made."""
    verdict = training.verdict
    return {
        "version": verdict.version,
        "model": verdict.model.to_dict(),
        "thresholds": dict(verdict.thresholds),
        "calibration": {
            "map": verdict.calibration.to_dict(),
            "fitted_on": f"{CALIBRATION_SET}, scores cross-fitted over {FOLDS} document folds",
        },
        "alert_probability": alert_probability(training.minimums),
        "training": {"fold_seed": FOLD_SEED, "folds": FOLDS, "spare_folds": SPARE_FOLDS, "data": data,
                     "metrics": training.metrics},
    }  # fmt: skip


def alert_probability(minimums: Sequence[RouteMinimum]) -> dict[str, Any]:
    """The ``alert_probability`` section of a thresholds file for ``minimums``."""
    return {m.route: m.to_dict() for m in minimums}
