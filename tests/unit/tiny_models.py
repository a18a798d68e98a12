"""Tiny tokenizer and ONNX models whose outputs the tests control exactly (nothing downloads).

The span model is a toy "grounding" classifier: an answer token's hallucination logit is
``BIAS[word]``, minus ``SUPPORT`` when the same token id occurs in the first segment (token
type 0) of the same sequence.  So a word is supported exactly when its window contains it,
which makes chunking observable.  The NLI model sums per-word logit vectors over the
hypothesis (token type 1): "wrong" means contradiction, "fine" entailment, else neutral.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]
FUNCTION_WORDS = ["the", "tower", "is", "in", "it", "and", "not", ".", ",", "?", "where", "##e", "wrong", "fine"]
CONTENT_WORDS = ["paris", "rom", "bogus", "maybe", "big", "red", "berlin", "lorem", "ipsum"]
VOCAB = SPECIALS + FUNCTION_WORDS + CONTENT_WORDS
TOKEN_ID = {token: index for index, token in enumerate(VOCAB)}

CONTENT_BIAS = 4.0  # an unsupported content word: p = sigmoid(4) ~ 0.982
FUNCTION_BIAS = -6.0
BIAS = {"bogus": 2.0, "maybe": 0.0}  # p = sigmoid(2) ~ 0.881 and exactly 0.5
SUPPORT = 10.0
OPSET = 18
IR_VERSION = 10  # onnx writes newer IR versions than onnxruntime reads


def sigmoid(logit: float) -> float:
    """Softmax over [0, logit], the toy model's hallucination probability."""
    return 1.0 / (1.0 + math.exp(-logit))


def probability(word: str) -> float:
    """Hallucination probability of an unsupported ``word``."""
    return sigmoid(hallucination_logit(word))


def hallucination_logit(token: str) -> float:
    """The toy model's hallucination logit of an unsupported token."""
    return BIAS.get(token, CONTENT_BIAS if token in CONTENT_WORDS else FUNCTION_BIAS)


def write_tokenizer(path: Path) -> Path:
    """A lowercasing WordPiece tokenizer with BERT's pair template, saved as ``tokenizer.json``."""
    tokenizer = Tokenizer(models.WordPiece(TOKEN_ID, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", TOKEN_ID["[CLS]"]), ("[SEP]", TOKEN_ID["[SEP]"])],
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(path))
    return path


def _input(name: str) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "sequence"])


def _const(name: str, values: float | Sequence[float] | np.ndarray, dtype: type = np.float32) -> onnx.NodeProto:
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(values, dtype=dtype)))


def _mask_nodes(segment: int) -> list[onnx.NodeProto]:
    """Nodes computing ``in_segment`` [batch, sequence, 1]: 1.0 on real tokens of ``segment``."""
    return [
        _const("segment", segment, np.int64),
        helper.make_node("Equal", ["token_type_ids", "segment"], ["is_segment"]),
        helper.make_node("Cast", ["is_segment"], ["segment_f"], to=TensorProto.FLOAT),
        helper.make_node("Cast", ["attention_mask"], ["mask_f"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["segment_f", "mask_f"], ["masked"]),
        _const("last_axis", [2], np.int64),
        helper.make_node("Unsqueeze", ["masked", "last_axis"], ["in_segment"]),
    ]


def _save(nodes: list[onnx.NodeProto], inputs: list[str], output: onnx.ValueInfoProto, path: Path) -> Path:
    graph = helper.make_graph(nodes, "tiny", [_input(name) for name in inputs], [output])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION)
    onnx.checker.check_model(model, full_check=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))
    return path


def write_span_model(path: Path, *, token_types: bool = True) -> Path:
    """The toy token classifier (labels: supported, hallucinated); context-blind without token types."""
    bias = [hallucination_logit(token) for token in VOCAB]
    nodes = [_const("bias", bias), helper.make_node("Gather", ["bias", "input_ids"], ["raw"])]
    if token_types:
        nodes += _mask_nodes(0)
        nodes += [
            _const("depth", len(VOCAB), np.int64),
            _const("one_hot_values", [0.0, 1.0]),
            helper.make_node("OneHot", ["input_ids", "depth", "one_hot_values"], ["one_hot"], axis=-1),
            helper.make_node("Mul", ["one_hot", "in_segment"], ["context_one_hot"]),
            _const("sequence_axis", [1], np.int64),
            helper.make_node("ReduceMax", ["context_one_hot", "sequence_axis"], ["present"], keepdims=1),
            helper.make_node("Mul", ["one_hot", "present"], ["token_present"]),
            helper.make_node("ReduceSum", ["token_present", "last_axis"], ["supported"], keepdims=0),
            _const("support", SUPPORT),
            helper.make_node("Mul", ["supported", "support"], ["support_logit"]),
            helper.make_node("Sub", ["raw", "support_logit"], ["hallucinated"]),
        ]
    else:
        nodes += [_const("last_axis", [2], np.int64), helper.make_node("Identity", ["raw"], ["hallucinated"])]
    nodes += [
        _const("zero", 0.0),
        helper.make_node("Mul", ["hallucinated", "zero"], ["supported_logit"]),
        helper.make_node("Unsqueeze", ["supported_logit", "last_axis"], ["supported_column"]),
        helper.make_node("Unsqueeze", ["hallucinated", "last_axis"], ["hallucinated_column"]),
        helper.make_node("Concat", ["supported_column", "hallucinated_column"], ["logits"], axis=2),
    ]
    inputs = ["input_ids", "attention_mask"] + (["token_type_ids"] if token_types else [])
    output = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", "sequence", 2])
    return _save(nodes, inputs, output, path)


NLI_LABELS = ("contradiction", "neutral", "entailment")


def write_nli_model(path: Path, order: Sequence[str] = NLI_LABELS) -> Path:
    """The toy NLI classifier; ``order`` is the label order of its output head."""
    table = np.zeros((len(VOCAB), len(order)), dtype=np.float32)
    table[:, order.index("neutral")] = 0.1
    table[TOKEN_ID["wrong"], order.index("contradiction")] = 20.0
    table[TOKEN_ID["fine"], order.index("entailment")] = 20.0
    nodes = [
        _const("table", table),
        helper.make_node("Gather", ["table", "input_ids"], ["embedded"]),
        *_mask_nodes(1),
        helper.make_node("Mul", ["embedded", "in_segment"], ["hypothesis"]),
        _const("sequence_axis", [1], np.int64),
        helper.make_node("ReduceSum", ["hypothesis", "sequence_axis"], ["logits"], keepdims=0),
    ]
    output = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", len(order)])
    return _save(nodes, ["input_ids", "attention_mask", "token_type_ids"], output, path)
