"""`halluwatch demo` with the llm-test extra: one uncertain call goes to the local model and the summary says what it
said (make test-llm only: the model adds minutes)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.llm, pytest.mark.usefixtures("llm_extra", "exported_model"), pytest.mark.timeout(1200)]


def test_the_demo_sends_an_uncertain_call_to_the_local_model_and_shows_its_judgment(tmp_path: Path) -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", "demo", "--data-dir", str(tmp_path / "demo"), "--local-judge"],
        capture_output=True, text=True, timeout=1100, check=False,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr[-3000:]
    out = completed.stdout
    escalated = out.split("Escalated to your own model (why; what it said):\n", 1)[1].split("\nFlagged by one", 1)[0]
    sent = [line for line in escalated.splitlines() if "sent to the judge" in line]
    assert sent, escalated
    # Whatever the small model answered (a judgment, or why none was usable), the decision did not wait forever.
    assert all("judge: " in line and "no answer by the deadline" not in line for line in sent)
