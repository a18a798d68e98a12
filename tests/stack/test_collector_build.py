"""The collector build holds what infra/otel-collector.yaml uses, and accepts that file unchanged."""

from __future__ import annotations

from pathlib import Path

from pipeline.tools.demo_broker import free_port
from tests.stack.collector import CONFIG, Addresses, components, used_components, validate, version
from tests.stack.kafka import version as kafka_version


def _addresses() -> Addresses:
    return Addresses("127.0.0.1:9092", free_port(), free_port(), free_port())


def test_build_has_exactly_the_components_the_config_uses(otelcol: Path):
    assert components(otelcol) == used_components()
    assert used_components() == {
        "receivers": {"otlp"},
        "processors": {"memory_limiter", "batch"},
        "exporters": {"kafka"},
        "extensions": {"health_check"},
    }


def test_versions_are_the_compose_files(otelcol: Path):
    compose = (Path(__file__).resolve().parents[2] / "infra" / "docker-compose.yml").read_text()
    assert f"otel/opentelemetry-collector-contrib:{version()}\n" in compose
    assert f"apache/kafka:{kafka_version()}\n" in compose


def test_collector_validates_the_config_with_compose_addresses(otelcol: Path):
    result = validate(otelcol, _addresses().environment())
    assert result.returncode == 0, result.stdout + result.stderr


def test_validate_rejects_a_misspelt_key(otelcol: Path, tmp_path: Path):
    """The check above can fail: upstream refuses a key it does not know."""
    broken = tmp_path / "otel-collector.yaml"
    broken.write_text(CONFIG.read_text().replace("partition_traces_by_id:", "partition_traces_by_trace_id:"))
    result = validate(otelcol, _addresses().environment(), broken)
    assert result.returncode != 0 and "partition_traces_by_trace_id" in result.stdout + result.stderr
