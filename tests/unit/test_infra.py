"""The deployment files: the compose file is valid Compose, and says what the worker relies on.

No Docker engine here: the compose file is checked against the Compose Specification's
JSON schema (compose-spec.json, as vendored in the check-jsonschema package), and the
collector, Prometheus, Grafana and .env files for the keys and names the pipeline needs.
"""

from __future__ import annotations

import json
import re
from importlib import resources
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import jsonschema
import pytest
import yaml
from pydantic import BaseModel

from dashboards.grafana import CLICKHOUSE_DATASOURCE, PROMETHEUS_DATASOURCE
from pipeline.config.settings import PRODUCE_HEADROOM_BYTES, Settings, load_settings
from pipeline.worker.health import HEALTH_PATH

ROOT = Path(__file__).parents[2]
INFRA = ROOT / "infra"


def _yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return _yaml(INFRA / "docker-compose.yml")


def test_compose_file_follows_the_compose_specification(compose):
    schema_file = resources.files("check_jsonschema.builtin_schemas.vendor") / "compose-spec.json"
    schema = json.loads(schema_file.read_text(encoding="utf-8"))
    # Releases vendor it as draft-07 (spelt without "#", which jsonschema does not look up) or 2020-12.
    draft = jsonschema.Draft202012Validator if "2020-12" in schema["$schema"] else jsonschema.Draft7Validator
    validator = draft(schema)
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(compose)]
    assert not errors, "\n".join(errors)
    # The check has teeth: a misspelt key is refused.
    broken = {**compose, "services": {**compose["services"], "kafka": {**compose["services"]["kafka"], "imgae": "x"}}}
    assert not validator.is_valid(broken)


def test_images_are_pinned_and_start_order_uses_health(compose):
    services = compose["services"]
    assert {"kafka", "otel-collector", "clickhouse", "migrate", "worker", "grafana"} <= set(services)
    for name, service in services.items():
        image = service["image"]
        if "build" not in service:
            tag = image.rsplit(":", 1)[1] if ":" in image else ""
            assert re.fullmatch(r"v?\d+\.\d+\.\d+(\.\d+)?", tag), f"{name}: {image} is not pinned to a version"
        for dependency, condition in service.get("depends_on", {}).items():
            target = services[dependency]
            if condition["condition"] == "service_healthy":
                assert "test" in target.get("healthcheck", {}), f"{name} waits on {dependency}'s missing health check"
            elif condition["condition"] == "service_completed_successfully":
                assert target.get("restart") == "no", f"{dependency} must be a one-shot job"
    assert services["kafka"]["image"].startswith("apache/kafka:")
    assert "broker,controller" in services["kafka"]["environment"]["KAFKA_PROCESS_ROLES"]  # KRaft, no ZooKeeper
    assert services["migrate"]["command"] == ["halluwatch", "migrate"]
    worker = services["worker"]
    assert worker["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    assert HEALTH_PATH in " ".join(worker["healthcheck"]["test"])
    assert any(volume.endswith(":/models") for volume in worker["volumes"])
    assert "grafana-clickhouse-datasource" in services["grafana"]["environment"]["GF_INSTALL_PLUGINS"]


def test_worker_environment_is_valid_settings(compose, monkeypatch):
    environment = dict(compose["services"]["worker"]["environment"])
    environment["HALLUWATCH_CLICKHOUSE_DSN"] = "http://halluwatch:secret@clickhouse:8123"  # compose interpolates it
    for name, value in environment.items():
        if value is not None:  # a name alone passes .env's value, when it has one
            monkeypatch.setenv(name, str(value))
    settings = load_settings()
    assert settings.kafka_bootstrap == "kafka:9092"
    assert settings.kafka_input_topic == "otlp_spans" and settings.kafka_logs_topic == "otlp_logs"
    assert settings.metrics_port == 9464 and settings.metrics_host == "0.0.0.0"
    assert settings.resolved_clickhouse_dsn.startswith("http://")
    port = re.search(r"127\.0\.0\.1:(\d+)/healthz", " ".join(compose["services"]["worker"]["healthcheck"]["test"]))
    assert port and int(port.group(1)) == settings.metrics_port


def test_collector_exports_traces_and_logs_to_the_topics_the_worker_reads(compose):
    config = _yaml(INFRA / "otel-collector.yaml")
    addresses = compose["services"]["otel-collector"]["environment"]
    kafka = config["exporters"]["kafka"]
    defaults = Settings()
    assert kafka["traces"] == {"topic": defaults.kafka_input_topic, "encoding": "otlp_proto"}
    assert kafka["logs"] == {"topic": defaults.kafka_logs_topic, "encoding": "otlp_proto"}
    assert kafka["partition_traces_by_id"] is True
    # Addresses are the environment's, which compose sets to its own network's (and the defaults agree).
    assert kafka["brokers"] == "${env:KAFKA_BROKERS:-kafka:9092}" and addresses["KAFKA_BROKERS"] == "kafka:9092"
    protocols = config["receivers"]["otlp"]["protocols"]
    assert protocols["grpc"]["endpoint"] == "${env:OTLP_GRPC_ENDPOINT:-0.0.0.0:4317}"
    assert protocols["http"]["endpoint"] == "${env:OTLP_HTTP_ENDPOINT:-0.0.0.0:4318}"
    assert (addresses["OTLP_GRPC_ENDPOINT"], addresses["OTLP_HTTP_ENDPOINT"]) == ("0.0.0.0:4317", "0.0.0.0:4318")
    pipelines = config["service"]["pipelines"]
    for signal in ("traces", "logs"):
        assert pipelines[signal]["receivers"] == ["otlp"] and "kafka" in pipelines[signal]["exporters"]
        assert set(pipelines[signal]["processors"]) <= set(config["processors"])
    assert set(config["service"]["extensions"]) <= set(config["extensions"])


def test_grafana_provisioning_matches_the_dashboards(compose):
    datasources = _yaml(INFRA / "grafana/provisioning/datasources/halluwatch.yaml")["datasources"]
    assert {(d["type"], d["uid"]) for d in datasources} == {
        (CLICKHOUSE_DATASOURCE["type"], CLICKHOUSE_DATASOURCE["uid"]),
        (PROMETHEUS_DATASOURCE["type"], PROMETHEUS_DATASOURCE["uid"]),
    }
    provider = _yaml(INFRA / "grafana/provisioning/dashboards/halluwatch.yaml")["providers"][0]
    mounts = dict(volume.split(":")[:2] for volume in compose["services"]["grafana"]["volumes"])
    assert mounts["../dashboards/grafana"] == provider["options"]["path"]
    assert (INFRA / "../dashboards/grafana/halluwatch.json").is_file()
    scrape = _yaml(INFRA / "prometheus.yml")["scrape_configs"][0]["dns_sd_configs"][0]
    assert scrape["names"] == ["worker"] and scrape["port"] == 9464


def test_env_example_names_only_real_settings():
    names = re.findall(r"^#? ?(HALLUWATCH_\w+)=", (INFRA / ".env.example").read_text(encoding="utf-8"), re.M)
    assert "HALLUWATCH_ALERTING__SLACK_BOT_TOKEN" in names and "HALLUWATCH_ALERTING__PAGERDUTY_ROUTING_KEY" in names
    for name in names:
        model: type[BaseModel] = Settings
        *parents, leaf = name.removeprefix("HALLUWATCH_").lower().split("__")
        for part in parents:
            annotation = model.model_fields[part].annotation
            assert isinstance(annotation, type) and issubclass(annotation, BaseModel), name
            model = annotation
        assert leaf in model.model_fields, f"{name} is not a setting"


def test_kafka_keeps_its_data_in_its_volume(compose):
    kafka = compose["services"]["kafka"]
    (data_volume,) = [v.split(":")[1] for v in kafka["volumes"] if v.startswith("kafka-data:")]
    assert kafka["environment"]["KAFKA_LOG_DIRS"] == data_volume  # else the image writes to /tmp, lost on recreate


def test_message_size_limits_agree_end_to_end(compose):
    collector = _yaml(INFRA / "otel-collector.yaml")["exporters"]["kafka"]["producer"]["max_message_bytes"]
    worker_env = compose["services"]["worker"]["environment"]
    worker = Settings(max_message_bytes=int(worker_env["HALLUWATCH_MAX_MESSAGE_BYTES"])).max_message_bytes
    broker = int(compose["services"]["kafka"]["environment"]["KAFKA_MESSAGE_MAX_BYTES"])
    assert collector == worker == Settings().max_message_bytes  # what the collector sends, the worker takes
    assert broker == worker + PRODUCE_HEADROOM_BYTES  # and what the worker produces back, the broker takes


def _env_example() -> tuple[dict[str, str], set[str]]:
    """.env.example's set lines, and the names of its commented-out ``# HALLUWATCH_...=`` lines."""
    text = (INFRA / ".env.example").read_text(encoding="utf-8")
    return dict(re.findall(r"^(\w+)=(.*)$", text, re.M)), set(re.findall(r"^# (HALLUWATCH_\w+)=", text, re.M))


def _dot_env_names(service: dict[str, Any]) -> set[str]:
    """The .env variables a service gets: names without a value, and ``${VAR}`` in values."""
    environment = service.get("environment", {})
    passed = {name for name, value in environment.items() if value is None}
    return passed | set(re.findall(r"\$\{(\w+)", " ".join(str(v) for v in environment.values() if v is not None)))


def test_each_service_gets_only_the_env_lines_it_needs(compose):
    services = compose["services"]
    assert not [name for name, service in services.items() if "env_file" in service]  # never the whole .env
    gets = {name: _dot_env_names(service) for name, service in services.items()}
    set_lines, optional = _env_example()
    assert set(set_lines) | optional <= set().union(*gets.values())  # every line reaches a service
    only = {
        "GRAFANA_ADMIN_PASSWORD": {"grafana"},
        "CLICKHOUSE_UI_PASSWORD": {"clickhouse", "triage"},
        "HALLUWATCH_UI__TOKEN": {"triage"},
        "HALLUWATCH_UI__SESSION_SECRET": {"triage"},
        "HALLUWATCH_UI__SLACK_SIGNING_SECRET": {"triage"},
        "HALLUWATCH_UI__PAGERDUTY_WEBHOOK_SECRET": {"triage"},
        "HALLUWATCH_ALERTING__SLACK_BOT_TOKEN": {"worker"},
        "HALLUWATCH_ALERTING__PAGERDUTY_ROUTING_KEY": {"worker"},
        "HALLUWATCH_CONSISTENCY__LLM__API_KEY": {"worker"},
        "HALLUWATCH_CONTENT_HMAC_KEY": {"worker"},
        "HALLUWATCH_FINDINGS_OTLP_HEADERS": {"worker"},
    }
    for variable, services_with_it in only.items():
        assert {name for name, names in gets.items() if variable in names} == services_with_it, variable
    assert services["worker"]["environment"]["HALLUWATCH_UI__SERVE_IN_WORKER"] == "false"  # no UI secrets, no pages


def test_env_example_ships_no_working_secret():
    set_lines, _ = _env_example()
    secrets = [name for name in set_lines if re.search(r"PASSWORD|TOKEN|SECRET|KEY", name)]
    assert {"CLICKHOUSE_PASSWORD", "GRAFANA_ADMIN_PASSWORD", "HALLUWATCH_UI__TOKEN"} <= set(secrets)
    assert {name: set_lines[name] for name in secrets if set_lines[name]} == {}  # compose refuses them empty


@pytest.mark.parametrize(
    ("service", "user", "password"),
    [
        ("triage", "halluwatch_ui", "CLICKHOUSE_UI_PASSWORD"),
        ("worker", "halluwatch_worker", "CLICKHOUSE_WORKER_PASSWORD"),
    ],
)
def test_services_sign_in_as_the_readme_users(compose, service: str, user: str, password: str):
    """Least privilege: the pages and the workers sign in as the users infra/README.md grants, not as the admin."""
    dsn = compose["services"][service]["environment"]["HALLUWATCH_CLICKHOUSE_DSN"]
    assert dsn.startswith(f"http://{user}:${{{password}:?")
    granted = _users_file_grants(compose, user, password)
    readme = (INFRA / "README.md").read_text(encoding="utf-8")
    documented = {f"GRANT {what}" for what in re.findall(rf"^GRANT (.+) TO {user};$", readme, re.M)}
    assert granted == documented and any("SELECT" in grant and "halluwatch.*" in grant for grant in granted)
    assert not any(word in grant for grant in granted for word in ("CREATE", "ALTER", "DROP", "ALL"))


def test_pages_listen_on_loopback_and_grafana_reads_as_a_readonly_user(compose):
    for service in ("triage", "grafana"):
        assert all(port.startswith("127.0.0.1:") for port in compose["services"][service]["ports"])
    assert _users_file_grants(compose, "halluwatch_grafana", "CLICKHOUSE_GRAFANA_PASSWORD") == {
        "GRANT SELECT ON halluwatch.*"
    }
    config = ElementTree.parse(INFRA / "clickhouse/users.d/halluwatch_grafana.xml")  # noqa: S314 - our own file
    assert config.findtext("users/halluwatch_grafana/profile") == "grafana_readonly"
    assert config.findtext("profiles/grafana_readonly/readonly") == "1"
    source = yaml.safe_load((INFRA / "grafana/provisioning/datasources/halluwatch.yaml").read_text())["datasources"][0]
    assert source["jsonData"]["username"] == "halluwatch_grafana"
    assert source["secureJsonData"]["password"] == "$CLICKHOUSE_GRAFANA_PASSWORD"
    assert "CLICKHOUSE_PASSWORD" not in compose["services"]["grafana"]["environment"]  # never the administrator's


def _users_file_grants(compose, user: str, password: str) -> set[str | None]:
    """The grants of ``user`` in its users.d file, after checking ClickHouse mounts it and it reads ``password``."""
    users_file = f"clickhouse/users.d/{user}.xml"
    mounts = dict(volume.split(":")[:2] for volume in compose["services"]["clickhouse"]["volumes"])
    assert mounts[f"./{users_file}"] == f"/etc/clickhouse-server/users.d/{Path(users_file).name}"
    found = ElementTree.parse(INFRA / users_file).find(f"users/{user}")  # noqa: S314 - our own file
    assert found is not None
    secret = found.find("password")
    assert secret is not None and secret.get("from_env") == password and not secret.text
    return {query.text for query in found.iterfind("grants/query")}
