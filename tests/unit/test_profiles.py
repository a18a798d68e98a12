"""Embedding profiles: the setting picks the encoder and its own learned files; files of another profile are refused."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import yaml
from click.testing import CliRunner

from detectors.config import DEFAULT_EMBEDDING_MODEL, FAST_EMBEDDING_MODEL, EmbeddingConfig
from detectors.models.embeddings import Embedder
from detectors.profiles import ProfileMismatch
from detectors.thresholds import load_thresholds
from detectors.unsupported_spans.detector import load_support_model
from detectors.verdict import load_verdict_model
from pipeline.cli import main
from pipeline.config.settings import load_settings

DATA = Path(__file__).resolve().parents[2] / "detectors" / "data"


def test_the_profile_picks_the_model_unless_one_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    assert EmbeddingConfig().model == DEFAULT_EMBEDDING_MODEL
    assert EmbeddingConfig(profile="fast").model == FAST_EMBEDDING_MODEL
    assert EmbeddingConfig(profile="fast", model="/models/mine").model == "/models/mine"
    switched = EmbeddingConfig(threads=2).for_profile("fast")
    assert (switched.model, switched.threads) == (FAST_EMBEDDING_MODEL, 2)
    assert EmbeddingConfig(model="/models/mine").for_profile("fast").model == "/models/mine"
    monkeypatch.setenv("HALLUWATCH_DETECTORS__EMBEDDINGS__PROFILE", "fast")
    assert load_settings().detectors.embeddings.model == FAST_EMBEDDING_MODEL


def test_the_fast_model_comes_from_its_package_and_embeds_meaning(model_cache_dir: Path) -> None:
    embedder = Embedder(EmbeddingConfig(profile="fast", cache_dir=model_cache_dir))
    same, other = (
        embedder.encode(["A man is playing a guitar.", "Someone plays the guitar.", "Stocks fell sharply."])[[1, 2]]
        @ embedder.encode(["A man is playing a guitar."])[0]
    )
    assert embedder.dimension == 384
    assert same > 0.6 > 0.3 > other
    accurate = Embedder(EmbeddingConfig(cache_dir=model_cache_dir)).encode(["A man is playing a guitar."])
    assert not np.allclose(accurate, embedder.encode(["A man is playing a guitar."]), atol=0.05)  # another model


def test_each_profile_has_its_own_built_in_files() -> None:
    fast_support, fast_verdict = load_support_model(None, "fast"), load_verdict_model(None, "fast")
    assert fast_support.version != load_support_model(None, "accurate").version
    assert fast_verdict.version != load_verdict_model(None, "accurate").version
    assert load_thresholds(None, "fast").for_detector("grounding") != load_thresholds().for_detector("grounding")
    for name in ("unsupported_spans.json", "verdict.json"):
        assert json.loads((DATA / "fast" / name).read_text())["profile"] == "fast"


def test_files_of_another_profile_are_refused(tmp_path: Path) -> None:
    with pytest.raises(
        ProfileMismatch, match=re.escape("trained for detectors.embeddings.profile 'accurate', not 'fast'")
    ):
        load_verdict_model(DATA / "verdict.json", "fast")  # written before profiles: accurate's
    with pytest.raises(ProfileMismatch, match="'fast', not 'accurate'"):
        load_support_model(DATA / "fast" / "unsupported_spans.json", "accurate")
    thresholds = tmp_path / "thresholds.yaml"
    thresholds.write_text(yaml.safe_dump({"version": "t", "detectors": {}, "models": {"profile": "fast"}}))
    assert load_thresholds(thresholds, "fast").version == "t"
    with pytest.raises(ProfileMismatch, match=re.escape(str(thresholds))):
        load_thresholds(thresholds, "accurate")


def test_a_worker_refuses_to_start_with_a_verdict_model_of_another_profile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HALLUWATCH_DETECTORS__EMBEDDINGS__PROFILE", "fast")
    monkeypatch.setenv("HALLUWATCH_DETECTORS__VERDICT_MODEL", str(DATA / "verdict.json"))
    result = CliRunner().invoke(main, ["worker"])
    assert result.exit_code == 1
    assert "verdict.json was trained for detectors.embeddings.profile 'accurate', not 'fast'" in result.output
    assert not (tmp_path / ".halluwatch" / "clickhouse").exists()  # refused before reaching ClickHouse
