"""Evidence as people read it: untrusted JSON values turned into short, clipped, quoted text.

Evidence reaches alerts over Kafka as JSON, so every reader tolerates missing keys and wrong
types. Each detector's ``DETECTOR.render`` (its evidence lines in alerts) is built from these.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from detectors.text.passages import clip

SNIPPET_CHARS = 300  # one quoted sentence, window or value
WITHHELD = "(text withheld by content_mode)"
EVIDENCE_ITEMS = 5  # violations / claims / spans listed per detector


def snippet(value: Any) -> str:
    """A one-line, clipped, quoted rendering of a text value ("" for anything else)."""
    if not isinstance(value, str) or not value.strip():
        return ""
    return f'"{clip(" ".join(value.split()), SNIPPET_CHARS)}"'


def quoted(value: Any) -> str:
    """A :func:`snippet`, or :data:`WITHHELD` for the empty text a ``drop`` content mode leaves."""
    return WITHHELD if value == "" else snippet(value)


def word(value: Any) -> str:
    """A short scalar (id, kind, name) as text, or ""."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return ""
    return clip(str(value), SNIPPET_CHARS)


def number(value: Any) -> float | None:
    """A finite number as a float, or None."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def records(value: Any) -> list[Mapping[str, Any]]:
    """The mapping items of a list (anything else: none)."""
    return [item for item in value if isinstance(item, Mapping)] if isinstance(value, list) else []


def more(total: int, shown: int, what: str) -> list[str]:
    """The line counting what was not shown, if anything was not."""
    return [f"+{total - shown} more {what}"] if total > shown else []
