"""The format version on every message halluwatch writes to its own topics: one Kafka header.

Format 1 is what releases before the header wrote (no header); format 2 is format 1's bodies
with the header.  The version goes in a header, not the body, so that a worker of the previous
release, which reads bodies only, reads the current one's messages unchanged: the two share a
consumer group through a rolling upgrade (docs/operations.md, "Upgrades").  A later release that
changes a body will keep writing the format before it until the setting ``compat.write_format``
it adds is raised, once no worker of the older release is left.
"""

from __future__ import annotations

from collections.abc import Sequence

FORMAT_HEADER = "halluwatch.format"
WRITE_FORMAT = 2
_FORMAT_VALUE = str(WRITE_FORMAT).encode()


def with_format(headers: Sequence[tuple[str, bytes]] = ()) -> list[tuple[str, bytes]]:
    """``headers`` with the format this release writes, first."""
    return [(FORMAT_HEADER, _FORMAT_VALUE), *headers]
