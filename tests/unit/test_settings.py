from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from detectors.thresholds import ThresholdsError, load_thresholds
from pipeline.config.settings import ConfigError, Settings, load_settings


def test_defaults_are_embedded(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("HALLUWATCH_CONFIG", raising=False)
    settings = load_settings()
    assert settings.kafka_input_topic == "otlp_spans"
    assert settings.resolved_clickhouse_dsn.startswith("chdb://") and settings.resolved_clickhouse_dsn.endswith(
        ".halluwatch/clickhouse"
    )


def test_env_beats_yaml_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    config = tmp_path / "halluwatch.yaml"
    config.write_text("kafka_bootstrap: from-file:9092\nclickhouse_dsn: http://ch:8123\nbatch_max_messages: 7\n")
    monkeypatch.setenv("HALLUWATCH_CONFIG", str(config))
    monkeypatch.setenv("HALLUWATCH_KAFKA_BOOTSTRAP", "from-env:9092")
    settings = load_settings()
    assert settings.kafka_bootstrap == "from-env:9092"
    assert settings.resolved_clickhouse_dsn == "http://ch:8123"
    assert settings.batch_max_messages == 7


def test_a_data_directory_brings_its_own_settings_unless_a_config_file_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.delenv("HALLUWATCH_CONFIG", raising=False)
    (tmp_path / "settings.yaml").write_text(
        "policies:\n  hr: {match: {service: hr-assistant}}\nbatch_max_messages: 9\n"
    )
    monkeypatch.setenv("HALLUWATCH_DATA_DIR", str(tmp_path))
    settings = load_settings()
    assert list(settings.policies) == ["hr"] and settings.batch_max_messages == 9
    named = tmp_path / "other.yaml"
    named.write_text("batch_max_messages: 3\n")
    monkeypatch.setenv("HALLUWATCH_CONFIG", str(named))
    assert load_settings().batch_max_messages == 3 and not load_settings().policies
    monkeypatch.delenv("HALLUWATCH_CONFIG")
    monkeypatch.setenv("HALLUWATCH_DATA_DIR", str(tmp_path / "elsewhere"))
    assert not load_settings().policies


def test_detector_config_comes_from_yaml(tmp_path: Path):
    config = tmp_path / "c.yaml"
    config.write_text(
        "detectors:\n  schema_violation:\n    output_schemas:\n"
        "      extract_invoice: {type: object, required: [total]}\n"
    )
    settings = load_settings(config)
    assert settings.detectors.schema_violation.output_schemas["extract_invoice"]["required"] == ["total"]


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("batch_max_messages: 0\n", "batch_max_messages"),
        ("no_such_setting: 1\n", "no_such_setting"),
        ("content_mode: sometimes\n", "content_mode"),
    ],
)
def test_invalid_values_name_the_field(tmp_path: Path, text: str, field: str):
    config = tmp_path / "bad.yaml"
    config.write_text(text)
    with pytest.raises(ConfigError, match=field):
        load_settings(config)


def test_unreadable_or_non_mapping_file(tmp_path: Path):
    with pytest.raises(ConfigError, match="cannot read"):
        load_settings(tmp_path / "missing.yaml")
    listing = tmp_path / "list.yaml"
    listing.write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="mapping"):
        load_settings(listing)


def test_builtin_thresholds_cover_every_detector():
    thresholds = load_thresholds()
    assert thresholds.version
    assert 0 < thresholds.for_detector("schema_violation") <= 1
    with pytest.raises(ThresholdsError, match="no_such_detector"):
        thresholds.for_detector("no_such_detector")


def test_a_thresholds_file_without_a_newer_detector_keeps_its_builtin_threshold(tmp_path: Path):
    path = tmp_path / "calibrated.yaml"
    path.write_text("version: cal-1\ndetectors: {grounding: {threshold: 0.42}}\n")
    thresholds = load_thresholds(path)
    builtin = load_thresholds()
    assert thresholds.version == "cal-1"
    assert thresholds.for_detector("grounding") == 0.42
    assert thresholds.for_detector("tool_outcome") == builtin.for_detector("tool_outcome")
    assert "tool_outcome" in thresholds.inherited and "grounding" not in thresholds.inherited
    assert builtin.inherited == ()


def test_a_thresholds_file_sets_route_minimums_and_policy_maps_and_keeps_the_built_in_ones_it_lacks(tmp_path: Path):
    path = tmp_path / "calibrated.yaml"
    path.write_text(
        "version: cal-2\ndetectors: {grounding: {threshold: 0.4}}\nalert_probability: {slack: {min_probability: 0.7}}\n"
        "policies: {hr: {detectors: {}, calibration: {slope: 1.2, intercept: -0.3}}}\n"
    )
    thresholds = load_thresholds(path)
    builtin = load_thresholds()
    assert thresholds.alert_probability == {"page": builtin.alert_probability["page"], "slack": 0.7}
    assert thresholds.recalibration == {"hr": (1.2, -0.3)}


@pytest.mark.parametrize(
    "text",
    [
        "detectors: {a: {threshold: 1.5}}\nversion: v",
        "version: v\n",
        "detectors: {}\n",
        "[]",
        "version: v\ndetectors: {}\nalert_probability: {page: {min_probability: 2}}",
        "version: v\ndetectors: {}\npolicies: {hr: {detectors: {}, calibration: {slope: -1, intercept: 0}}}",
    ],
)
def test_bad_thresholds_files_are_rejected(tmp_path: Path, text: str):
    path = tmp_path / "t.yaml"
    path.write_text(text)
    with pytest.raises(ThresholdsError):
        load_thresholds(path)


def test_a_misspelled_variable_stops_start_up_with_the_closest_name(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("HALLUWATCH_KAFKA_BOOTSTRAPS", "x:9092")
    with pytest.raises(ConfigError) as error:
        load_settings()
    assert str(error.value) == "unknown setting HALLUWATCH_KAFKA_BOOTSTRAPS (did you mean HALLUWATCH_KAFKA_BOOTSTRAP?)"
    monkeypatch.setenv("HALLUWATCH_ALERTING__SLACK_BOT_TOKN", "xoxb-1")
    monkeypatch.setenv("HALLUWATCH_NOTHING_LIKE_IT", "1")
    with pytest.raises(ConfigError) as error:
        load_settings()
    assert str(error.value) == (
        "unknown settings HALLUWATCH_ALERTING__SLACK_BOT_TOKN (did you mean HALLUWATCH_ALERTING__SLACK_BOT_TOKEN?), "
        "HALLUWATCH_KAFKA_BOOTSTRAPS (did you mean HALLUWATCH_KAFKA_BOOTSTRAP?), HALLUWATCH_NOTHING_LIKE_IT"
    )  # one line, and no value (it may be a secret)


def test_a_misspelled_secret_file_stops_start_up(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    (tmp_path / "halluwatch_alerting__slack_bot_tokn").write_text("xoxb-1")
    (tmp_path / "clickhouse_password").write_text("another service's secret")  # a shared /run/secrets
    monkeypatch.setenv("HALLUWATCH_SECRETS_DIR", str(tmp_path))
    with pytest.raises(ConfigError) as error:
        load_settings()
    assert str(error.value) == (
        f"unknown setting in secret file {tmp_path / 'halluwatch_alerting__slack_bot_tokn'} "
        "(did you mean halluwatch_alerting__slack_bot_token?)"
    )


def test_an_empty_variable_counts_as_unset_and_a_mapping_that_is_not_json_is_named(monkeypatch: pytest.MonkeyPatch):
    # What a templated deployment leaves: every variable present, the unused ones empty.
    for name in ("HALLUWATCH_FINDINGS_OTLP_HEADERS", "HALLUWATCH_KAFKA_BOOTSTRAP", "HALLUWATCH_CONSISTENCY__ENABLED"):
        monkeypatch.setenv(name, "")
    settings = load_settings()
    assert settings.findings_otlp_headers == {} and settings.kafka_bootstrap == Settings().kafka_bootstrap
    monkeypatch.setenv("HALLUWATCH_FINDINGS_OTLP_HEADERS", "authorization=Bearer t")
    with pytest.raises(ConfigError) as error:
        load_settings()
    assert str(error.value).startswith(
        "invalid configuration: HALLUWATCH_FINDINGS_OTLP_HEADERS is not JSON (a list or mapping setting takes JSON"
    )
    assert "Bearer" not in str(error.value)  # not the value: it may be a secret


def test_every_kind_of_valid_variable_is_accepted(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    for name, value in {
        "HALLUWATCH_KAFKA_BOOTSTRAP": "k:9092",  # top level
        "halluwatch_kafka_group_id": "g",  # any case, as pydantic-settings reads them
        "HALLUWATCH_ALERTING__SLACK_BOT_TOKEN": "xoxb-1",  # a nested model's field
        "HALLUWATCH_CONSISTENCY__LLM__BASE_URL": "http://llm:8000/v1",  # two levels down
        "HALLUWATCH_FINDINGS_OTLP_HEADERS__AUTHORIZATION": "Bearer t",  # a mapping's own key
        "HALLUWATCH_SECRETS_DIR": str(tmp_path),  # where the settings come from
        "HALLUWATCH_SERVICE_HOST": "10.0.0.7",  # Kubernetes' service links for a Service named halluwatch
        "HALLUWATCH_PORT_9464_TCP_ADDR": "10.0.0.7",
    }.items():
        monkeypatch.setenv(name, value)
    settings = load_settings()
    assert settings.kafka_bootstrap == "k:9092" and settings.kafka_group_id == "g"
    assert settings.consistency.llm.base_url == "http://llm:8000/v1"


def test_a_commit_interval_longer_than_the_watchdog_allows_is_rejected(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("HALLUWATCH_KAFKA_COMMIT_INTERVAL_SECONDS", "10")
    with pytest.raises(ConfigError) as error:
        load_settings()
    assert (
        "kafka_commit_interval_seconds (from HALLUWATCH_KAFKA_COMMIT_INTERVAL_SECONDS=10): must be at most 3 s (got 10)"
        in str(error.value)
    )
    assert "dropped-records watchdog" in str(error.value)
    monkeypatch.setenv("HALLUWATCH_KAFKA_COMMIT_INTERVAL_SECONDS", "3")
    assert load_settings().kafka_commit_interval_seconds == 3


@pytest.mark.parametrize(
    ("dsn", "scheme"),
    [
        ("nonsense", "no scheme"),
        ("postgres://u:canary-pw-7c1d@h/db", "scheme postgres://"),
        ("clickhouse://h", "scheme clickhouse://"),
    ],
)
def test_a_clickhouse_dsn_of_another_scheme_is_refused_in_one_line(tmp_path: Path, dsn: str, scheme: str):
    """clickhouse-connect took any URL for HTTP: `postgres://u:p@h/db` went to h:8123, `nonsense` to localhost."""
    env = {**os.environ, "HALLUWATCH_DATA_DIR": str(tmp_path), "HALLUWATCH_CLICKHOUSE_DSN": dsn}
    result = subprocess.run([sys.executable, "-m", "pipeline.cli", "migrate"], env=env, capture_output=True,
                            text=True, timeout=60, check=False)  # fmt: skip
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.splitlines() == [
        f"Error: invalid configuration: clickhouse_dsn (from HALLUWATCH_CLICKHOUSE_DSN): {scheme}; "
        "accepted: chdb://, http://, https:// "
        "(or empty: embedded chDB under data_dir)"
    ]


@pytest.mark.parametrize("dsn", ["", "chdb:///var/lib/halluwatch/clickhouse", "https://u:p@ch.example:8443/db"])
def test_embedded_and_server_dsns_are_accepted(dsn: str):
    assert load_settings(clickhouse_dsn=dsn).clickhouse_dsn.get_secret_value() == dsn


def test_a_server_dsn_needs_a_host():
    with pytest.raises(ConfigError, match=r"^invalid configuration: clickhouse_dsn: http:// without a host$"):
        load_settings(clickhouse_dsn="http://")


def test_retention_keeps_rows_at_least_as_long_as_their_content():
    settings = Settings(retention={"content_days": 0.5, "days": 90, "erasable_keys": ["enduser.id"]})
    assert (settings.retention.content_seconds, settings.retention.row_seconds) == (43_200, 7_776_000)
    assert settings.stream().erasable_keys == ("enduser.id",)
    with pytest.raises(ConfigError, match=r"retention: content_days \(200\) cannot exceed days \(180\)"):
        load_settings(retention={"content_days": 200})


def test_the_stages_views_carry_the_settings_they_are_built_from():
    settings = Settings(batch_max_messages=7, kafka_topic_partitions=3, content_mode="drop", kafka_logs_topic="logs")
    stream = settings.stream()
    assert (stream.batch_max_messages, stream.topic_partitions, stream.content.findings.mode) == (7, 3, "drop")
    assert settings.log_join().logs_topic == "logs"


def test_tests_never_see_the_callers_configuration():
    # tests/conftest.py drops them: an operator's exported DSN must never be what a test opens.
    leaked = [
        name for name in os.environ if name.startswith(("HALLUWATCH_", "OTEL_")) and name != "HALLUWATCH_MODEL_CACHE"
    ]
    assert leaked == []
    assert Settings().resolved_clickhouse_dsn.startswith("chdb://")
