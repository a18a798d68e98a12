"""What ``halluwatch erase`` cannot reach, as it says after each erasure: copies outside ClickHouse.

``halluwatch report`` (by default) and ``halluwatch demo`` write ``DATA_DIR/report.html``, whose
panels quote answers and trace ids.  Erase cannot write it again without the erased traces (its
window and filters were the command line's), so it names the file when there is one, with the
other copies it cannot reach.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

REPORT_FILE = "report.html"


def default_report(data_dir: Path) -> Path:
    """Where ``halluwatch report`` and ``halluwatch demo`` write the HTML report unless told otherwise."""
    return data_dir / REPORT_FILE


def unreached_lines(data_dir: Path) -> list[str]:
    """The copies an erasure left, each with what to do: the lines ``halluwatch erase`` ends with."""
    lines = ['not reached (docs/operations.md, "What erase cannot reach"):']
    report = default_report(data_dir)
    if report.is_file():
        written = datetime.fromtimestamp(report.stat().st_mtime, UTC)
        lines.append(f"  {report.resolve()}: an HTML report written {written:%Y-%m-%d %H:%M} UTC; it may quote "
                     "the erased calls: delete it, or write it again with `halluwatch report`")  # fmt: skip
    lines += [
        "  HTML reports written elsewhere (`halluwatch report --output`): delete them, or write them again",
        "  Kafka topics, until their retention passes the erased calls",
        "  findings, Slack messages and PagerDuty incidents already sent: erase them there (search for the trace id)",
    ]
    return lines
