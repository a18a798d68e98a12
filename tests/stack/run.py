"""``make stack``: the real stack started once, a few hundred traces through the collector, and a summary.

    .venv/bin/python -m tests.stack.run [--traces 300] [--interval 4.0] [--json FILE]

The topology of the end-to-end test (tests/stack/topology.py): collector-contrib on
infra/otel-collector.yaml, Apache Kafka as compose runs it, two `halluwatch worker` processes
configured by the compose file's environment, the fake Slack and PagerDuty. Traffic is the
example traces with fresh ids, one round of them every ``--interval`` seconds over OTLP/gRPC
and OTLP/HTTP in turn, exported by the OpenTelemetry SDK. Alert latency is measured on this
steady traffic, from the SDK's export to the Slack request. One more round is then sent
while a worker is SIGKILLed and the broker restarts. Exits 1 when a call was lost or stored
twice, or an alert missed, unexpected or repeated; the logs of every process stay in the
directory it names then.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from opentelemetry.proto.trace.v1.trace_pb2 import TracesData

from detectors.config import EmbeddingConfig, default_model_cache
from detectors.models.embeddings import Embedder
from pipeline.config.settings import MODEL_CACHE_ENV
from pipeline.tools.example_traces.examples import EXAMPLES
from tests.integration.compose_env import tail
from tests.stack import collector, kafka
from tests.stack.cache import say
from tests.stack.summary import StackSummary, summarize
from tests.stack.topology import Stack, running_stack
from tests.stack.traffic import Protocol, send_examples


def steady_traffic(stack: Stack, rounds: int, interval: float, exported: dict[str, float]) -> list[TracesData]:
    """``rounds`` rounds of the examples, ``interval`` seconds apart, alternating OTLP/gRPC and OTLP/HTTP."""
    ports = {Protocol.GRPC: stack.addresses.otlp_grpc_port, Protocol.HTTP: stack.addresses.otlp_http_port}
    sent: list[TracesData] = []
    for i in range(rounds):
        protocol = (Protocol.GRPC, Protocol.HTTP)[i % 2]
        started = time.monotonic()
        sent.extend(send_examples(EXAMPLES, protocol, f"127.0.0.1:{ports[protocol]}", exported))
        say(f"round {i + 1}/{rounds}: {len(sent)} traces sent over {protocol}")
        time.sleep(max(0.0, interval - (time.monotonic() - started)))
    return sent


def run(traces: int, interval: float, workdir: Path) -> StackSummary:
    cache = Path(os.environ.setdefault(MODEL_CACHE_ENV, str(default_model_cache())))
    Embedder(EmbeddingConfig(cache_dir=cache)).load()  # made once, before two workers start at the same time
    names = {
        "collector": {"name": collector.manifest()["dist"]["name"], "version": collector.version()},
        "kafka": {"name": "Apache Kafka (KRaft)", "version": kafka.version()},
    }
    with kafka.KafkaBroker(kafka.kafka_jars(), workdir / "kafka") as broker:
        say(f"Apache Kafka {kafka.version()} at {broker.bootstrap}; starting the collector and two workers")
        otelcol = collector.collector_binary()
        with running_stack(broker, otelcol, workdir / "chdb", cache, workdir) as stack:
            exported: dict[str, float] = {}
            sent = {"otelcol steady": steady_traffic(stack, math.ceil(traces / len(EXAMPLES)), interval, exported)}
            stack.wait("the steady traffic settled", lambda: stack.settled(sent), timeout=600)
            rereads = {worker.name: worker.rereads() for worker in stack.workers}
            for name, lines in rereads.items():
                for line in lines:
                    say(f"{name} re-read a partition in the steady traffic: {line}")
            say("steady traffic judged and alerted; one more round through a worker SIGKILL and a broker restart")
            http = f"127.0.0.1:{stack.addresses.otlp_http_port}"
            stack.through_faults(lambda: send_examples(EXAMPLES, Protocol.HTTP, http), sent)
            for worker in stack.workers:
                assert worker.stop() == 0, f"{worker.name} did not exit cleanly on SIGTERM:\n{tail(worker.log)}"
            return summarize(stack, sent, exported, **names, rereads_in_steady_traffic=sum(map(len, rereads.values())))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces", type=int, default=300, help="traces of steady traffic (whole rounds of examples)")
    parser.add_argument("--interval", type=float, default=4.0, help="seconds between rounds (under two workers' pace)")
    parser.add_argument("--json", type=Path, help="also write the summary to this file as one JSON object")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="halluwatch-stack-"))
    try:
        summary = run(args.traces, args.interval, workdir)
    except BaseException:
        say(f"the run failed; logs of every process are in {workdir}")
        raise
    problems = summary.problems()
    print(json.dumps(summary.to_json(), indent=2))
    if args.json:
        args.json.write_text(json.dumps(summary.to_json(), indent=2) + "\n")
        say(f"summary written to {args.json}")
    if problems:
        say(f"FAILED: {'; '.join(problems)}; logs of every process are in {workdir}")
        return 1
    shutil.rmtree(workdir, ignore_errors=True)
    say("every call stored once, every alert delivered once")
    return 0


if __name__ == "__main__":
    sys.exit(main())
