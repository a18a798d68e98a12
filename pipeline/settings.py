"""One typed settings model for every command.

Values come, highest priority first, from ``HALLUWATCH_*`` environment variables, then
the YAML file named by ``HALLUWATCH_CONFIG`` (or ``--config``), then the defaults below,
which run everything embedded on one machine.  Invalid values fail at start-up with the
offending field named, never halfway through a stream.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from detectors.confidence import ConfidenceConfig
from detectors.contradiction import ContradictionConfig
from detectors.embeddings import EmbeddingConfig
from detectors.grounding import GroundingConfig
from detectors.schema_violation import SchemaViolationConfig
from detectors.sentinel import SentinelConfig
from detectors.span_model import SpanModelConfig
from pipeline.alerting.config import AlertingSettings

DEFAULT_DATA_DIR = Path(".halluwatch")


class ConfigError(ValueError):
    """The configuration is unusable; the message names the field and the source."""


class DetectorSettings(BaseModel):
    """Per-detector configuration (the YAML file's ``detectors:`` section)."""

    model_config = ConfigDict(extra="forbid")

    schema_violation: SchemaViolationConfig = Field(default_factory=SchemaViolationConfig)
    # The sentence-embedding model shared by the embedding-based detectors.
    embeddings: EmbeddingConfig = Field(default_factory=EmbeddingConfig)
    sentinel: SentinelConfig = Field(default_factory=SentinelConfig)
    grounding: GroundingConfig = Field(default_factory=GroundingConfig)
    contradiction: ContradictionConfig = Field(default_factory=ContradictionConfig)
    confidence: ConfidenceConfig = Field(default_factory=ConfidenceConfig)
    # Off unless a token-classification ONNX model is configured (model_path).
    span_model: SpanModelConfig = Field(default_factory=SpanModelConfig)


class Settings(BaseSettings):
    """Everything a halluwatch process needs to know."""

    model_config = SettingsConfigDict(env_prefix="HALLUWATCH_", env_nested_delimiter="__", extra="forbid")

    # Where relative paths (embedded ClickHouse, worker state) live.
    data_dir: Path = DEFAULT_DATA_DIR

    kafka_bootstrap: str = "127.0.0.1:9092"
    kafka_group_id: str = "halluwatch"
    kafka_input_topic: str = "otlp_spans"
    # "auto" sniffs each value (JSON starts with "{"); name the encoding to be strict.
    kafka_input_encoding: Literal["auto", "otlp_proto", "otlp_json"] = "auto"
    kafka_findings_topic: str = "halluwatch.findings"
    kafka_dlq_topic: str = "halluwatch.dlq"
    # Unkeyed (mixed-trace) batches are split and re-produced here, keyed by trace id.
    kafka_rekeyed_topic: str = "halluwatch.spans_by_trace"
    # Agreement alerts (key = trace id), failed deliveries awaiting retry, and alerts given up on.
    kafka_alerts_topic: str = "halluwatch.alerts"
    kafka_alerts_retry_topic: str = "halluwatch.alerts.retry"
    kafka_alerts_dlq_topic: str = "halluwatch.alerts.dlq"
    kafka_topic_partitions: int = Field(default=8, ge=1)
    kafka_max_poll_records: int = Field(default=500, ge=1)
    kafka_session_timeout_seconds: float = Field(default=30.0, gt=0)
    kafka_rebalance_timeout_seconds: float = Field(default=30.0, gt=0)
    kafka_heartbeat_interval_seconds: float = Field(default=3.0, gt=0)
    kafka_commit_interval_seconds: float = Field(default=2.0, gt=0)

    clickhouse_dsn: str = ""  # empty: embedded chDB under data_dir/clickhouse
    clickhouse_database: str = "halluwatch"
    # What of the prompt/answer/sources text is stored: PII control (SPEC §10).
    content_mode: Literal["full", "hash", "none"] = "full"

    batch_max_messages: int = Field(default=500, ge=1)
    batch_max_wait_seconds: float = Field(default=0.5, gt=0)
    detector_threads: int = Field(default=1, ge=1)
    max_message_bytes: int = Field(default=16 * 1024 * 1024, ge=1024)
    # Backoff while ClickHouse or the broker refuses writes; the batch is retried, never dropped.
    write_retry_max_seconds: float = Field(default=30.0, gt=0)

    thresholds_file: Path | None = None  # None: the built-in defaults
    # Per-model entropy baselines written by `halluwatch baseline` (confidence detector).
    baselines_file: Path | None = None
    metrics_port: int | None = Field(default=None, ge=0, le=65535)  # None: no /metrics endpoint
    metrics_host: str = "127.0.0.1"
    log_level: Literal["debug", "info", "warn", "error"] = "info"

    detectors: DetectorSettings = Field(default_factory=DetectorSettings)
    # Two-detector agreement, routes, Slack and PagerDuty (secrets: HALLUWATCH_ALERTING__SLACK_BOT_TOKEN...).
    alerting: AlertingSettings = Field(default_factory=AlertingSettings)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Environment beats the YAML file, which arrives as init arguments."""
        return env_settings, init_settings, file_secret_settings

    @property
    def resolved_clickhouse_dsn(self) -> str:
        """The DSN to connect with: the configured one, or embedded chDB under ``data_dir``."""
        return self.clickhouse_dsn or f"chdb://{(self.data_dir / 'clickhouse').resolve()}"


def load_settings(config_path: Path | None = None, **overrides: Any) -> Settings:
    """Build settings from env, the YAML file (argument or ``HALLUWATCH_CONFIG``) and overrides."""
    path = config_path or _env_config_path()
    file_values = _read_yaml(path) if path else {}
    try:
        return Settings(**{**file_values, **overrides})
    except ValidationError as exc:
        where = f" (config file {path})" if path else ""
        raise ConfigError(f"invalid configuration{where}:\n{exc}") from exc


def _env_config_path() -> Path | None:
    value = os.environ.get("HALLUWATCH_CONFIG")
    return Path(value) if value else None


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc}") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {path} is not valid YAML: {exc}") from exc
    if document is None:
        return {}
    if not isinstance(document, dict):
        raise ConfigError(f"config file {path} must be a mapping of settings")
    return document
