"""Secure connections to Kafka and ClickHouse: SASL/TLS and TLS settings handed to the clients (docs/operations.md).

Kafka settings (``kafka_security:``) reach faust (``broker_credentials``, an SSL context)
and every confluent-kafka client (``security.protocol``, ``sasl.*``, ``ssl.*``) alike, so
the worker, ``replay``, ``demo`` and ``doctor`` connect the same way. ClickHouse TLS
(``clickhouse_tls:``) goes to clickhouse-connect for ``https://`` DSNs; the DSN itself
may hold a password, so it is a secret and only :func:`redacted_dsn` of it is ever shown.
"""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, SecretStr, model_validator

KafkaProtocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
CLICKHOUSE_SCHEMES = ("chdb", "http", "https")  # what clickhouse-connect tells apart (chDB, HTTP, TLS)


class KafkaSecurity(BaseModel):
    """How to authenticate to the brokers and encrypt the connection.

    The password comes from ``HALLUWATCH_KAFKA_SECURITY__SASL_PASSWORD`` or a secret file
    (``HALLUWATCH_SECRETS_DIR``); it is never logged or printed.
    """

    model_config = ConfigDict(extra="forbid")

    protocol: KafkaProtocol = "PLAINTEXT"  # passed to faust and every confluent-kafka client
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] = "PLAIN"
    sasl_username: str = ""
    sasl_password: SecretStr | None = None  # HALLUWATCH_KAFKA_SECURITY__SASL_PASSWORD
    ssl_cafile: Path | None = None  # CA bundle; none: the system's trust store
    ssl_certfile: Path | None = None  # client certificate (mutual TLS)
    ssl_keyfile: Path | None = None  # the client certificate's key
    ssl_check_hostname: bool = True

    @model_validator(mode="after")
    def _sasl_has_credentials(self) -> KafkaSecurity:
        if self.sasl and not (self.sasl_username and self.sasl_password):
            raise ValueError(f"protocol {self.protocol} needs sasl_username and sasl_password")
        if (self.ssl_certfile is None) != (self.ssl_keyfile is None):
            raise ValueError("ssl_certfile and ssl_keyfile go together")
        return self

    @property
    def sasl(self) -> bool:
        """Whether the protocol authenticates with SASL."""
        return self.protocol.startswith("SASL")

    @property
    def tls(self) -> bool:
        """Whether the connection is encrypted."""
        return self.protocol.endswith("SSL")

    def password(self) -> str:
        """The SASL password in clear, for the client that sends it; empty without one."""
        return self.sasl_password.get_secret_value() if self.sasl_password else ""

    def ssl_context(self) -> ssl.SSLContext | None:
        """The TLS context for aiokafka (faust), or None without TLS."""
        if not self.tls:
            return None
        context = ssl.create_default_context(cafile=str(self.ssl_cafile) if self.ssl_cafile else None)
        context.check_hostname = self.ssl_check_hostname
        if self.ssl_certfile is not None:
            context.load_cert_chain(str(self.ssl_certfile), str(self.ssl_keyfile))
        return context

    def confluent_config(self) -> dict[str, Any]:
        """The librdkafka settings for confluent-kafka clients (merge into their config dict)."""
        config: dict[str, Any] = {"security.protocol": self.protocol}
        if self.sasl:
            config |= {
                "sasl.mechanism": self.sasl_mechanism,
                "sasl.username": self.sasl_username,
                "sasl.password": self.password(),
            }
        if self.tls:
            files = {"ssl.ca.location": self.ssl_cafile, "ssl.certificate.location": self.ssl_certfile,
                     "ssl.key.location": self.ssl_keyfile}  # fmt: skip
            config |= {key: str(path) for key, path in files.items() if path is not None}
            config["ssl.endpoint.identification.algorithm"] = "https" if self.ssl_check_hostname else "none"
        return config


class ClickHouseTLS(BaseModel):
    """TLS options for an ``https://`` ClickHouse DSN (ignored for embedded chDB)."""

    model_config = ConfigDict(extra="forbid")

    verify: bool = True  # check the server certificate; switch off only for a test server
    ca_cert: Path | None = None  # CA bundle; none: certifi's
    client_cert: Path | None = None  # mutual TLS
    client_cert_key: Path | None = None
    server_host_name: str = ""  # the name the certificate must carry, when it is not the DSN host

    def client_options(self, dsn: str) -> dict[str, Any]:
        """Keyword arguments for ``clickhouse_connect.get_client`` besides the DSN."""
        if not dsn.startswith("https://"):
            return {}
        # clickhouse-connect reads TLS from the port (443, 8443), not from the DSN's scheme:
        # https://host:8123 would otherwise go out as plain HTTP, password and all.
        options: dict[str, Any] = {"secure": True, "verify": self.verify}
        paths = {"ca_cert": self.ca_cert, "client_cert": self.client_cert, "client_cert_key": self.client_cert_key}
        options |= {name: str(path) for name, path in paths.items() if path is not None}
        if self.server_host_name:
            options["server_host_name"] = self.server_host_name
        return options


def redacted_dsn(dsn: str) -> str:
    """The DSN with any password (and query string, which may carry one) masked, for messages."""
    parts = urlsplit(dsn)
    if parts.password is None and not parts.query:
        return dsn
    netloc = parts.netloc
    if parts.password is not None:
        netloc = f"{parts.username or ''}:***@{parts.hostname or ''}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, "***" if parts.query else "", parts.fragment))


def checked_clickhouse_dsn(dsn: SecretStr) -> SecretStr:
    """``dsn`` if it is empty (embedded chDB) or names a scheme of :data:`CLICKHOUSE_SCHEMES` and, for a server, a host.

    clickhouse-connect reads only the host, port and credentials of any other URL and speaks
    HTTP to it (``postgres://u:p@h/db`` becomes ``http://h:8123``; ``nonsense`` becomes
    ``localhost:8123``), so a mistyped DSN would fail far from its cause. The message never
    quotes the DSN: it may hold a password.
    """
    value = dsn.get_secret_value()
    if not value:
        return dsn
    parts = urlsplit(value)
    if "://" not in value or parts.scheme not in CLICKHOUSE_SCHEMES:
        given = f"scheme {parts.scheme}://" if "://" in value else "no scheme"
        accepted = ", ".join(f"{scheme}://" for scheme in CLICKHOUSE_SCHEMES)
        raise ValueError(f"{given}; accepted: {accepted} (or empty: embedded chDB under data_dir)")
    if parts.scheme != "chdb" and not parts.hostname:
        raise ValueError(f"{parts.scheme}:// without a host")
    return dsn
