"""Optional dependencies: the packages that come with an extra of halluwatch, not with the worker.

The worker runs on the base requirements (onnxruntime, tokenizers, numpy).  torch,
transformers, onnx and onnxscript (the one-time ONNX export) are the ``export`` extra,
matplotlib the ``calibrate`` and ``report`` extras, the Tansu broker the ``demo`` extra
(pyproject's ``[project.optional-dependencies]``).  A module that needs one imports it
inside :func:`requires_extra`, so a missing package is one line naming the extra to
install, not a traceback.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


class MissingExtra(ImportError):
    """An optional package is not installed; the message is one line naming the extra that brings it."""

    def __init__(self, package: str, extra: str, needed_for: str = "") -> None:
        head = f"{needed_for} needs {package}, which is not installed" if needed_for else f"{package} is not installed"
        super().__init__(f"{head} (pip install 'halluwatch[{extra}]')", name=package)
        self.package = package
        self.extra = extra


@contextmanager
def requires_extra(extra: str, needed_for: str = "", package: str | None = None) -> Iterator[None]:
    """Turn an ImportError in the block into :class:`MissingExtra` for ``extra``.

    ``package``: the name to print; by default the top-level module that failed to import.
    """
    try:
        yield
    except MissingExtra:
        raise
    except ImportError as exc:
        name = package or (exc.name or "").partition(".")[0] or "a package"
        raise MissingExtra(name, extra, needed_for) from exc
