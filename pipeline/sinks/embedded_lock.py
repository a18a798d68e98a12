"""Whether another process has an embedded ClickHouse directory open: the lock chDB holds on it.

chDB, like clickhouse-server, holds an exclusive ``flock`` on the directory's ``status`` file,
which names its process, for as long as it has the directory open.  A second process that opens
the directory fails with chDB's own ``Cannot lock file …/status`` printed straight to stderr and
an exception that says only ``BAD_ARGUMENTS``; trying the same lock first tells it apart, before
chDB prints anything.  :func:`holder_words` names the holder for people: its id, and its command
line where this machine's /proc shows that very process holding the directory.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
from pathlib import Path

STATUS_FILE = "status"  # ClickHouse's StatusFile: locked, and holding "PID: <pid>"
_PID = re.compile(r"^PID: (\d+)$", re.MULTILINE)
_COMMAND_CHARS = 120  # a command line longer than this is cut: the message stays one line people read


def holder(directory: Path) -> int | None:
    """The id of another process that has ``directory`` open (0 when its status file names none), or None.

    This process's own hold (chDB is open here already) is no obstacle: chDB reuses it.
    """
    try:
        descriptor = os.open(directory / STATUS_FILE, os.O_RDONLY)
    except FileNotFoundError:  # never opened, or a fresh directory
        return None
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = _named_pid(directory / STATUS_FILE)
            return None if _held_here(directory / STATUS_FILE, descriptor, pid) else pid
        fcntl.flock(descriptor, fcntl.LOCK_UN)
        return None
    finally:
        os.close(descriptor)


def _held_here(path: Path, ours: int, pid: int) -> bool:
    """Whether the holder is this process: it has ``path`` open besides ``ours``, or (no /proc) it names our id.

    The descriptor decides where /proc lists them: the id alone misleads across containers, where
    a worker may be process 1 in its own, as this process may be in this one.
    """
    descriptors = Path("/proc/self/fd")
    if not descriptors.is_dir():
        return pid == os.getpid()
    target = str(path.resolve())
    for entry in descriptors.iterdir():
        with contextlib.suppress(OSError):  # one closed while we look
            if entry.name != str(ours) and os.readlink(entry) == target:
                return True
    return False


def _named_pid(path: Path) -> int:
    text = ""
    with contextlib.suppress(OSError):
        text = path.read_text(encoding="utf-8", errors="replace")
    match = _PID.search(text)
    return int(match[1]) if match else 0


def holder_words(directory: Path, pid: int) -> str:
    """``process 6685 (python -m pipeline.cli ui)``: the holder :func:`holder` named, for a message.

    The command line is shown only where /proc shows process ``pid`` holding the directory's
    status file: in another container the id may name an unrelated process here, or none.
    """
    if not pid:
        return "another process"
    command = _command_line(pid) if _holds(pid, directory / STATUS_FILE) else ""
    return f"process {pid} ({command})" if command else f"process {pid}"


def _holds(pid: int, path: Path) -> bool:
    """Whether process ``pid`` has ``path`` open (False where /proc does not let us look: another user's)."""
    target = str(path.resolve())
    try:
        entries = list(Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return False
    for entry in entries:
        with contextlib.suppress(OSError):  # one closed while we look
            if os.readlink(entry) == target:
                return True
    return False


def _command_line(pid: int) -> str:
    """Process ``pid``'s arguments on one line (whitespace folded, long ones cut), or ""."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    # Arguments end in NULs; a -c script's newlines too: all become single spaces.
    words = " ".join(raw.replace(b"\0", b" ").decode("utf-8", errors="replace").split())
    return words if len(words) <= _COMMAND_CHARS else words[: _COMMAND_CHARS - 1] + "…"
