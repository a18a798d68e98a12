"""One typed settings model for every command.

Values come, highest priority first, from ``HALLUWATCH_*`` environment variables, then
the YAML file named by ``HALLUWATCH_CONFIG`` (or ``--config``), then the defaults below,
which run everything embedded on one machine.  Invalid values fail at start-up with the
offending field named, never halfway through a stream.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import AfterValidator, BeforeValidator, Field, PrivateAttr, SecretStr, ValidationError, model_validator
from pydantic_settings import (
    BaseSettings,
    NestedSecretsSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
)

from detectors.config import default_model_cache
from detectors.settings import DetectorSettings
from detectors.thresholds import load_thresholds
from pipeline.config.alerting import AlertingSettings
from pipeline.config.connections import ClickHouseTLS, KafkaSecurity, checked_clickhouse_dsn
from pipeline.config.content_policy import (
    DEFAULT_MAX_CALL_CHARS,
    LEGACY_MODES,
    ContentLimits,
    ContentMode,
    ContentPolicies,
    ContentTable,
)
from pipeline.config.env_names import unknown_settings_message
from pipeline.config.escalation import EscalationSettings
from pipeline.config.logs import LogFormat, LogLevel
from pipeline.config.monitors import MonitorConfig, check_monitor_names
from pipeline.config.policy import Policies, check_policies
from pipeline.config.retention import RetentionSettings
from pipeline.config.review import ReviewSettings
from pipeline.config.sampled import ConsistencySettings
from pipeline.config.sources import Sources
from pipeline.config.stream import JoinConfig, LogJoinSettings, StreamSettings
from pipeline.config.strong_secrets import StrongSecret
from pipeline.config.ui import UISettings
from pipeline.config.watchdog_timing import check_commit_interval

DEFAULT_DATA_DIR = Path(".halluwatch")
ENV_PREFIX = "HALLUWATCH_"
MODEL_CACHE_ENV = "HALLUWATCH_MODEL_CACHE"  # where models are kept: harmless to share with any run
DATA_DIR_ENV = "HALLUWATCH_DATA_DIR"
# Read when no config file is named: a data directory that brings its settings (the demo's) is used as it is.
DATA_DIR_SETTINGS = "settings.yaml"
# Secret files: one file per setting, named like its variable (halluwatch_alerting__slack_bot_token).
SECRETS_DIR_ENV = "HALLUWATCH_SECRETS_DIR"
CONFIG_ENV = "HALLUWATCH_CONFIG"
PRODUCE_HEADROOM_BYTES = 64 * 1024  # record-batch overhead and dead-letter headers above max_message_bytes

# "full" and "none", the names of earlier releases, still read as "store" and "drop".
Mode = Annotated[ContentMode, BeforeValidator(lambda value: LEGACY_MODES.get(value, value))]


class ConfigError(ValueError):
    """The configuration is unusable; the message names the field and the source."""


class Settings(BaseSettings):
    """Everything a halluwatch process needs to know."""

    # An empty variable counts as unset: deployments template every variable (compose files, `.env`
    # exports, Helm values) and leave the unused ones empty.
    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_nested_delimiter="__", secrets_nested_delimiter="__", extra="forbid",
        env_ignore_empty=True,
    )  # fmt: skip

    # What load_settings read them from: errors about a setting name its source.
    _sources: Sources = PrivateAttr(default_factory=lambda: Sources({}))

    # Where relative paths (embedded ClickHouse, worker state) live.
    data_dir: Path = DEFAULT_DATA_DIR

    kafka_bootstrap: str = "127.0.0.1:9092"  # bootstrap servers, comma-separated
    kafka_group_id: str = "halluwatch"  # the consumer group: scale out by running more workers in it
    kafka_input_topic: str = "otlp_spans"  # the collector's kafka exporter topic
    # "auto" sniffs each value (JSON starts with "{", or "[" as Rotel writes it); name the encoding to be strict.
    kafka_input_encoding: Literal["auto", "otlp_proto", "otlp_json"] = "auto"
    kafka_findings_topic: str = "halluwatch.findings"
    kafka_dlq_topic: str = "halluwatch.dlq"
    # Unkeyed (mixed-trace) batches are split and re-produced here, keyed by trace id.
    kafka_rekeyed_topic: str = "halluwatch.spans_by_trace"
    # Agreement alerts (key = trace id), failed deliveries awaiting retry, and alerts given up on.
    kafka_alerts_topic: str = "halluwatch.alerts"
    kafka_alerts_retry_topic: str = "halluwatch.alerts.retry"
    kafka_alerts_dlq_topic: str = "halluwatch.alerts.dlq"
    # GenAI content that instrumentations log instead of putting it on the span (openai-v2):
    # the collector's logs topic (unkeyed, encoding as kafka_input_encoding), and the join's
    # input, keyed by trace id: GenAI log records and the content-free LLM spans awaiting them.
    kafka_logs_topic: str = "otlp_logs"
    kafka_log_join_topic: str = "halluwatch.log_join"
    # How long a content-free LLM span waits for its log records before it is judged without content.
    log_join_window_seconds: float = Field(default=5.0, gt=0)
    # Bounds of the join state: span entries held (oldest released early beyond it), and how long
    # log records wait for their span (longer than the slowest LLM call: input messages are logged
    # when the call starts, the span is exported when it ends) and released spans are remembered.
    log_join_max_entries: int = Field(default=50_000, ge=1)
    log_join_max_age_seconds: float = Field(default=600.0, gt=0)
    log_join_max_records_per_span: int = Field(default=256, ge=1)
    # How long a call without sources, whose message did not hold its whole trace, waits in the
    # join for retriever and tool spans of its trace from other messages; 0: never waits (facts
    # already held are still attached).
    trace_facts_window_seconds: float = Field(default=2.0, ge=0)
    kafka_topic_partitions: int = Field(default=8, ge=1)
    kafka_max_poll_records: int = Field(default=500, ge=1)
    # Back-pressure bounds, what a worker holds ahead of processing while ClickHouse or the
    # broker is down: records fetched but not yet taken, per stream (faust's
    # stream_buffer_maxsize; consumption of a partition pauses when its stream is full), and
    # bytes fetched per partition (aiokafka's max_partition_fetch_bytes).
    kafka_max_buffered_messages: int = Field(default=4096, ge=1)
    kafka_max_fetch_bytes: int = Field(default=1024**2, ge=1024)
    kafka_session_timeout_seconds: float = Field(default=30.0, gt=0)
    kafka_rebalance_timeout_seconds: float = Field(default=30.0, gt=0)
    kafka_heartbeat_interval_seconds: float = Field(default=3.0, gt=0)
    # Short enough for the dropped-records watchdog's idle window (pipeline/config/watchdog_timing.py).
    kafka_commit_interval_seconds: Annotated[float, AfterValidator(check_commit_interval)] = Field(default=2.0, gt=0)
    # A broker request unanswered this long is abandoned and sent again on a new connection.
    # At least the session timeout (faust insists); far below faust's 90 s, because a fetch
    # a broker never answers stalls every stage of the worker until it times out.
    kafka_request_timeout_seconds: float = Field(default=40.0, gt=0)

    # Empty: embedded chDB under data_dir/clickhouse; else chdb:///PATH, http://HOST:PORT or https://HOST:PORT
    # (other schemes are refused). A secret: it may hold the password.
    clickhouse_dsn: Annotated[SecretStr, AfterValidator(checked_clickhouse_dsn)] = SecretStr("")
    clickhouse_tls: ClickHouseTLS = Field(default_factory=ClickHouseTLS)
    # How long a starting worker waits for ClickHouse (connect and migrate, retried with backoff)
    # before it exits with an error: long enough to ride out a restart, short enough to notice.
    clickhouse_startup_wait_seconds: float = Field(default=120.0, ge=0)
    # Kafka SASL/TLS (secret: HALLUWATCH_KAFKA_SECURITY__SASL_PASSWORD).
    kafka_security: KafkaSecurity = Field(default_factory=KafkaSecurity)
    # An identifier: it is interpolated into SQL (ClickHouse takes no parameters for names).
    clickhouse_database: str = Field(default="halluwatch", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    # A ClickHouse cluster (remote_servers) to create every table on: DDL ON CLUSTER, Replicated engines, one
    # shard. Empty: a single server, or ClickHouse Cloud (which replicates by itself). Interpolated into SQL.
    clickhouse_cluster: str = Field(default="", pattern=r"^([A-Za-z_][A-Za-z0-9_.-]*)?$")
    # How long content and rows are kept, and the attributes erasure selects by (`halluwatch migrate` applies it).
    retention: RetentionSettings = Field(default_factory=RetentionSettings)
    # What of the prompt/answer/context text reaches each table, topic and message (pipeline/config/content_policy.py).
    content_mode: Mode = "store"
    content_modes: dict[ContentTable, Mode] = Field(default_factory=dict)
    content_hmac_key: StrongSecret = None  # needed by "hash"; random (placeholders are refused)
    content_phone_region: str = Field(default="US", pattern=r"^[A-Z]{2}$")  # phone numbers without a country code
    # Text one call brings to the detectors (answer first); beyond it is cut, and findings say so.
    max_call_chars: int = Field(default=DEFAULT_MAX_CALL_CHARS, ge=1000)

    # Batch size and linger of one ClickHouse write (and one offset commit behind it).
    batch_max_messages: int = Field(default=500, ge=1)
    batch_max_wait_seconds: float = Field(default=0.5, gt=0)
    detector_threads: int = Field(default=1, ge=1)  # the detector pool, off the event loop
    # Largest OTLP message taken (larger ones are dead-lettered): the collector's kafka exporter
    # and the broker's message.max.bytes are set to the same limit (infra/README.md, "Message size").
    max_message_bytes: int = Field(default=8 * 1024 * 1024, ge=1024)
    # Backoff while ClickHouse or the broker refuses writes; the batch is retried, never dropped.
    write_retry_max_seconds: float = Field(default=30.0, gt=0)
    # How long a dead letter is retried before it is given up: its coordinates (topic, partition,
    # offset) go to the error log and halluwatch_dead_letters_lost, and the partition moves on.
    dead_letter_timeout_seconds: float = Field(default=120.0, gt=0)

    # The ONNX embedding models (HALLUWATCH_MODEL_CACHE); detectors.embeddings.cache_dir, when set, wins.
    model_cache: Path = Field(default_factory=default_model_cache)
    thresholds_file: Path | None = None  # None: the built-in defaults
    # Per-model entropy baselines written by `halluwatch baseline` (confidence detector).
    baselines_file: Path | None = None
    metrics_port: int | None = Field(default=None, ge=0, le=65535)  # None: no /metrics endpoint
    metrics_host: str = "127.0.0.1"
    # Findings back to the trace UI (pipeline/sinks/findings_otlp.py): each finding as an OTLP
    # gen_ai.evaluation.result log record parented to the evaluated span, POSTed to this OTLP/HTTP
    # logs URL (e.g. http://otel-collector:4318/v1/logs). Empty: off. Best effort, never blocking.
    findings_otlp_endpoint: str = Field(default="", pattern=r"^(https?://\S+)?$")
    # Sent with every request (authentication: {authorization: "Basic ..."}); secrets, never logged.
    findings_otlp_headers: dict[str, SecretStr] = Field(default_factory=dict)
    findings_otlp_timeout_seconds: float = Field(default=10.0, gt=0)  # per batch sent, retries included
    findings_otlp_only_flagged: bool = True  # False: every finding, ok, skipped and error ones too
    log_level: LogLevel = "info"
    # "json": one JSON object per line (timestamp, level, logger, message, trace_id, exception) for a log shipper.
    log_format: LogFormat = "text"

    detectors: DetectorSettings = Field(default_factory=DetectorSettings)
    # Two-detector agreement, routes, Slack and PagerDuty (secrets: HALLUWATCH_ALERTING__SLACK_BOT_TOKEN...).
    alerting: AlertingSettings = Field(default_factory=AlertingSettings)
    # Rate monitors by name (pipeline/config/monitors.py): a group's flag rate against its own
    # baseline opens, updates and resolves one incident. None by default.
    monitors: Annotated[dict[str, MonitorConfig], AfterValidator(check_monitor_names)] = Field(default_factory=dict)
    # Sampled self-consistency and claims detectors: an OpenAI-compatible endpoint, off by default
    # (secrets: HALLUWATCH_CONSISTENCY__LLM__API_KEY, or consistency.llm.api_key_file).
    consistency: ConsistencySettings = Field(default_factory=ConsistencySettings)
    # Uncertain calls sent to the team's own model at consistency.llm, within a budget per application;
    # their alert waits for its answer. Off by default.
    escalation: EscalationSettings = Field(default_factory=EscalationSettings)
    # The triage pages: access, the Slack buttons and PagerDuty's webhooks (secrets:
    # HALLUWATCH_UI__TOKEN, HALLUWATCH_UI__SLACK_SIGNING_SECRET, HALLUWATCH_UI__PAGERDUTY_WEBHOOK_SECRET).
    ui: UISettings = Field(default_factory=UISettings)
    # The review queue's audit sample and the rate estimate (pipeline/rate/, `halluwatch rate`).
    review: ReviewSettings = Field(default_factory=ReviewSettings)
    # Per-application policies (pipeline/config/policy.py): detectors, thresholds, rules, routes,
    # content mode and sampling for the calls each selects; the rest comes from the settings above.
    policies: Policies = Field(default_factory=dict)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Environment beats the YAML file, which arrives as init arguments, which beats secret files."""
        return env_settings, init_settings, NestedSecretsSettingsSource(file_secret_settings)

    @model_validator(mode="after")
    def _request_outlasts_session(self) -> Settings:
        if self.kafka_request_timeout_seconds < self.kafka_session_timeout_seconds:
            raise ValueError(
                f"kafka_request_timeout_seconds ({self.kafka_request_timeout_seconds:g}) must be at least "
                f"kafka_session_timeout_seconds ({self.kafka_session_timeout_seconds:g})"
            )
        return self

    @model_validator(mode="after")
    def _monitors_use_known_routes(self) -> Settings:
        unknown = {name: m.route for name, m in self.monitors.items() if m.route not in self.alerting.routes}
        if unknown:
            named = ", ".join(f"{name} -> {route}" for name, route in sorted(unknown.items()))
            raise ValueError(f"monitors use routes that are not configured in alerting.routes: {named}")
        return self

    @model_validator(mode="after")
    def _model_cache_reaches_embeddings(self) -> Settings:
        embeddings = self.detectors.embeddings
        if "cache_dir" not in embeddings.model_fields_set:
            self.detectors.embeddings = embeddings = embeddings.model_copy(update={"cache_dir": self.model_cache})
        if embeddings.passage_store.path is None:
            store = embeddings.passage_store.model_copy(update={"path": self.data_dir / "passages.sqlite"})
            self.detectors.embeddings = embeddings.model_copy(update={"passage_store": store})
        return self

    @model_validator(mode="after")
    def _content_policies_build(self) -> Settings:
        self.content_policies()  # "hash" without a key fails here, at start-up
        return self

    @model_validator(mode="after")
    def _policies_fit(self) -> Settings:
        known = set(load_thresholds().by_detector)  # every detector has a built-in threshold
        check_policies(self.policies, known, set(self.alerting.routes), self.alerting.rules)
        return self

    @property
    def max_produce_bytes(self) -> int:
        """The largest record the worker produces: an accepted message re-keyed or dead-lettered, with headers."""
        return self.max_message_bytes + PRODUCE_HEADROOM_BYTES

    def source_of(self, *location: str) -> str:
        """Where the setting at ``location`` came from (its variable, secret file or config file key); "" a default."""
        return self._sources.of(location)

    @property
    def resolved_clickhouse_dsn(self) -> str:
        """The DSN to connect with: the configured one, or embedded chDB under ``data_dir``."""
        return self.clickhouse_dsn.get_secret_value() or f"chdb://{(self.data_dir / 'clickhouse').resolve()}"

    def content_policies(self) -> ContentPolicies:
        """The content policy of each table."""
        return ContentPolicies.of(
            self.content_mode, self.content_modes, self.content_hmac_key, self.content_phone_region
        )

    def content_limits(self) -> ContentLimits:
        """The cap on the text one call brings to the detectors."""
        return ContentLimits(self.max_call_chars)

    def stream(self) -> StreamSettings:
        """What every stage's Kafka loop shares."""
        return StreamSettings(
            self.batch_max_messages,
            self.batch_max_wait_seconds,
            self.write_retry_max_seconds,
            self.kafka_topic_partitions,
            self.content_policies(),
            tuple(self.retention.erasable_keys),
        )

    def log_join(self) -> LogJoinSettings:
        """The log join stage's part of the settings."""
        join = JoinConfig(
            self.log_join_window_seconds,
            self.log_join_max_entries,
            self.log_join_max_age_seconds,
            self.log_join_max_records_per_span,
            self.trace_facts_window_seconds,
        )
        return LogJoinSettings(
            self.kafka_logs_topic, self.kafka_log_join_topic, self.kafka_input_encoding, self.max_message_bytes, join
        )


def load_settings(
    config_path: Path | None = None, pinned: Mapping[str, Any] | None = None, pinned_by: str = "", **overrides: Any
) -> Settings:
    """Build settings from env, the YAML file (argument or ``HALLUWATCH_CONFIG``) and overrides.

    ``pinned`` values beat every source, the environment too (a command-line option, named
    ``pinned_by`` where errors name a setting's source).
    """
    pinned = pinned or {}
    secrets_dir = os.environ.get(SECRETS_DIR_ENV)
    unknown = unknown_settings_message(
        os.environ, Path(secrets_dir) if secrets_dir else None, Settings, (CONFIG_ENV, SECRETS_DIR_ENV)
    )
    if unknown:
        raise ConfigError(unknown)
    if secrets_dir and not Path(secrets_dir).is_dir():
        raise ConfigError(f"{SECRETS_DIR_ENV}={secrets_dir} is not a directory: name the folder of the secret files")
    path = config_path or _env_config_path() or _data_dir_settings({**overrides, **pinned})
    named_by = "--config" if config_path else CONFIG_ENV if _env_config_path() else "the data directory's own"
    file_values = _read_yaml(path, named_by) if path else {}
    sources = Sources(os.environ, Path(secrets_dir) if secrets_dir else None, path, file_values,
                      dict.fromkeys(pinned, pinned_by))  # fmt: skip
    try:
        # _secrets_dir is BaseSettings' own init argument, unknown to the plugin that types the fields.
        settings = Settings(_secrets_dir=secrets_dir or None, **{**file_values, **overrides})  # type: ignore[call-arg]
    except ValidationError as exc:
        raise ConfigError(f"invalid configuration:{_describe(exc, sources)}") from None
    except SettingsError as exc:  # a variable of a list or mapping setting that is not JSON
        field = re.search(r'field "(\w+)"', str(exc))
        names = sources.not_json(Settings, field[1]) if field else []
        name = " and ".join(names) or (f"a {ENV_PREFIX}{field[1].upper()} variable" if field else "a variable")
        raise ConfigError(
            f"invalid configuration: {name} is not JSON (a list or mapping setting takes JSON, "
            """such as '["a", "b"]' or '{"key": "value"}')"""
        ) from None
    settings = settings.model_copy(update=pinned) if pinned else settings
    settings._sources = sources
    return settings


def _describe(error: ValidationError, sources: Sources) -> str:
    """The errors, field by field, each with its source, without the input values of secrets.

    One error reads on the same line; several, one line each below.
    """
    lines = []
    for item in error.errors(include_input=False, include_url=False):
        location = [part for part in item["loc"] if not (isinstance(part, str) and "[" in part)]  # union tags
        field = ".".join(str(part) for part in location) or "settings"
        message = item["msg"].removeprefix("Value error, ")  # our validators' own words
        source = sources.quoted(location) if location else ""
        if not source and sources.config_path is not None:
            source = f"config file {sources.config_path}"
        lines.append(f"{field} (from {source}): {message}" if source else f"{field}: {message}")
    return f" {lines[0]}" if len(lines) == 1 else "".join(f"\n  {line}" for line in lines)


def _data_dir_settings(overrides: Mapping[str, Any]) -> Path | None:
    """The data directory's own settings file (``DATA_DIR/settings.yaml``, the demo's), if there is one."""
    data_dir = overrides.get("data_dir") or os.environ.get(DATA_DIR_ENV) or DEFAULT_DATA_DIR
    path = Path(data_dir) / DATA_DIR_SETTINGS
    return path if path.is_file() else None


def _env_config_path() -> Path | None:
    value = os.environ.get(CONFIG_ENV)
    return Path(value) if value else None


def _read_yaml(path: Path, named_by: str) -> dict[str, Any]:
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        reason = (exc.strerror or str(exc)).lower()
        raise ConfigError(f"cannot read config file {path} (from {named_by}): {reason}") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {path} is not valid YAML: {exc}") from exc
    if document is None:
        return {}
    if not isinstance(document, dict):
        raise ConfigError(f"config file {path} must be a mapping of settings")
    return document
