"""A real `halluwatch worker` with HALLUWATCH_LOG_FORMAT=json writes nothing but JSON lines.

faust and mode log through their own loggers (and mode would install its own handlers and
formatter); every line the process writes, theirs included, must parse for a log shipper.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from pipeline.tools.demo_broker import TansuBroker
from tests.integration.demo_data import demo_messages
from tests.integration.support import WorkerProcess, produce

pytestmark = pytest.mark.usefixtures("exported_model")


def test_worker_logs_one_json_object_per_line(tansu: TansuBroker, topic_prefix: str, tmp_path: Path):
    worker = WorkerProcess(tansu.bootstrap, topic_prefix, tmp_path, log_format="json").start()
    sent = produce(tansu.bootstrap, worker.input_topic, demo_messages())  # example traces, then garbage
    worker.wait_for("halluwatch_messages_done_total", sent, timeout_seconds=180)
    worker.wait_for("halluwatch_alerts_total", 1, timeout_seconds=120)
    assert worker.stop(signal.SIGTERM) == 0, worker.log()

    lines = worker.log_path.read_text().splitlines()  # stdout and stderr of the process together
    records = []
    for line in lines:
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            raise AssertionError(f"not a JSON line: {line!r}") from None
    assert all(set(r) >= {"timestamp", "level", "logger", "message"} for r in records)
    loggers = {r["logger"] for r in records}
    assert any(name.startswith(("faust.", "mode.")) for name in loggers), loggers  # faust's own lines
    assert any(r["message"].startswith("dead-lettered ") and r["level"] == "WARNING" for r in records)
    alerts = [r for r in records if r["logger"] == "pipeline.agreement.stage" and r["message"].startswith("alert ")]
    assert alerts and all(f"on trace {r['trace_id']}:" in r["message"] for r in alerts)
