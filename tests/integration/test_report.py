"""`halluwatch report` writes one self-contained page that headless Chromium renders with its charts.

Chromium runs with every network fetch sent to a dead proxy, so anything the page tried
to load from outside would fail and show; the page has no scripts, so any console
message at all is a fault.
"""

from __future__ import annotations

import re
import subprocess
from html.parser import HTMLParser
from pathlib import Path

from PIL import Image

from dashboards import Chart, clickhouse_panels
from pipeline.tools.report import report_window, write_report
from tests.chromium import chromium_path

CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--proxy-server=127.0.0.1:9", "--enable-logging=stderr", "--v=0", "--window-size=1280,4000",
]  # fmt: skip


def _run_chromium(page: Path, profile: Path, *action: str) -> subprocess.CompletedProcess[str]:
    completed = subprocess.run(
        [chromium_path(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *action, page.as_uri()],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr[-3000:]
    console = [line for line in completed.stderr.splitlines() if ":CONSOLE" in line]
    assert not console, console
    return completed


class _Elements(HTMLParser):
    """Tags and attributes of a document, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.elements: list[tuple[str, dict[str, str]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, {name: value or "" for name, value in attrs}))


def _elements(html: str) -> list[tuple[str, dict[str, str]]]:
    parser = _Elements()
    parser.feed(html)
    return parser.elements


def test_report_renders_offline_in_chromium(demo_database, tmp_path: Path):
    client, database = demo_database
    page = write_report(client, database, report_window(hours=1), tmp_path / "report.html")

    dom = _run_chromium(page, tmp_path / "profile-dom", "--dump-dom").stdout
    elements = _elements(dom)
    tags = [tag for tag, _ in elements]
    assert "script" not in tags and "link" not in tags and "iframe" not in tags
    fetched = [a for _, attrs in elements for name, a in attrs.items() if name in ("src", "href", "xlink:href")]
    assert all(target.startswith("#") for target in fetched), fetched  # in-page links only
    assert all(target.startswith("#") for target in re.findall(r"url\(([^)]*)\)", dom))  # SVG clip paths

    sections = {attrs["id"]: attrs for tag, attrs in elements if tag == "section"}
    panels = clickhouse_panels()
    assert list(sections) == [panel.name for panel in panels]
    charted = [p.name for p in panels if p.chart is not Chart.TABLE and int(sections[p.name]["data-rows"]) > 0]
    assert {"hallucination_rate", "detector_flag_rate", "score_distribution", "alerts_over_time"} <= set(charted)
    assert tags.count("svg") == len(charted)
    tabled = [p.name for p in panels if p.chart is Chart.TABLE and int(sections[p.name]["data-rows"]) > 0]
    assert tags.count("table") == len(tabled) and "schema_violations_by_tool" in tabled
    assert sections["consistency_scores"]["data-rows"] == "0" and "No data in this range." in dom
    # Chart text is text: the legend names the demo's services, the tables its findings.
    legends = re.findall(r"<text[^>]*>([^<]+)</text>", dom)
    assert any("order-intake / gpt-4o-mini / extract_order" in text for text in legends)
    assert "search_documents" in dom and "severe-contradiction" in dom

    screenshot = tmp_path / "report.png"
    _run_chromium(page, tmp_path / "profile-shot", f"--screenshot={screenshot}")
    with Image.open(screenshot) as image:
        assert image.size == (1280, 4000)
        pixels = image.convert("RGB").resize((320, 1000))
        colors = pixels.getcolors(maxcolors=320 * 1000) or []
    background = max(colors)[0]
    assert len(colors) > 200  # lines, bars, text and tables, not a blank or error page
    assert background < 0.9 * 320 * 1000

    # --app narrows the panels over findings and alerts to those application policies.
    narrowed = write_report(client, database, report_window(hours=1, apps=("no-such-app",)), tmp_path / "app.html")
    text = narrowed.read_text(encoding="utf-8")
    assert "no-such-app" in text and 'id="hallucination_rate" data-chart="timeseries" data-rows="0"' in text
    assert 'id="llm_traffic" data-chart="table" data-rows="0"' not in text  # llm_calls has no policy column
