"""Log lines as a command writes them: text by default, one scrubbed JSON object per line on request.

Each case runs a fresh interpreter (a test runner owns this process's root logger) that loads
settings the way every command does and logs through faust's and mode's loggers as well as ours.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

SECRET = "hunter2-canary"
ENV = {"HALLUWATCH_CLICKHOUSE_DSN": f"http://halluwatch:{SECRET}@clickhouse:8123"}
LOGGING = textwrap.dedent(f"""
    import logging, warnings
    from mode import Service
    from pipeline.cli import configured

    configured(None)
    logging.getLogger("faust.transport.drivers.aiokafka").warning("fetch failed: %s", "bad password {SECRET}")
    Service().log.info("starting %d stages", 4)  # mode's own logger, as faust's services log
    logging.getLogger("pipeline.agreement.stage").info("alert on trace %s", "4bf9", extra={{"trace_id": "4bf9"}})
    try:
        raise ConnectionError("refused: password {SECRET}")
    except ConnectionError:
        logging.getLogger("pipeline.sinks.clickhouse").exception("insert of %d rows failed", 3)
    warnings.warn("an old API", DeprecationWarning, stacklevel=1)
    logging.getLogger("pipeline").debug("below the level")
""")


def _run(**env: str) -> list[str]:
    completed = subprocess.run(
        [sys.executable, "-W", "always", "-c", LOGGING], capture_output=True, text=True, timeout=120,
        env={**{k: v for k, v in os.environ.items() if not k.startswith("HALLUWATCH_")}, **ENV, **env},
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout == ""
    return completed.stderr.splitlines()


def test_json_logs_are_one_scrubbed_object_per_line_for_every_logger():
    lines = _run(HALLUWATCH_LOG_FORMAT="json")
    records = [json.loads(line) for line in lines]  # every line, faust's and mode's too
    assert [(r["level"], r["logger"]) for r in records] == [
        ("WARNING", "faust.transport.drivers.aiokafka"),
        ("INFO", "mode.services"),
        ("INFO", "pipeline.agreement.stage"),
        ("ERROR", "pipeline.sinks.clickhouse"),
        ("WARNING", "py.warnings"),
    ]
    assert all(set(r) >= {"timestamp", "level", "logger", "message"} for r in records)
    assert records[0]["message"] == "fetch failed: bad password ***"
    assert records[1]["message"] == "[^Service]: starting 4 stages"
    assert records[2]["trace_id"] == "4bf9" and "trace_id" not in records[0]
    assert records[3]["message"] == "insert of 3 rows failed"
    assert records[3]["exception"].endswith("ConnectionError: refused: password ***")
    assert SECRET not in "\n".join(lines)


def test_text_stays_the_default():
    lines = _run()
    assert lines[0].endswith(" WARNING faust.transport.drivers.aiokafka: fetch failed: bad password ***")
    assert "Traceback (most recent call last):" in lines and SECRET not in "\n".join(lines)
