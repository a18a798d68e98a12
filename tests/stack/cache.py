"""One-time builds kept outside the repository, under ``~/.cache/halluwatch/``, keyed by their inputs.

A build runs into a scratch directory beside its final place and is renamed there only once
it succeeded, so an interrupted build is never mistaken for a finished one.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

CACHE_ROOT = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "halluwatch"


class MissingTool(RuntimeError):
    """A program a build needs is not on PATH."""


def say(message: str) -> None:
    """Progress of a build, on the terminal even while pytest captures output."""
    print(f"[stack] {message}", file=sys.__stderr__, flush=True)


def require(tool: str, why: str) -> str:
    """The path of ``tool``, or :class:`MissingTool` saying what needs it and how to get it."""
    path = shutil.which(tool)
    if path is None:
        raise MissingTool(f"`{tool}` is not on PATH: {why}")
    return path


def key_of(inputs: Any) -> str:
    """A short stable digest of JSON-able build inputs (a version and a component list, say)."""
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:16]


def cached(name: str, inputs: Any) -> Path:
    """Where the build of ``name`` from ``inputs`` is kept (it may not exist yet)."""
    return CACHE_ROOT / f"{name}-{key_of(inputs)}"


@contextmanager
def _exclusive(final: Path) -> Iterator[None]:
    """Hold the build's lock: a second process (the background build of `make test`) waits, then finds it built."""
    final.parent.mkdir(parents=True, exist_ok=True)
    with open(final.with_name(f".{final.name}.lock"), "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            say(f"waiting for another process building {final.name} (`make test` builds in the background)")
            fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def built_once(name: str, inputs: Any, build: Callable[[Path], None]) -> Path:
    """``CACHE_ROOT/name-KEY``, made by ``build(scratch_dir)`` unless a finished one is there."""
    final = cached(name, inputs)
    if final.is_dir():
        return final
    with _exclusive(final):
        if final.is_dir():
            return final
        _build_into(final, build)
    return final


def _build_into(final: Path, build: Callable[[Path], None]) -> None:
    scratch = final.with_name(f"{final.name}.partial-{os.getpid()}")
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    started = time.monotonic()
    say(f"building {final.name} (once; cached in {CACHE_ROOT})")
    try:
        build(scratch)
        scratch.rename(final)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    say(f"built {final.name} in {time.monotonic() - started:.0f} s")


def run_step(command: Sequence[str], cwd: Path | None = None, env: dict[str, str] | None = None) -> None:
    """Run one build step, its output streamed as progress; a failure raises with the command."""
    say("$ " + " ".join(command))
    process = subprocess.Popen(
        command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
    )
    assert process.stdout is not None
    for line in process.stdout:
        say("  " + line.rstrip())
    if process.wait() != 0:
        raise RuntimeError(f"build step failed ({process.returncode}): {' '.join(command)}")
