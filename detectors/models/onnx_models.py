"""Loading and batched running of user-supplied ONNX classifiers with a HF ``tokenizer.json``.

Shared by the model-based detectors (docs/detectors.md) so each one only decides *what* to feed,
not how.  Plain onnxruntime + ``tokenizers`` + numpy: no torch or transformers at run time
(bench/README.md measured this route as the fastest on two cores).

Trade-offs stated here once:

* Sequences are sorted by length before they are cut into batches, so a batch pads to a
  similar length instead of to the longest sequence of the whole request.
* Only the inputs the graph declares are fed (``token_type_ids`` is absent from
  RoBERTa/ModernBERT exports), in the integer type it declares.
* Load errors raise :class:`ModelLoadError` naming the file: a missing model is a
  configuration mistake to surface at start, never a per-call error.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
import onnxruntime as ort
from tokenizers import Tokenizer

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float32]

_KNOWN_INPUTS = frozenset({"input_ids", "attention_mask", "token_type_ids"})
_INT_TYPES: dict[str, type[np.signedinteger]] = {"tensor(int64)": np.int64, "tensor(int32)": np.int32}


class ModelLoadError(ValueError):
    """A model or tokenizer file is missing or unusable; the message names the file."""


@dataclass(frozen=True, slots=True)
class TokenSequence:
    """One encoded model input: token ids and their segment (token type) ids."""

    ids: IntArray
    type_ids: IntArray

    def __len__(self) -> int:
        return len(self.ids)


def load_tokenizer(path: Path, what: str) -> Tokenizer:
    """Read a ``tokenizer.json``, with any padding or truncation saved in it switched off.

    Callers lay out and pad sequences themselves; a truncation setting carried over from
    training would silently cut contexts.
    """
    try:
        tokenizer = Tokenizer.from_file(str(path))
    except Exception as exc:  # tokenizers raises a bare Exception for every failure
        raise ModelLoadError(f"cannot load {what} tokenizer {path}: {exc}") from exc
    tokenizer.no_padding()
    tokenizer.no_truncation()
    return tokenizer


def softmax(logits: npt.NDArray[np.floating], axis: int = -1) -> FloatArray:
    """Numerically stable softmax in float32."""
    shifted = np.asarray(logits, dtype=np.float32) - np.max(logits, axis=axis, keepdims=True)
    exp = np.exp(shifted)
    return np.asarray(exp / np.sum(exp, axis=axis, keepdims=True), dtype=np.float32)


class OnnxClassifier:
    """An ONNX sequence- or token-classification model run over padded, length-sorted batches.

    ``output_rank`` is 2 for sequence classification (``[batch, labels]``) and 3 for token
    classification (``[batch, tokens, labels]``); it and the label count are checked at load
    so a wrong file fails at start, naming itself.
    """

    def __init__(self, path: Path, what: str, *, output_rank: int, min_labels: int, threads: int) -> None:
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        try:
            self._session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises its own Fail/NoSuchFile/InvalidGraph types
            raise ModelLoadError(f"cannot load {what} model {path}: {exc}") from exc
        inputs = {node.name: node.type for node in self._session.get_inputs()}
        unknown = sorted(set(inputs) - _KNOWN_INPUTS)
        if "input_ids" not in inputs or unknown:
            raise ModelLoadError(
                f"{what} model {path} must take input_ids[, attention_mask, token_type_ids]; it takes {sorted(inputs)}"
            )
        self._input_types = {name: _INT_TYPES.get(kind, np.int64) for name, kind in inputs.items()}
        output = self._session.get_outputs()[0]
        self._output_name = output.name
        labels = output.shape[-1] if output.shape else None
        if len(output.shape) != output_rank or (isinstance(labels, int) and labels < min_labels):
            raise ModelLoadError(
                f"{what} model {path}: first output {output.name!r} has shape {output.shape}, "
                f"expected rank {output_rank} with at least {min_labels} labels"
            )

    def run(self, sequences: Sequence[TokenSequence], batch_size: int) -> list[FloatArray]:
        """Logits per sequence, in input order: ``[labels]`` or ``[len(sequence), labels]``.

        One ``session.run`` per ``batch_size`` sequences.
        """
        results: list[FloatArray] = [np.empty(0, dtype=np.float32)] * len(sequences)
        order = sorted(range(len(sequences)), key=lambda index: len(sequences[index]))
        for begin in range(0, len(order), batch_size):
            batch = order[begin : begin + batch_size]
            logits = self._run_padded([sequences[index] for index in batch])
            for row, index in enumerate(batch):
                results[index] = logits[row, : len(sequences[index])] if logits.ndim == 3 else logits[row]
        return results

    def _run_padded(self, batch: Sequence[TokenSequence]) -> FloatArray:
        width = max(len(sequence) for sequence in batch)
        ids = np.zeros((len(batch), width), dtype=np.int64)
        type_ids = np.zeros_like(ids)
        mask = np.zeros_like(ids)
        for row, sequence in enumerate(batch):
            ids[row, : len(sequence)] = sequence.ids
            type_ids[row, : len(sequence)] = sequence.type_ids
            mask[row, : len(sequence)] = 1
        available = {"input_ids": ids, "attention_mask": mask, "token_type_ids": type_ids}
        feeds = {name: available[name].astype(dtype, copy=False) for name, dtype in self._input_types.items()}
        (logits,) = self._session.run([self._output_name], feeds)
        return np.asarray(logits, dtype=np.float32)
