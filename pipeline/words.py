"""Counts with their nouns, as the pages and commands print them: ``1 call``, ``2 calls``."""

from __future__ import annotations


def counted(count: int, noun: str, plural: str = "") -> str:
    """``count`` and ``noun``, in the plural unless the count is one (``plural``: a noun's irregular one)."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"
