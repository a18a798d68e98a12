"""Export of a sentence-transformers model to ONNX, for :mod:`detectors.models.embeddings` (bench/README.md).

The transformer's token embeddings are exported with ``torch.onnx.export`` and, for
``int8``, quantized with ``quantize_dynamic(per_channel=True)``; the runtime pools and
normalizes them itself.  Imported only when the embedder's cache misses, so a warm cache
never loads torch, transformers or onnx.  They are the ``export`` extra
(``pip install 'halluwatch[export]'``), not the worker's requirements: a missing one is a
one-line :class:`~detectors.extras.MissingExtra` naming that extra.  The export runs
in-process with ``torch.set_num_threads(1)``, because torch and onnxruntime threads fight
for the cores of a small machine otherwise.  Every artifact is written to a temporary file
and renamed into place, so workers starting together may export twice but never read half
a file.
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from detectors.extras import requires_extra

if TYPE_CHECKING:
    import onnx


def export(model_dir: Path, fp32: Path, tokenizer: Path, int8: Path | None = None) -> None:
    """Export ``model_dir``'s transformer to ``fp32`` and its tokenizer to ``tokenizer``; quantize to ``int8`` if given.

    Files already there are kept.  :class:`~detectors.extras.MissingExtra` (an ImportError)
    means torch, transformers, onnx or onnxscript is missing: the ``export`` extra.
    """
    fp32.parent.mkdir(parents=True, exist_ok=True)
    if not fp32.exists():
        _export_fp32(model_dir, fp32, tokenizer)
    if int8 is not None and not int8.exists():
        quantize(fp32, int8)


@contextmanager
def _atomic_path(target: Path) -> Iterator[Path]:
    """A temporary path beside ``target``, renamed onto it only if the block succeeds."""
    handle, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    os.close(handle)
    temporary = Path(name)
    try:
        yield temporary
        temporary.chmod(0o644)  # mkstemp makes it private; the cache may be shared by several users
        os.replace(temporary, target)
    finally:
        temporary.unlink(missing_ok=True)


def save(model: onnx.ModelProto, target: Path) -> None:
    """``model`` written to ``target``, which never holds half a file."""
    import onnx

    with _atomic_path(target) as temporary:
        onnx.save(model, temporary)


def _export_fp32(model_dir: Path, target: Path, tokenizer_target: Path) -> None:
    """Export the transformer's token embeddings to ONNX and save its fast tokenizer beside it."""
    # A guard for the libraries, set before they are imported: the export reads a local
    # folder and must never reach the network.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    with requires_extra("export"):
        import onnx  # noqa: F401 - torch.onnx.export needs both; missing, they would fail mid-export
        import onnxscript  # noqa: F401
        import torch
        from transformers import AutoModel, AutoTokenizer

    torch.set_num_threads(1)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModel.from_pretrained(model_dir).eval()
    sample = tokenizer(["a short sentence", "and a somewhat longer one to export"], padding=True, return_tensors="pt")
    names = [n for n in ("input_ids", "attention_mask", "token_type_ids") if n in sample]

    class TokenEmbeddings(torch.nn.Module):
        """Positional inputs in, last hidden state out: the shape ONNX export wants."""

        def forward(self, *inputs: Any) -> Any:
            return model(**dict(zip(names, inputs, strict=True))).last_hidden_state

    batch, sequence = torch.export.Dim("batch"), torch.export.Dim("sequence")
    with _atomic_path(target) as temporary, torch.no_grad():
        torch.onnx.export(
            TokenEmbeddings().eval(),
            tuple(sample[n] for n in names),
            str(temporary),
            input_names=names,
            output_names=["token_embeddings"],
            dynamic_shapes=(tuple({0: batch, 1: sequence} for _ in names),),  # one entry: the *inputs tuple
            external_data=False,
            dynamo=True,
        )
    with _atomic_path(tokenizer_target) as temporary:
        temporary.write_text(tokenizer.backend_tokenizer.to_str(), "utf-8")


def quantize(fp32: Path | onnx.ModelProto, target: Path) -> None:
    """Dynamic int8 quantization, per channel (per-tensor loses ~3 points of cosine to fp32).

    Also the default model's (:mod:`detectors.models.prebuilt`), which needs onnx but no torch.
    """
    from onnxruntime.quantization import QuantType, quantize_dynamic

    with _atomic_path(target) as temporary, _quiet_quantizer():
        quantize_dynamic(fp32, temporary, per_channel=True, weight_type=QuantType.QInt8)


class _QuantizerChatter(logging.Filter):
    """What onnxruntime's quantizer logs to the root logger: a line per tensor, advice for static quantization."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "onnxruntime" not in record.pathname or "quantization" not in record.pathname


@contextmanager
def _quiet_quantizer() -> Iterator[None]:
    """Keep that chatter (about 40 lines, one a warning that does not apply) out of a worker's log."""
    chatter = _QuantizerChatter()
    root = logging.getLogger()
    root.addFilter(chatter)
    try:
        yield
    finally:
        root.removeFilter(chatter)
