"""Directories a command writes to: created on demand, or a one-line error naming the one that is not writable."""

from __future__ import annotations

import os
from pathlib import Path


class UnwritableDirectory(RuntimeError):
    """A directory a command must write to cannot be created or written; the message names it."""


def writable_dir(path: Path, purpose: str) -> Path:
    """``path``, created with its parents if missing; UnwritableDirectory if it cannot be written."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UnwritableDirectory(f"cannot create the {purpose} directory {path}: {exc.strerror or exc}") from exc
    if not os.access(path, os.W_OK | os.X_OK):
        raise UnwritableDirectory(f"the {purpose} directory {path} is not writable by this user")
    return path
