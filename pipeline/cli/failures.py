"""Every command's failure as a few plain lines: what is wrong, where it was set, what to do.

The command group hands each exception a command lets through to :func:`explain`. Our own
errors that already say all that pass as they are; a connection that failed is named by
service, address and the setting it came from, with the reason in a word; anything else is a
fault of ours: one line saying so, its traceback behind ``--debug`` (and in the log at DEBUG).
Commands raise and let through; they do not word a library's exceptions themselves.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import urlsplit

from pipeline.config.connections import redacted_dsn
from pipeline.config.secrets import scrub, secret_values
from pipeline.config.settings import Settings

_KAFKA_HINTS = {
    "connection refused": "start the broker, or fix the host and port",
    "timed out": "check the host, the port and any firewall between here and the broker",
    "name not resolved": "check the host name",
    "TLS failed": "check kafka_security (ssl_ca_location, security_protocol) against the broker's listener",
    "authentication failed": "check kafka_security's SASL mechanism, user and password",
}
_HTTP_HINTS = {
    "connection refused": "start it there, or fix the host and port",
    "timed out": "check the host, the port and any firewall between here and there",
    "name not resolved": "check the host name",
    "TLS failed": "check the scheme (http or https), the port and the CA file",
    "authentication failed": "check the user and password",
}


@dataclass(frozen=True)
class _Service:
    name: str  # "ClickHouse"
    address: str  # host:port, no credentials
    source: str  # the setting it came from, in the user's words
    hints: dict[str, str]


def explain(error: BaseException, settings: Settings | None) -> str | None:
    """Plain lines for a failure the user can fix, secrets masked; None for a fault of ours."""
    text = _connection(error, settings) or _plain(error)
    if text is None:
        return None
    return scrub(text, secret_values(settings)) if settings is not None else text


def fault_line(error: BaseException, command: str, settings: Settings | None) -> str:
    """The one line of a fault of ours: which command, the exception (secrets masked), how to see its traceback."""
    shown = f"{type(error).__name__}: {error}".splitlines()[0][:300]
    shown = scrub(shown, secret_values(settings)) if settings is not None else shown
    return (f"halluwatch {command} failed on a fault of its own ({shown}), not on anything in your setup; "
            f"`halluwatch --debug {command} ...` shows the traceback to report")  # fmt: skip


def _plain(error: BaseException) -> str | None:
    """The message of our errors that name what to fix; Slack's refusal in its word; a file the system refused."""
    if isinstance(error, _plain_errors()):
        return str(error)
    from slack_sdk.errors import SlackApiError

    if isinstance(error, SlackApiError):  # its own code: channel_not_found, invalid_auth, ...
        return (f"Slack refused the request: {error.response.get('error')}; check alerting.slack_bot_token "
                "and that the bot is in the channel")  # fmt: skip
    if isinstance(error, OSError) and error.filename and error.strerror:
        return f"{error.filename}: {error.strerror.lower()}"
    return None


def _plain_errors() -> tuple[type[BaseException], ...]:
    # Imported here: --help and a bad --config must not load chDB, faust or the detectors.
    from detectors.baselines import BaselineError
    from detectors.extras import MissingExtra
    from detectors.profiles import ProfileMismatch
    from pipeline.alerting.silences import SilenceInputError
    from pipeline.calibration.proposals import NoVerdicts
    from pipeline.config.data_dirs import UnwritableDirectory
    from pipeline.config.settings import ConfigError
    from pipeline.offline.calibrate import CalibrationError
    from pipeline.offline.evaluate import EvalInputError
    from pipeline.offline.human_labels import LabelFileError
    from pipeline.offline.train import TrainingDataError
    from pipeline.rate.maps import UnknownVersion
    from pipeline.sinks.clickhouse import ClickHouseUnreachable, NoStore
    from pipeline.sinks.erasure import ErasureRefused
    from pipeline.stream.dropped_records import FaustInternalsChanged
    from pipeline.tools.replay import TraceFileError
    from pipeline.ui.serve import CannotListen, UnmigratedDatabase

    return (
        BaselineError, MissingExtra, ProfileMismatch, SilenceInputError, NoVerdicts, UnwritableDirectory, ConfigError,
        CalibrationError, EvalInputError, LabelFileError, TrainingDataError, UnknownVersion, NoStore, ErasureRefused,
        FaustInternalsChanged, TraceFileError, CannotListen, UnmigratedDatabase, ClickHouseUnreachable,
    )  # fmt: skip


def _connection(error: BaseException, settings: Settings | None) -> str | None:
    """``cannot reach ClickHouse at host:port (from SOURCE): refused; what to do``, or None if no connection failed."""
    chain = list(_chain(error))
    service = _service(chain, settings)
    if service is None:
        return None
    reason = _reason(chain)
    if reason is None:
        if service.name != "ClickHouse":
            return None
        answer = next((str(e) for e in chain if type(e).__module__.startswith("clickhouse_connect")), str(error))
        first = answer.strip().splitlines()[0] if answer.strip() else type(error).__name__
        return f"ClickHouse at {service.address} (from {service.source}) refused the request: {first[:300]}"
    waited = max((getattr(e, "waited_seconds", 0.0) for e in chain), default=0.0)  # a worker retries at start
    retried = f", for {waited:g}s (clickhouse_startup_wait_seconds)" if waited else ""
    return (f"cannot reach {service.name} at {service.address} (from {service.source}): {reason}{retried}; "
            f"{service.hints[reason]} in {service.source}")  # fmt: skip


def _chain(error: BaseException) -> Iterator[BaseException]:
    """The error, its causes and contexts, and what urllib3 and httpx wrap (``reason``, ``args``)."""
    seen: set[int] = set()
    todo = [error]
    while todo:
        current = todo.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        inner = [current.__cause__, current.__context__, getattr(current, "reason", None), *current.args]
        todo.extend(each for each in inner if isinstance(each, BaseException))


def _service(chain: list[BaseException], settings: Settings | None) -> _Service | None:
    modules = {type(e).__module__.split(".")[0] for e in chain}
    names = {type(e).__name__ for e in chain}
    if settings is None:
        return None
    if "clickhouse_connect" in modules or "ClickHouseUnreachable" in names:
        dsn = settings.resolved_clickhouse_dsn
        if dsn.startswith("chdb://"):
            return None  # embedded: no network; its own errors say what holds it
        source = settings.source_of("clickhouse_dsn") or "clickhouse_dsn"
        return _Service("ClickHouse", _host_port(dsn, {"http": 8123, "https": 8443}), source, _HTTP_HINTS)
    if "confluent_kafka" in modules or "ReplayError" in names or "aiokafka" in modules:
        return _Service("Kafka", settings.kafka_bootstrap, settings.source_of("kafka_bootstrap") or
                        "kafka_bootstrap (its default)", _KAFKA_HINTS)  # fmt: skip
    if "openai" in modules:
        base_url = settings.consistency.llm.base_url or "the openai library's default endpoint"
        source = settings.source_of("consistency", "llm", "base_url") or "consistency.llm.base_url"
        return _Service("the judge's endpoint", _host_port(base_url, {"http": 80, "https": 443}), source, _HTTP_HINTS)
    return None


def _reason(chain: list[BaseException]) -> str | None:
    """Connection refused, timed out, name not resolved, TLS failed or authentication failed; None for none of them."""
    for error in chain:
        if isinstance(error, ssl.SSLError):
            return "TLS failed"
        if isinstance(error, ConnectionRefusedError):
            return "connection refused"
        if isinstance(error, socket.gaierror):
            return "name not resolved"
        if isinstance(error, TimeoutError):
            return "timed out"
    # Drivers that keep only the words: librdkafka, urllib3's NameResolutionError, ClickHouse's codes.
    text = " ".join(str(error) for error in chain).lower()
    for reason, words in _REASON_WORDS:
        if any(word in text for word in words):
            return reason
    return None


_REASON_WORDS = (
    (
        "authentication failed",
        (
            "authentication failed",
            "code: 516",
            "sasl authentication",
            "unauthorized",
            "error code: 401",
            "invalid_api_key",
        ),
    ),
    ("TLS failed", ("ssl", "certificate", "handshake")),
    ("name not resolved", ("failed to resolve", "name or service not known", "temporary failure in name resolution")),
    ("connection refused", ("connection refused", "econnrefused", "connect failed")),
    ("timed out", ("timed out", "timeout")),
    # librdkafka with every broker down and no word why: nothing answered at the address.
    ("connection refused", ("all brokers down", "broker transport failure")),
)


def _host_port(url: str, default_ports: dict[str, int]) -> str:
    """``host:port`` of a URL, without user or password; the URL redacted when it has no host."""
    parts = urlsplit(url)
    if not parts.hostname:
        return redacted_dsn(url)
    default = default_ports.get(parts.scheme)
    try:
        port = parts.port or default
    except ValueError:
        port = None
    return f"{parts.hostname}:{port}" if port else parts.hostname
