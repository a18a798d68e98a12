"""Training the fact-check sentinel: the prompt set, determinism, held-out accuracy, the shipped weights."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from detectors.sentinel.detector import LABELS, SentinelModel, SentinelModelError
from pipeline.offline.sentinel_training import read_prompts, train_sentinel

PROMPTS = Path(__file__).parents[2] / "detectors" / "data" / "sentinel_prompts.jsonl"

# Held-out floors.  Over eight stratified 80/20 splits of the shipped prompt set the
# 5-class accuracy ranged 0.889-0.941 (mean 0.91) and factual-vs-rest was about 0.93;
# with 135 held-out prompts one split's standard error is about 0.025, so the floors
# sit three to four standard errors under the mean: a failure means the model or the
# features regressed, not an unlucky split.
ACCURACY_FLOOR = 0.80
FACTUAL_ACCURACY_FLOOR = 0.85


def test_prompt_set_is_large_varied_and_labelled() -> None:
    examples = read_prompts(PROMPTS)
    labels = [label for _, label in examples]
    assert len(examples) >= 400
    assert all(labels.count(label) >= 80 for label in LABELS)
    assert len({text for text, _ in examples}) == len(examples)


def test_training_is_deterministic(tmp_path: Path) -> None:
    subset = tmp_path / "subset.jsonl"
    subset.write_text("".join(PROMPTS.read_text(encoding="utf-8").splitlines(keepends=True)[::3]), encoding="utf-8")
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    assert train_sentinel(subset, first, 0.25, seed=7) == train_sentinel(subset, second, 0.25, seed=7)
    assert first.read_bytes() == second.read_bytes()


def test_shipped_model_is_the_one_the_prompt_set_trains(tmp_path: Path) -> None:
    report = train_sentinel(PROMPTS, tmp_path / "model.json", holdout_fraction=0.2, seed=0)
    assert report.accuracy >= ACCURACY_FLOOR
    assert report.factual_accuracy >= FACTUAL_ACCURACY_FLOOR
    assert set(report.recall) == set(LABELS) and min(report.recall.values()) >= 0.6
    assert report.n_holdout >= 100
    assert SentinelModel.load().training == json.loads((tmp_path / "model.json").read_text())["training"]


def test_bad_prompt_file_names_the_line(tmp_path: Path) -> None:
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"text": "hi", "label": "smalltalk"}\n')
    with pytest.raises(SentinelModelError, match=f"{prompts}:1"):
        read_prompts(prompts)
