"""Training of the fact-check sentinel (:mod:`detectors.sentinel`) on labelled prompts.

The shipped weights (``detectors/data/sentinel_model.json``) are what
``train_sentinel(Path("detectors/data/sentinel_prompts.jsonl"), out, holdout_fraction=0.2, seed=0)``
writes; retraining on your own prompts is the same call on a file of ``{"text", "label"}``
lines.  The model is multinomial logistic regression over the sentinel's hashed features,
fitted with numpy: full-batch gradient descent with Nesterov momentum on the mean
class-balanced cross-entropy.  Kept out of :mod:`detectors`, which only loads and runs
the weights.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from detectors.sentinel.detector import (
    FACTUAL,
    LABELS,
    N_FEATURES,
    Features,
    Featurizer,
    FloatArray,
    SentinelModel,
    SentinelModelError,
    softmax,
)

_L2 = 1e-4
_LEARNING_RATE = 2.0
_MOMENTUM = 0.9
_EPOCHS = 200


@dataclass(frozen=True, slots=True)
class TrainingReport:
    """How a trained model did on prompts it was not trained on."""

    dataset_sha256: str
    seed: int
    holdout_fraction: float
    n_train: int
    n_holdout: int
    accuracy: float
    factual_accuracy: float  # the decision that matters: factual vs anything else
    recall: dict[str, float]

    def __str__(self) -> str:
        recall = ", ".join(f"{label} {value:.3f}" for label, value in self.recall.items())
        return (
            f"trained on {self.n_train} prompts, held out {self.n_holdout}: accuracy {self.accuracy:.3f}, "
            f"factual-vs-rest accuracy {self.factual_accuracy:.3f}; recall: {recall}"
        )


def read_prompts(path: Path) -> list[tuple[str, str]]:
    """``(text, label)`` pairs of a JSONL prompt file; a bad line raises naming file and line."""
    examples = []
    with open(path, encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                text, label = record["text"], record["label"]
                if not isinstance(text, str) or not text.strip() or label not in LABELS:
                    raise ValueError(f"need a non-empty 'text' and a 'label' in {LABELS}")
            except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
                raise SentinelModelError(f"{path}:{number}: not a labelled prompt: {exc}") from exc
            examples.append((text, label))
    return examples


def train_sentinel(prompts_path: Path, out_path: Path, holdout_fraction: float = 0.2, seed: int = 0) -> TrainingReport:
    """Train on a stratified split of ``prompts_path``, evaluate on the rest, write the weights.

    Deterministic for a given file and seed.  The written model is the one evaluated
    (trained without the held-out prompts), so the recorded accuracy describes it.
    """
    if not 0.0 < holdout_fraction < 1.0:
        raise ValueError(f"holdout_fraction must be in (0, 1), got {holdout_fraction!r}")
    examples = read_prompts(prompts_path)
    featurize = Featurizer()
    targets = np.array([LABELS.index(label) for _, label in examples])
    train, holdout = _stratified_split(targets, holdout_fraction, seed)
    weights, bias = _fit([featurize(examples[i][0]) for i in train], targets[train])
    untrained = SentinelModel(LABELS, weights, bias, {}, featurize)
    predicted = np.argmax(untrained.probabilities([examples[i][0] for i in holdout]), axis=1)
    actual = targets[holdout]
    factual = LABELS.index(FACTUAL)
    report = TrainingReport(
        dataset_sha256=hashlib.sha256(prompts_path.read_bytes()).hexdigest(),
        seed=seed,
        holdout_fraction=holdout_fraction,
        n_train=len(train),
        n_holdout=len(holdout),
        accuracy=round(float(np.mean(predicted == actual)), 4),
        factual_accuracy=round(float(np.mean((predicted == factual) == (actual == factual))), 4),
        recall={
            label: round(float(np.mean(predicted[actual == k] == k)), 4)
            for k, label in enumerate(LABELS)
            if np.any(actual == k)
        },
    )
    model = SentinelModel(LABELS, weights, bias, asdict(report))
    out_path.write_text(json.dumps(model.to_json(), separators=(",", ":")) + "\n", encoding="utf-8")
    return report


def _stratified_split(
    targets: npt.NDArray[np.int64], holdout_fraction: float, seed: int
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Train and holdout indices with every class held out in proportion (at least one each)."""
    rng = np.random.default_rng(seed)
    train: list[int] = []
    holdout: list[int] = []
    for label in range(len(LABELS)):
        members = rng.permutation(np.flatnonzero(targets == label))
        cut = max(1, round(len(members) * holdout_fraction)) if len(members) > 1 else 0
        holdout += members[:cut].tolist()
        train += members[cut:].tolist()
    return np.array(sorted(train), dtype=np.int64), np.array(sorted(holdout), dtype=np.int64)


def _fit(rows: Sequence[Features], targets: npt.NDArray[np.int64]) -> tuple[FloatArray, FloatArray]:
    """Class-balanced, L2-regularized softmax regression; returns dense weights and the bias.

    Products with the design matrix are done sparsely (a gather and a bincount per label),
    over the buckets the training set uses only: a few hundred thousand non-zeros instead
    of a dense prompts x 2**18 matrix.
    """
    used, columns = np.unique(np.concatenate([row.indices for row in rows]), return_inverse=True)
    values = np.concatenate([row.values for row in rows])
    row_of = np.repeat(np.arange(len(rows)), [len(row.indices) for row in rows])
    n_labels = len(LABELS)
    onehot = np.eye(n_labels)[targets]
    counts = np.bincount(targets, minlength=n_labels).astype(np.float64)
    sample_weight = (len(targets) / (n_labels * np.maximum(counts, 1.0)))[targets] / len(targets)
    weights, bias = np.zeros((len(used), n_labels)), np.zeros(n_labels)
    weights_velocity, bias_velocity = np.zeros_like(weights), np.zeros_like(bias)
    for _ in range(_EPOCHS):
        weights_ahead = weights + _MOMENTUM * weights_velocity
        bias_ahead = bias + _MOMENTUM * bias_velocity
        products = values[:, None] * weights_ahead[columns]
        logits = np.stack([np.bincount(row_of, products[:, j], len(rows)) for j in range(n_labels)], axis=1)
        error = (softmax(logits + bias_ahead) - onehot) * sample_weight[:, None]
        contributions = values[:, None] * error[row_of]
        gradient = np.stack([np.bincount(columns, contributions[:, j], len(used)) for j in range(n_labels)], axis=1)
        weights_velocity = _MOMENTUM * weights_velocity - _LEARNING_RATE * (gradient + _L2 * weights_ahead)
        bias_velocity = _MOMENTUM * bias_velocity - _LEARNING_RATE * error.sum(axis=0)
        weights += weights_velocity
        bias += bias_velocity
    dense = np.zeros((N_FEATURES, n_labels))
    dense[used] = weights
    return dense, bias
