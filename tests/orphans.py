"""Child processes that end with the test process, even when it is killed and cannot clean up.

A fixture's ``finally`` stops its broker, collector or worker; a SIGKILLed pytest (a CI
timeout, say) runs no ``finally``, and a JVM or a worker would keep its ports and cores.
Linux's parent-death signal closes that gap: the kernel kills the child when the thread
that started it exits.  Elsewhere the fixtures' own cleanup is all there is.
"""

from __future__ import annotations

import ctypes
import signal
import sys

_PR_SET_PDEATHSIG = 1
# Looked up once, in the parent: between fork and exec the child of a threaded process must not
# load libraries (another thread may have held the loader's lock at the fork).
_prctl = ctypes.CDLL(None, use_errno=True).prctl if sys.platform.startswith("linux") else None


def die_with_parent() -> None:
    """A ``preexec_fn``: SIGKILL this child when its parent dies (Linux; a no-op elsewhere)."""
    if _prctl is not None:
        _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
