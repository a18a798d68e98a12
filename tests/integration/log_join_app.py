"""A faust app with only the log-join stage, driven end to end against a real broker.

Usage: ``python -m tests.integration.log_join_app BOOTSTRAP PREFIX INPUT_DIR OUTPUT``.
``INPUT_DIR`` holds ``spans.bin`` (an OTLP protobuf export request) and ``logs.jsonl`` (a
collector file-exporter logs file).  The app replays the logs to its logs topic as OTLP/JSON,
unkeyed as the collector sends them, plus one garbage message; hands the normalized LLM
calls to ``offer_spans`` as the spans stage would; waits until both logs messages are
handled and every held call is released; writes what it saw to ``OUTPUT`` (JSON) and
stops.  It runs in its own process: a faust worker owns its process's event loop and
signals.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import faust
from confluent_kafka import Producer
from faust.types import Message
from faust.worker import Worker

from detectors.llm_call import LLMCall
from pipeline.config.settings import load_settings
from pipeline.ingest.normalize import normalize_span
from pipeline.ingest.otlp_traces import Encoding, decode_traces, iter_spans
from pipeline.log_join.stage import LogJoinStage
from pipeline.tools.replay import read_logs_file, replay
from pipeline.worker.app import faust_broker_url

GARBAGE = b"\x00\xffnot OTLP logs"
WAIT_SECONDS = 60.0


def main(bootstrap: str, prefix: str, input_dir: Path, output: Path) -> None:
    """Run the stage until every held call came back released; write the outcome to ``output``."""
    settings = load_settings(
        kafka_bootstrap=bootstrap,
        kafka_logs_topic=f"{prefix}-logs",
        kafka_log_join_topic=f"{prefix}-log-join",
        kafka_topic_partitions=2,
        log_join_window_seconds=1.0,
        batch_max_wait_seconds=0.1,
    )
    app = faust.App(
        f"{prefix}-group",
        broker=faust_broker_url(bootstrap),
        store="memory://",
        autodiscover=False,
        web_enabled=False,
        datadir=str(input_dir / "faust"),
        topic_partitions=2,
        broker_session_timeout=6.0,
        broker_rebalance_timeout=3.0,
        broker_heartbeat_interval=1.0,
        broker_commit_interval=0.5,
        consumer_auto_offset_reset="earliest",
    )
    released: list[dict[str, Any]] = []
    dead_letters: list[str] = []

    async def on_release(calls: Sequence[LLMCall]) -> None:
        released.extend(call.to_dict() for call in calls)

    async def dead_letter(message: Message, reason_kind: str, reason: str) -> None:
        dead_letters.append(reason_kind)

    stage = LogJoinStage(app, settings.stream(), settings.log_join(), on_release, dead_letter)
    worker = Worker(app, loglevel="warn", quiet=True, redirect_stdouts=False)
    stopping: list[asyncio.Future[None]] = []

    async def drive() -> None:
        try:
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(None, _produce_logs, bootstrap, settings.kafka_logs_topic, input_dir)
            calls = [
                call
                for ctx in iter_spans(decode_traces((input_dir / "spans.bin").read_bytes()))
                if (call := normalize_span(ctx))
            ]
            ready = await stage.offer_spans(calls)
            deadline = loop.time() + WAIT_SECONDS
            while (stage.calls_released < stage.calls_held or stage.logs_messages_done < 2) and loop.time() < deadline:
                await asyncio.sleep(0.1)
            outcome = {
                "ready": [call.span_id for call in ready],
                "held": stage.calls_held,
                "released": released,
                "dead_letters": dead_letters,
                "logs_messages_done": stage.logs_messages_done,
            }
            output.write_text(json.dumps(outcome))
        finally:
            stopping.append(asyncio.ensure_future(worker.stop()))

    app.task(drive)
    with contextlib.suppress(SystemExit):
        worker.execute_from_commandline()


def _produce_logs(bootstrap: str, topic: str, input_dir: Path) -> None:
    logs = read_logs_file(input_dir / "logs.jsonl")
    replay(logs, bootstrap=bootstrap, topic=topic, encoding=Encoding.OTLP_JSON, keyed=True, progress=False)
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(topic, GARBAGE)
    producer.flush(30)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4]))
