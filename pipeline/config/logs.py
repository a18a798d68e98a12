"""Where a command's log goes and how it reads: text for people, or one JSON object per line.

One handler on the root logger writes to stderr, and every logger reaches it: ours, faust's and
mode's (the worker keeps mode from installing handlers of its own), aiokafka's, librdkafka's
(pipeline/tools/kafka_clients.py) and Python's warnings.  JSON lines (``log_format: json``) carry
timestamp, level, logger, message, the trace id where the call passed one
(``extra={"trace_id": ...}``) and the exception text if any, for Loki or any log shipper.
Neither format scrubs secrets itself: the scrubber of
:mod:`pipeline.config.secrets` has masked message and traceback when the record was made.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Literal

LogFormat = Literal["text", "json"]
LogLevel = Literal["debug", "info", "warn", "error"]
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
TRACE_ID = "trace_id"  # the record attribute ``extra={"trace_id": ...}`` sets


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line (newlines in messages and tracebacks are escaped)."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as a JSON object."""
        entry = {
            "timestamp": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        trace_id = getattr(record, TRACE_ID, None)
        if trace_id:
            entry[TRACE_ID] = str(trace_id)
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            entry["exception"] = record.exc_text
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json.dumps(entry, ensure_ascii=False)


def configure_logging(level: LogLevel, log_format: LogFormat) -> None:
    """Send every log record at ``level`` or above to stderr in ``log_format``.

    Like :func:`logging.basicConfig`, it leaves a root logger that already has handlers alone
    (a test runner's).
    """
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT))
    logging.basicConfig(level=logging.WARNING if level == "warn" else level.upper(), handlers=[handler])
    logging.captureWarnings(True)  # a library's warning is a log line too, in the same format
