"""Known values for tool arguments from a ClickHouse query, on the embedded engine."""

from __future__ import annotations

from pathlib import Path

from clickhouse_connect.driver.client import Client
from pydantic import SecretStr

from detectors.base import DetectorStatus
from detectors.llm_call import Message, ToolCall
from detectors.tool_facts import KnownValuesConfig, ToolFactsConfig
from detectors.tool_facts.detector import ToolFactsDetector
from tests.calls import make_llm_call


def test_skus_from_a_table_and_a_broken_query_degrading_to_skipped(
    clickhouse: tuple[Client, str], chdb_path: Path
) -> None:
    client, database = clickhouse
    client.command(f"CREATE DATABASE {database}")
    client.command(f"CREATE TABLE {database}.products (sku String) ENGINE = MergeTree ORDER BY sku")
    client.command(f"INSERT INTO {database}.products VALUES ('CHR-ERG-01'), ('DSK-STD-02')")
    dsn = SecretStr(f"chdb://{chdb_path}")

    def detector(query: str) -> ToolFactsDetector:
        known = KnownValuesConfig(tools=["reorder"], argument="sku", clickhouse_dsn=dsn, query=query)
        return ToolFactsDetector(ToolFactsConfig(known_values=[known]), 0.5)

    def reorder(sku: str) -> object:
        tool_calls = (ToolCall("reorder", f'{{"sku": "{sku}", "quantity": 2}}'),)
        return make_llm_call(output_messages=(Message("assistant", "", tool_calls=tool_calls),))

    products = detector(f"SELECT sku FROM {database}.products")
    (known,) = products.detect_batch([reorder("CHR-ERG-01")])
    assert known.status is DetectorStatus.OK and not known.flagged
    (invented,) = products.detect_batch([reorder("CHR-ERG-10")])
    assert invented.summary == "tool 'reorder': sku 'CHR-ERG-10' is not a known value (closest: CHR-ERG-01)"

    (skipped,) = detector(f"SELECT sku FROM {database}.no_such_table").detect_batch([reorder("CHR-ERG-01")])
    assert skipped.status is DetectorStatus.SKIPPED and "known values query failed" in skipped.summary
