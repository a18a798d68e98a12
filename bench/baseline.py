"""Time another commit's code beside this one's, in one run, interleaved (``--baseline REF``).

A speed ratio remembered from another day says little on a shared machine whose speed
drifts by tens of percent between hours; one measured in the same minutes does.  The
baseline commit is unpacked with ``git archive`` into a temporary folder (no worktree is
registered), and each code tree gets one long-lived child process: the calling bench script
itself, started with ``--serve TREE`` and that tree first on ``sys.path``, so that its
imports resolve to that tree's code.  The parent asks the children for one timed run each in
turn (baseline, current, baseline, current...) over a line protocol of JSON objects, so both
see the same load, the same inputs and the same one-time costs (model load) kept out.

A child's answer to one request is one JSON line; what it prints otherwise goes to stderr.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parents[1]


@contextlib.contextmanager
def code_tree(ref: str) -> Iterator[Path]:
    """The files of commit ``ref`` in a temporary folder, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="halluwatch-baseline-") as folder:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", ref],
                                 check=True, capture_output=True).stdout  # fmt: skip
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(folder, filter="data")
        yield Path(folder)


def serve_tree(argv: Sequence[str]) -> Path | None:
    """The tree a child serves (``--serve TREE`` in ``argv``), put first on ``sys.path``; None in the parent.

    Call before importing the project: the imports that follow then resolve to that tree.
    """
    tree = Path(argv[argv.index("--serve") + 1]) if "--serve" in argv else ROOT
    sys.path.insert(0, str(tree))
    return tree if "--serve" in argv else None


def serve(handle: Any) -> None:
    """A child's loop: each stdin line is a JSON request, answered by ``handle`` with one JSON line on stdout."""
    out = sys.stdout
    sys.stdout = sys.stderr  # anything the code under test prints must not break the protocol
    for line in sys.stdin:
        out.write(json.dumps(handle(json.loads(line))) + "\n")
        out.flush()


class Child:
    """One code tree's serving process."""

    def __init__(self, label: str, script: Path, tree: Path, args: Sequence[str]) -> None:
        self.label = label
        env = {**os.environ, "PYTHONPATH": str(tree)}
        self._process = subprocess.Popen(
            [sys.executable, str(script), "--serve", str(tree), *args],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, cwd=tree, text=True,
        )  # fmt: skip

    def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        """Send one request and wait for its answer."""
        stdin, stdout = _pipes(self._process)
        stdin.write(json.dumps(request) + "\n")
        stdin.flush()
        line = stdout.readline()
        if not line:
            raise RuntimeError(f"{self.label}: the child exited (code {self._process.wait()})")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def close(self) -> None:
        """End the child (it ends when its stdin closes)."""
        stdin, _ = _pipes(self._process)
        stdin.close()
        self._process.wait(timeout=60)


@contextlib.contextmanager
def children(script: Path, baseline: str | None, args: Sequence[str]) -> Iterator[list[Child]]:
    """A child for ``baseline``'s code (when given) and one for this tree's, in that order."""
    with contextlib.ExitStack() as stack:
        started = []
        if baseline:
            tree = stack.enter_context(code_tree(baseline))
            started.append(Child(f"baseline {baseline}", script, tree, args))
        started.append(Child("current", script, ROOT, args))
        try:
            yield started
        finally:
            for child in started:
                child.close()


def timed_batches(suite: Any, calls: Sequence[Any], batch: int) -> list[float]:
    """Run ``calls`` through a detector suite in batches: each call's share of its batch's time, in seconds."""
    seconds: list[float] = []
    for i in range(0, len(calls), batch):
        part = calls[i : i + batch]
        started = time.perf_counter()
        suite.run(part)
        seconds += [(time.perf_counter() - started) / len(part)] * len(part)
    return seconds


def percentile(values: Sequence[float], share: float) -> float:
    """The nearest-rank percentile (``share`` in 0..1) of ``values``."""
    ordered = sorted(values)
    return ordered[max(math.ceil(share * len(ordered)) - 1, 0)]


def _pipes(process: subprocess.Popen[str]) -> tuple[IO[str], IO[str]]:
    assert process.stdin is not None and process.stdout is not None
    return process.stdin, process.stdout
