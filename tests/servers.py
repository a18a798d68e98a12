"""Scripted local HTTP servers standing in for Slack and PagerDuty in tests.

``ScriptedServer`` listens on 127.0.0.1 (an ephemeral port) in a background thread,
records every request, and answers from per-path-prefix queues of scripted ``Reply``s,
falling back to a default responder when a queue is empty. ``AlertingServer`` is one with
the Slack Web API, Slack incoming-webhook and PagerDuty Events v2 fakes as its default::

    with AlertingServer() as server:
        settings = AlertingSettings(slack_base_url=server.slack_base_url, pagerduty_url=server.pagerduty_url, ...)
        server.script(SLACK_POST_PATH, Reply(429, {"Retry-After": "1"}, {"ok": False, "error": "ratelimited"}))
        server.set_down()  # every request gets 503 until server.set_up()
        ...
        posts = server.wait_for(2, path_prefix=SLACK_POST_PATH)
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import parse_qsl

SLACK_API_PREFIX = "/api/"
SLACK_POST_PATH = "/api/chat.postMessage"
SLACK_WEBHOOK_PREFIX = "/services/"
PAGERDUTY_PATH = "/v2/enqueue"


@dataclass(frozen=True)
class Request:
    """One request as the server saw it.

    ``headers`` has lower-case names; ``body`` is parsed JSON, a dict of form fields, the
    raw bytes of a protobuf body (OTLP/HTTP), or the raw text; ``received_at`` is
    ``time.monotonic()`` when the request arrived.
    """

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    received_at: float


@dataclass(frozen=True)
class Reply:
    """A scripted response; a ``body`` that is not ``str`` or ``bytes`` is sent as JSON.

    ``headers`` may override ``Content-Type`` (spelled so); ``delay`` seconds pass before
    the reply is sent (a slow server, for client timeouts).
    """

    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)
    body: Any = b""
    delay: float = 0.0


Responder = Callable[[Request], Reply]


def _not_found(request: Request) -> Reply:
    return Reply(404, body="not found")


def _parse_body(raw: bytes, content_type: str) -> Any:
    if "protobuf" in content_type:
        return raw
    text = raw.decode("utf-8", errors="replace")
    if "json" in content_type:
        return json.loads(text) if text else None
    if "x-www-form-urlencoded" in content_type:
        return dict(parse_qsl(text, keep_blank_values=True))
    return text


def _encode(body: Any) -> tuple[bytes, str]:
    if isinstance(body, bytes):
        return body, "application/octet-stream"
    if isinstance(body, str):
        return body.encode(), "text/plain; charset=utf-8"
    return json.dumps(body).encode(), "application/json; charset=utf-8"


class ScriptedServer:
    """A local HTTP server answering from scripted replies; use as a context manager."""

    def __init__(self, default: Responder = _not_found, port: int = 0) -> None:
        self._default = default
        self._lock = threading.Condition()
        self._requests: list[Request] = []
        self._scripts: dict[str, deque[Reply]] = {}
        self._down: Reply | None = None
        self._httpd = ThreadingHTTPServer(("127.0.0.1", port), self._handler_class())
        self._httpd.daemon_threads = True
        # A short poll interval: shutdown() waits for the serving loop to notice it.
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, args=(0.05,), name="scripted-http", daemon=True
        )

    @property
    def url(self) -> str:
        """Base URL, e.g. ``http://127.0.0.1:40123`` (no trailing slash)."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> ScriptedServer:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()

    def script(self, path_prefix: str, *replies: Reply) -> None:
        """Queue replies for requests whose path starts with ``path_prefix``, used once each in order."""
        with self._lock:
            self._scripts.setdefault(path_prefix, deque()).extend(replies)

    def set_down(self, status: int = 503, headers: Mapping[str, str] | None = None) -> None:
        """Answer every request with ``status`` (scripts untouched) until ``set_up()``; requests are still recorded."""
        with self._lock:
            self._down = Reply(status, dict(headers or {}), "service unavailable")

    def set_up(self) -> None:
        """End ``set_down()``."""
        with self._lock:
            self._down = None

    def requests(self, path_prefix: str = "") -> list[Request]:
        """Requests received so far (those under ``path_prefix``), oldest first."""
        with self._lock:
            return [request for request in self._requests if request.path.startswith(path_prefix)]

    def wait_for(self, count: int, *, path_prefix: str = "", timeout: float = 10.0) -> list[Request]:
        """Block until ``count`` requests under ``path_prefix`` arrived and return them; AssertionError on timeout."""
        with self._lock:
            if not self._lock.wait_for(lambda: len(self.requests(path_prefix)) >= count, timeout):
                raise AssertionError(
                    f"{len(self.requests(path_prefix))} of {count} requests to {path_prefix!r} arrived"
                )
            return self.requests(path_prefix)

    def _respond(self, request: Request) -> Reply:
        with self._lock:
            self._requests.append(request)
            self._lock.notify_all()
            if self._down is not None:
                return self._down
            # The longest matching prefix with a reply left wins.
            for prefix in sorted(self._scripts, key=len, reverse=True):
                if request.path.startswith(prefix) and self._scripts[prefix]:
                    return self._scripts[prefix].popleft()
        return self._default(request)

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self._handle()

            def do_GET(self) -> None:
                self._handle()

            def _handle(self) -> None:
                received_at = time.monotonic()
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                headers = {name.lower(): value for name, value in self.headers.items()}
                body = _parse_body(raw, headers.get("content-type", ""))
                reply = server._respond(Request(self.command, self.path, headers, body, received_at))
                payload, content_type = _encode(reply.body)
                time.sleep(reply.delay)
                # A client that timed out has gone: the reply has nobody to go to.
                with contextlib.suppress(ConnectionError):
                    self.send_response(reply.status)
                    for name, value in {"Content-Type": content_type, **reply.headers}.items():
                        self.send_header(name, value)
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet: tests read ``requests()`` instead."""

        return Handler


def alerting_reply(request: Request) -> Reply:
    """The fakes' default answers: Slack ``chat.postMessage``, PagerDuty Events v2, and webhooks (any other POST)."""
    body = request.body if isinstance(request.body, dict) else {}
    if request.path.startswith(SLACK_POST_PATH):
        return Reply(200, body={"ok": True, "channel": body.get("channel", ""), "ts": f"{time.time():.6f}"})
    if request.path.startswith(SLACK_API_PREFIX):
        return Reply(200, body={"ok": True})
    if request.path.startswith(PAGERDUTY_PATH):
        event = {"status": "success", "message": "Event processed", "dedup_key": body.get("dedup_key", "")}
        return Reply(202, body=event)
    return Reply(200, body="ok")


class AlertingServer(ScriptedServer):
    """Slack Web API, Slack incoming webhooks and PagerDuty Events v2 on one local port."""

    def __init__(self) -> None:
        super().__init__(alerting_reply)

    def __enter__(self) -> AlertingServer:
        super().__enter__()
        return self

    @property
    def slack_base_url(self) -> str:
        """For ``AlertingSettings.slack_base_url``."""
        return self.url + SLACK_API_PREFIX

    @property
    def pagerduty_url(self) -> str:
        """For ``AlertingSettings.pagerduty_url``."""
        return self.url + PAGERDUTY_PATH

    def webhook_url(self, name: str = "T000/B000/hook") -> str:
        """An incoming-webhook URL (``RouteConfig.slack_webhook_url``), under ``SLACK_WEBHOOK_PREFIX``."""
        return f"{self.url}{SLACK_WEBHOOK_PREFIX}{name}"
