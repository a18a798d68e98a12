"""tests/stack/cache.py: a build runs once, even when two processes ask for it at the same time."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# Each process asks for the same build; the build is slow and counts itself in a file.
ASK = """
import sys, time
from pathlib import Path
import tests.stack.cache as cache
cache.CACHE_ROOT = Path(sys.argv[1])
counter = Path(sys.argv[1]) / "builds"

def build(out):
    with open(counter, "a") as f:
        f.write("x")
    time.sleep(2)
    (out / "artifact").write_text("built")

final = cache.built_once("thing", {"version": 1}, build)
print((final / "artifact").read_text())
"""


def test_concurrent_requests_build_once_and_both_get_it(tmp_path: Path):
    asks = [
        subprocess.Popen([sys.executable, "-c", ASK, str(tmp_path)], cwd=REPO, stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outputs = [ask.communicate(timeout=60)[0] for ask in asks]
    assert [ask.returncode for ask in asks] == [0, 0]
    assert outputs == ["built\n", "built\n"]
    assert (tmp_path / "builds").read_text() == "x"
    assert not list(tmp_path.glob("*.partial-*"))
