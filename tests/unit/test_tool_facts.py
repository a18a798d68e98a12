"""Tool facts detector: endpoints, values and permissions checked against registries (seed 003)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml

from detectors.base import DetectorResult, DetectorStatus
from detectors.llm_call import LLMCall, Message, ToolCall
from detectors.tool_facts import KnownValuesConfig, OpenAPIRegistryConfig, PermissionsConfig, ToolFactsConfig
from detectors.tool_facts.detector import ToolFactsDetector
from detectors.tool_registries import Refreshing, RegistryError, parse_openapi
from tests.calls import make_llm_call
from tests.servers import Reply, ScriptedServer

API = {
    "openapi": "3.1.0",
    "servers": [{"url": "https://shop.example.com/api/v2"}],
    "components": {"parameters": {"Limit": {"name": "limit", "in": "query", "schema": {"type": "integer"}}}},
    "paths": {
        "/orders": {
            "get": {"parameters": [{"$ref": "#/components/parameters/Limit"}, {"name": "status", "in": "query"}]}
        },
        "/orders/{order_id}": {
            "parameters": [{"name": "order_id", "in": "path", "required": True}],
            "get": {},
            "delete": {"parameters": [{"name": "reason", "in": "query"}]},
        },
        "/customers/{customer_id}/refunds": {"post": {}},
    },
}


def call_with(*tool_calls: ToolCall, **attributes: str) -> LLMCall:
    output = Message("assistant", "", tool_calls=tool_calls, finish_reason="tool_calls")
    return make_llm_call(output_messages=(output,), attributes=attributes)


def http(method: str, path: str, **query: str) -> ToolCall:
    arguments: dict[str, object] = {"method": method, "path": path}
    if query:
        arguments["query"] = query
    return ToolCall("http_request", json.dumps(arguments), "c1")


def detect(detector: ToolFactsDetector, call: LLMCall) -> DetectorResult:
    (result,) = detector.detect_batch([call])
    return result


@pytest.fixture
def api_file(tmp_path: Path) -> Path:
    path = tmp_path / "openapi.yaml"
    path.write_text(yaml.safe_dump(API))
    return path


@pytest.fixture
def openapi(api_file: Path) -> ToolFactsDetector:
    return ToolFactsDetector(
        ToolFactsConfig(openapi=[OpenAPIRegistryConfig(tools=["http_request"], document=str(api_file))]), 0.5
    )


@pytest.mark.parametrize(
    "tool_call",
    [
        http("GET", "/orders/A-17"),
        http("get", "https://shop.example.com/api/v2/orders?limit=5&status=open"),
        http("DELETE", "/orders/A-17", reason="duplicate"),
        http("POST", "/customers/C-9/refunds"),
    ],
)
def test_real_operations_pass(openapi: ToolFactsDetector, tool_call: ToolCall) -> None:
    result = detect(openapi, call_with(tool_call))
    assert result.status is DetectorStatus.OK and not result.flagged, result.summary


def test_an_endpoint_that_does_not_exist_is_flagged_with_the_closest_real_one(openapi: ToolFactsDetector) -> None:
    result = detect(openapi, call_with(http("POST", "/customers/C-9/refund")))
    assert result.flagged and result.severity == 4
    assert result.summary == (
        "tool 'http_request': no operation POST /customers/C-9/refund in the API "
        "(closest: POST /customers/{customer_id}/refunds)"
    )
    (violation,) = result.evidence["violations"]
    assert (
        violation["kind"] == "unknown_endpoint" and violation["suggestion"] == "POST /customers/{customer_id}/refunds"
    )


def test_a_method_the_path_does_not_allow(openapi: ToolFactsDetector) -> None:
    result = detect(openapi, call_with(http("PATCH", "/orders/A-17")))
    assert result.summary == "tool 'http_request': PATCH /orders/A-17 is not allowed (allowed: DELETE, GET)"


def test_query_parameters_the_operation_does_not_declare(openapi: ToolFactsDetector) -> None:
    result = detect(openapi, call_with(http("GET", "/orders?limt=5", status="open", sort="new")))
    kinds = [(v["kind"], v["parameter"], v.get("suggestion")) for v in result.evidence["violations"]]
    assert kinds == [("unknown_query_parameter", "limt", "limit"), ("unknown_query_parameter", "sort", None)]
    assert result.evidence["violation_count"] == 2


def test_the_document_is_fetched_from_a_url_and_an_unreachable_one_degrades_to_skipped(api_file: Path) -> None:
    with ScriptedServer() as server:
        server.script("/openapi.json", Reply(503, body="maintenance"), Reply(200, body=API))
        config = ToolFactsConfig(
            openapi=[OpenAPIRegistryConfig(tools=["http_request"], document=f"{server.url}/openapi.json")],
            refresh_seconds=0.01,
        )
        detector = ToolFactsDetector(config, 0.5)
        first = detect(detector, call_with(http("POST", "/nope")))
        assert first.status is DetectorStatus.SKIPPED
        assert "registries unavailable" in first.summary and "503" in first.summary
        time.sleep(0.02)  # past refresh_seconds: the next call tries again
        second = detect(detector, call_with(http("POST", "/nope")))
        assert second.flagged and second.evidence["violations"][0]["kind"] == "unknown_endpoint"
        assert len(server.requests("/openapi.json")) == 2


def test_known_values_from_csv_and_yaml(tmp_path: Path) -> None:
    (tmp_path / "customers.csv").write_text("customer_id,name\nC-100,Ana\nC-101,Ben\n")
    (tmp_path / "skus.yaml").write_text("- SKU-1\n- SKU-2\n")
    config = ToolFactsConfig(
        known_values=[
            KnownValuesConfig(tools=["refund"], argument="customer_id", file=tmp_path / "customers.csv"),
            KnownValuesConfig(tools=["refund", "reorder"], argument="sku", file=tmp_path / "skus.yaml"),
        ]
    )
    detector = ToolFactsDetector(config, 0.5)
    fine = ToolCall("refund", '{"customer_id": "C-101", "sku": "SKU-2"}')
    assert not detect(detector, call_with(fine)).flagged
    invented = ToolCall("refund", '{"customer_id": "C-1011", "sku": "SKU-2"}')
    result = detect(detector, call_with(invented))
    assert result.summary == "tool 'refund': customer_id 'C-1011' is not a known value (closest: C-101)"
    assert detect(detector, call_with(ToolCall("other_tool", '{"customer_id": "x"}'))).status is DetectorStatus.SKIPPED


def test_permissions_by_role_and_user(tmp_path: Path) -> None:
    grants = tmp_path / "permissions.yaml"
    grants.write_text(
        yaml.safe_dump({"roles": {"agent": ["get_order", "refund"], "admin": ["*"]}, "users": {"u7": ["delete_order"]}})
    )
    detector = ToolFactsDetector(ToolFactsConfig(permissions=PermissionsConfig(file=grants)), 0.5)
    delete = ToolCall("delete_order", '{"order_id": "A-17"}')
    result = detect(detector, call_with(delete, **{"enduser.id": "u3", "enduser.role": "agent"}))
    assert result.flagged
    assert result.summary == "user u3 (role agent) may not call tool 'delete_order' (may call: get_order, refund)"
    assert not detect(detector, call_with(delete, **{"enduser.id": "u7", "enduser.role": "agent"})).flagged
    assert not detect(detector, call_with(delete, **{"enduser.role": "admin"})).flagged
    # No identity on the span: nothing to check it against.
    assert detect(detector, call_with(delete)).status is DetectorStatus.SKIPPED


def test_a_broken_registry_file_is_skipped_with_its_reason_never_raised(tmp_path: Path) -> None:
    (tmp_path / "customers.csv").write_text("id,name\n1,Ana\n")
    config = ToolFactsConfig(
        known_values=[KnownValuesConfig(tools=["refund"], argument="customer_id", file=tmp_path / "customers.csv")]
    )
    result = detect(ToolFactsDetector(config, 0.5), call_with(ToolCall("refund", '{"customer_id": "1"}')))
    assert result.status is DetectorStatus.SKIPPED
    assert "no column 'customer_id' (columns: id, name)" in result.summary


def test_a_registry_keeps_its_last_good_value_when_a_reload_fails() -> None:
    loads = iter([["a"], RegistryError("gone")])
    now = [0.0]

    def load() -> list[str]:
        value = next(loads)
        if isinstance(value, Exception):
            raise value
        return value

    registry: Refreshing[list[str]] = Refreshing("test", load, refresh_seconds=10, clock=lambda: now[0])
    assert registry.get() == (["a"], "")
    now[0] = 11.0
    assert registry.get() == (["a"], "")


def test_bad_openapi_documents() -> None:
    with pytest.raises(RegistryError, match="no 'paths'"):
        parse_openapi("openapi: 3.1.0\n", "api.yaml")
    with pytest.raises(RegistryError, match="not JSON or YAML"):
        parse_openapi("{: [", "api.yaml")


def test_registries_report_what_loaded_for_the_doctor(api_file: Path, tmp_path: Path) -> None:
    config = ToolFactsConfig(
        openapi=[OpenAPIRegistryConfig(tools=["http_request"], document=str(api_file))],
        permissions=PermissionsConfig(file=tmp_path / "absent.yaml"),
    )
    status = ToolFactsDetector(config, 0.5).registries()
    assert status[f"openapi {api_file}"] == ""
    assert status[f"permissions {tmp_path / 'absent.yaml'}"].startswith(f"cannot read {tmp_path / 'absent.yaml'}")
