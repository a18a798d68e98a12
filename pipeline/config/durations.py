"""Durations as operators type them: ``90m``, ``2h``, ``7d``, ``1d12h``."""

from __future__ import annotations

import re
from datetime import timedelta

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_DURATION = re.compile(r"(?:\d+[smhd])+")
_PART = re.compile(r"(\d+)([smhd])")


def parse_duration(text: str) -> timedelta | None:
    """The duration ``text`` writes (numbers with units s, m, h, d), or None when it is not one."""
    compact = text.strip().lower()
    if not _DURATION.fullmatch(compact):
        return None
    return timedelta(seconds=sum(int(n) * _UNITS[unit] for n, unit in _PART.findall(compact)))
