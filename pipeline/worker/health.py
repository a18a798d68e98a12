"""The worker's HTTP endpoint: ``/metrics``, ``/healthz`` and the triage pages on one port (docs/operations.md).

``/healthz`` answers 200 once the worker has joined its consumer group and started its
agents (faust starts app tasks only after the first assignment and table recovery), and
503 before that and once shutdown began, so an orchestrator routes nothing to a worker
that is not consuming.  Consumer lag is read from faust's monitor at scrape time: the
log end offset it saw last minus the offset it committed last, per assigned partition.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Iterator
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server
from wsgiref.types import StartResponse, WSGIApplication, WSGIEnvironment

import faust
from prometheus_client import REGISTRY, make_wsgi_app
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from pipeline import metrics
from pipeline.ui.defences import with_security_headers

HEALTH_PATH = "/healthz"
METRICS_PATH = "/metrics"


class Readiness:
    """Whether the worker is consuming: started, and not shutting down."""

    def __init__(self, app: faust.App) -> None:
        self._app = app
        self.started = False
        self.stopping = False
        app.task(self._on_started)
        app.on_before_shutdown.connect(self._on_stopping)

    async def _on_started(self) -> None:
        self.started = True
        metrics.WORKER_READY.set(1)

    async def _on_stopping(self, sender: Any, /, *args: Any, **kwargs: Any) -> None:
        self.stopping = True
        metrics.WORKER_READY.set(0)

    @property
    def ready(self) -> bool:
        """True while the worker consumes: group joined, agents running, not stopping."""
        return self.started and not self.stopping

    def report(self) -> dict[str, Any]:
        """What ``/healthz`` says, as JSON."""
        status = "stopping" if self.stopping else "ok" if self.started else "starting"
        return {"status": status, "rebalancing": bool(self._app.rebalancing)}


class ConsumerLag(Collector):
    """``halluwatch_consumer_lag``: messages behind the log end, per topic partition, at scrape time."""

    def __init__(self, app: faust.App) -> None:
        self._app = app

    def collect(self) -> Iterable[GaugeMetricFamily]:
        """One sample per partition the worker has both read and committed."""
        family = GaugeMetricFamily(
            "halluwatch_consumer_lag",
            "Log end offset last seen minus offset committed, per consumed topic partition",
            labels=["topic", "partition"],
        )
        monitor = self._app.monitor
        committed = dict(monitor.tp_committed_offsets)  # copies: the event loop thread updates them
        for tp, end in dict(monitor.tp_end_offsets).items():
            if tp in committed:
                family.add_metric([tp.topic, str(tp.partition)], max(end - committed[tp], 0))
        yield family


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True  # a slow scraper never holds the process at exit


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Scrapes every few seconds would drown the worker's log."""


class WorkerEndpoint:
    """Serves ``/metrics``, ``/healthz`` and any ``pages`` (the triage UI) from a daemon thread until :meth:`close`."""

    def __init__(self, app: faust.App, host: str, port: int, pages: WSGIApplication | None = None) -> None:
        self._pages = pages
        routed = with_security_headers(self._route)  # metrics and health too: one policy for the whole port
        self._server = make_server(host, port, routed, _ThreadingServer, handler_class=_QuietHandler)
        self.readiness = Readiness(app)
        self._lag = ConsumerLag(app)
        REGISTRY.register(self._lag)
        self._metrics = make_wsgi_app()
        self._thread = threading.Thread(target=self._server.serve_forever, name="metrics-http", daemon=True)
        self._thread.start()

    @property
    def port(self) -> int:
        """The port actually bound (useful when 0 was asked for)."""
        return int(self._server.server_address[1])

    def _route(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO")
        if path == HEALTH_PATH:
            return self._health(start_response)
        if path == METRICS_PATH or self._pages is None:
            metrics_body: Iterable[bytes] = self._metrics(environ, start_response)
            return metrics_body
        return self._pages(environ, start_response)

    def _health(self, start_response: StartResponse) -> Iterator[bytes]:
        body = json.dumps(self.readiness.report()).encode()
        status = "200 OK" if self.readiness.ready else "503 Service Unavailable"
        start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
        yield body

    def close(self) -> None:
        """Stop serving and forget the lag collector (a later worker in this process registers its own)."""
        self._server.shutdown()
        self._server.server_close()
        REGISTRY.unregister(self._lag)
