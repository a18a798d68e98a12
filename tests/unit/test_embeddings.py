"""The ONNX embedding runtime against sentence-transformers, on the real bundled MiniLM.

The model is made ready once per session and precision into the session's temp folder
(int8 converted from its package, fp32 exported with torch);
both this file and test_grounding.py use that folder, so the export is not repeated.
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import numpy as np
import pytest

from detectors.config import EmbeddingConfig
from detectors.models.embeddings import Embedder, EmbeddingError, resolve_model_dir

SENTENCES = [
    "The Eiffel Tower was built between 1887 and 1889.",
    "It is 330 metres tall, about the same height as an 81-storey building.",
    "Paris is the capital of France.",
    "Bananas are an excellent source of potassium.",
    "北京是中国的首都。",
    "ok",
    "A much longer sentence that goes on and on about the history of the tower, its engineers, "
    "the critics who opposed it, the World's Fair of 1889, and the millions who visit it every year.",
]


def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.getbasetemp() / "models"


@pytest.fixture(scope="session")
def fp32(tmp_path_factory: pytest.TempPathFactory) -> Embedder:
    embedder = Embedder(EmbeddingConfig(precision="fp32", cache_dir=cache_dir(tmp_path_factory)))
    embedder.load()
    return embedder


@pytest.fixture(scope="session")
def int8(tmp_path_factory: pytest.TempPathFactory) -> Embedder:
    embedder = Embedder(EmbeddingConfig(precision="int8", cache_dir=cache_dir(tmp_path_factory)))
    embedder.load()
    return embedder


def test_fp32_matches_sentence_transformers(fp32: Embedder) -> None:
    import sentence_transformers
    import torch

    torch.set_num_threads(1)
    reference = sentence_transformers.SentenceTransformer(str(resolve_model_dir(fp32.config.model)), device="cpu")
    expected = reference.encode(SENTENCES, normalize_embeddings=True)
    cosines = (fp32.encode(SENTENCES) * expected).sum(axis=1)
    assert cosines.min() > 0.999


def test_int8_agrees_with_fp32(fp32: Embedder, int8: Embedder) -> None:
    cosines = (fp32.encode(SENTENCES) * int8.encode(SENTENCES)).sum(axis=1)
    assert cosines.mean() > 0.98


@pytest.mark.parametrize("precision", ["fp32", "int8"])
def test_batches_keep_input_order(precision: str, request: pytest.FixtureRequest) -> None:
    embedder: Embedder = request.getfixturevalue(precision)
    vectors = embedder.encode(SENTENCES)
    assert vectors.dtype == np.float32 and vectors.shape == (len(SENTENCES), embedder.dimension)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    one_by_one = np.stack([embedder.encode([s])[0] for s in SENTENCES])
    assert list((vectors @ one_by_one.T).argmax(axis=1)) == list(range(len(SENTENCES)))
    # Dynamic int8 quantizes activations per batch, so batch-mates shift a vector slightly; most for
    # "ok", three tokens alone (0.935 with the default int8 model, 0.962 with the torch export's).
    assert (vectors * one_by_one).sum(axis=1).min() > (0.9999 if precision == "fp32" else 0.93)


def test_cache_skips_known_texts_and_evicts_least_recent(tmp_path_factory: pytest.TempPathFactory) -> None:
    embedder = Embedder(EmbeddingConfig(cache_dir=cache_dir(tmp_path_factory), window_cache_size=3))
    first = embedder.encode(SENTENCES[:3], cache=True)
    assert embedder.texts_encoded == 3
    np.testing.assert_array_equal(embedder.encode(SENTENCES[:3], cache=True), first)
    assert embedder.texts_encoded == 3
    embedder.encode(SENTENCES[:3])  # cache=False always runs the model
    assert embedder.texts_encoded == 6
    embedder.encode([SENTENCES[3]], cache=True)  # evicts SENTENCES[0]
    embedder.encode(SENTENCES[1:4], cache=True)
    assert embedder.texts_encoded == 7
    embedder.encode([SENTENCES[0]], cache=True)
    assert embedder.texts_encoded == 8


def test_duplicates_and_empty_input(int8: Embedder) -> None:
    before = int8.texts_encoded
    vectors = int8.encode([SENTENCES[0], SENTENCES[0], ""])
    assert int8.texts_encoded - before == 2
    np.testing.assert_array_equal(vectors[0], vectors[1])
    assert int8.encode([]).shape == (0, int8.dimension)


def test_export_leaves_only_finished_files(int8: Embedder, fp32: Embedder) -> None:
    folders = [sorted(p.name for p in f.iterdir()) for f in int8.config.cache_dir.iterdir() if f.is_dir()]
    # The default model: converted from its package at int8 (the tokenizer is packaged), exported at fp32.
    assert ["model.fp32.onnx", "tokenizer.json"] in folders and ["model.int8.onnx"] in folders
    # Every model the session's tests loaded (the fast profile's too): finished files only, no temporaries.
    assert all(set(folder) <= {"model.fp32.onnx", "model.int8.onnx", "tokenizer.json"} for folder in folders)


def test_unsupported_pooling_is_named(tmp_path: Path) -> None:
    (tmp_path / "1_Pooling").mkdir()
    (tmp_path / "modules.json").write_text(
        json.dumps(
            [
                {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
                {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
            ]
        )
    )
    (tmp_path / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode_lasttoken": True}))
    with pytest.raises(EmbeddingError, match="unsupported pooling"):
        Embedder(EmbeddingConfig(model=str(tmp_path), cache_dir=tmp_path / "cache")).load()


def test_unknown_model_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(EmbeddingError, match="no-such/model"):
        Embedder(EmbeddingConfig(model="no-such/model", cache_dir=tmp_path)).load()


def test_token_embeddings_match_the_pooled_sentence_and_cover_long_texts(tmp_path_factory) -> None:
    embedder = Embedder(EmbeddingConfig(precision="fp32", cache_dir=cache_dir(tmp_path_factory), max_length=32,
                                        token_part_length=12))  # fmt: skip
    short = SENTENCES[0]
    tokens = embedder.encode_tokens([short])[0]
    assert "".join(short[a:b] for a, b in tokens.offsets) == short.replace(" ", "")  # every character, in order
    assert np.allclose(np.linalg.norm(tokens.vectors, axis=1), 1.0, atol=1e-5)
    # Mean-pooled, the tokens point where the sentence embedding points (which also pools [CLS] and [SEP]).
    pooled = tokens.vectors.mean(axis=0)
    assert float(pooled @ embedder.encode([short])[0]) / float(np.linalg.norm(pooled)) > 0.9
    long_text = " ".join(SENTENCES[:4] * 6)  # far beyond one 32-token window
    long_tokens = embedder.encode_tokens([long_text], cache=True)[0]
    assert long_tokens.offsets[-1][1] == len(long_text.rstrip(".")) + 1  # the last token is covered too
    assert len(long_tokens.vectors) == len(long_tokens.offsets)
    assert not np.isnan(long_tokens.vectors).any()
    assert embedder.encode_tokens([long_text], cache=True)[0] is long_tokens  # served from the cache


def test_one_forward_pass_serves_sentence_and_token_embeddings(tmp_path_factory: pytest.TempPathFactory) -> None:
    config = EmbeddingConfig(precision="fp32", cache_dir=cache_dir(tmp_path_factory), max_length=32)
    embedder = Embedder(config)
    short = SENTENCES[:4]
    embedder.encode(short, keep_tokens=True)
    assert embedder.texts_encoded == 4
    kept = embedder.encode_tokens(short)
    assert embedder.texts_encoded == 4  # the tokens came from encode's pass
    fresh = Embedder(config).encode_tokens(short)  # batched without encode: the same outputs
    for a, b in zip(kept, fresh, strict=True):
        assert a.offsets == b.offsets
        np.testing.assert_allclose(a.vectors, b.vectors, atol=1e-4)
    # A text cut at max_length has no complete token outputs to keep: its tokens come from windows.
    long_text = SENTENCES[-1] * 2
    embedder.encode([long_text], keep_tokens=True)
    before = embedder.texts_encoded
    (tokens,) = embedder.encode_tokens([long_text])
    assert embedder.texts_encoded == before + 1 and tokens.offsets[-1][1] == len(long_text)
    # Without keep_tokens nothing is kept.
    embedder.encode([SENTENCES[4]])
    embedder.encode_tokens([SENTENCES[4]])
    assert embedder.texts_encoded == before + 3


def test_source_windows_are_pooled_from_one_token_pass(tmp_path_factory: pytest.TempPathFactory) -> None:
    embedder = Embedder(EmbeddingConfig(cache_dir=cache_dir(tmp_path_factory)))
    source = " ".join(SENTENCES[:4])
    whole = ((0, len(source)),)
    spans = [(source, whole, source.index(s), source.index(s) + len(s)) for s in SENTENCES[:4]]
    pooled = embedder.span_vectors(spans)
    assert embedder.texts_encoded == 1  # the whole source once, not one pass per window
    assert np.allclose(np.linalg.norm(pooled, axis=1), 1.0, atol=1e-5)
    alone = embedder.encode(SENTENCES[:4])
    agreement = pooled @ alone.T
    # Read in its document, a sentence still points where it points alone, and at no other sentence.
    assert (np.diag(agreement) > 0.6).all()
    assert (agreement.argmax(axis=1) == np.arange(4)).all()
    embedder.read([(source, whole)])
    assert embedder.texts_encoded == 1 + 4  # the token pass was kept for the unsupported-spans detector


def test_reading_ranges_reads_each_once_and_places_its_tokens_in_the_text(tmp_path_factory) -> None:
    embedder = Embedder(EmbeddingConfig(cache_dir=cache_dir(tmp_path_factory)))
    source = " ".join(SENTENCES[:4])
    first, third = [(source.index(s), source.index(s) + len(s)) for s in (SENTENCES[0], SENTENCES[2])]
    (tokens,) = embedder.read([(source, (first, third))])
    assert embedder.texts_encoded == 2  # each range a text of its own
    # Offsets point into the whole text, and only the ranges read have tokens.
    assert "".join(source[a:b] for a, b in tokens.offsets) == (SENTENCES[0] + SENTENCES[2]).replace(" ", "")
    assert len(tokens.vectors) == len(tokens.offsets) and tokens.norms is not None
    (alone,) = embedder.encode_tokens([SENTENCES[2]])
    # The same tokens as the sentence read alone (int8 scales its inputs per batch, hence not equal).
    assert (np.sum(tokens.vectors[-len(alone.offsets) :] * alone.vectors, axis=1) > 0.98).all()
    # Another call choosing the third sentence and the fourth reads only the fourth.
    embedder.read([(source, (third, (source.index(SENTENCES[3]), len(source))))])
    assert embedder.texts_encoded == 2 + 1 + 1  # (encode_tokens of SENTENCES[2] above, uncached, was one)
    (nothing,) = embedder.read([(source, ())])
    assert nothing.vectors.shape == (0, embedder.dimension) and nothing.offsets == ()


def test_models_that_do_not_mean_pool_embed_each_window(tmp_path: Path) -> None:
    folder = tmp_path / "cls-model"
    shutil.copytree(resolve_model_dir(EmbeddingConfig().model), folder)
    pooling = {"word_embedding_dimension": 384, "pooling_mode_cls_token": True}
    (folder / "1_Pooling" / "config.json").write_text(json.dumps(pooling))
    embedder = Embedder(EmbeddingConfig(model=str(folder), cache_dir=tmp_path / "cache"))
    source = " ".join(SENTENCES[:2])
    whole = ((0, len(source)),)
    windows = embedder.span_vectors(
        [(source, whole, 0, len(SENTENCES[0])), (source, whole, len(SENTENCES[0]) + 1, len(source))]
    )
    np.testing.assert_allclose(windows, embedder.encode(SENTENCES[:2]), atol=1e-5)


def test_making_the_default_model_keeps_the_quantizers_chatter_out_of_the_log(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    Embedder(EmbeddingConfig(cache_dir=tmp_path)).load()
    messages = [record.getMessage() for record in caplog.records]
    assert any(message.startswith("converting embedding model") for message in messages)
    # onnxruntime's quantizer logs ~40 lines to the root logger (one a warning that does not apply).
    assert [record.getMessage() for record in caplog.records if record.name == "root"] == []
