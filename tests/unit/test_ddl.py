"""DDL rendered for one server and for a cluster (settings clickhouse_cluster)."""

from __future__ import annotations

import re

from pipeline.config.retention import RetentionSettings
from pipeline.sinks.ddl import Layout
from pipeline.sinks.retention import EXPIRING_TABLES, retention_statements
from schemas import migrations

CLUSTER = Layout("hw", "prod_cluster")


def _statement(sql: str) -> str:
    """``sql`` without its comment lines."""
    return "\n".join(line for line in sql.splitlines() if not line.lstrip().startswith("--"))


def test_without_a_cluster_migrations_run_as_written() -> None:
    for migration in migrations():
        assert Layout("hw").render(migration.sql_template) == migration.sql_template.replace("{database}", "hw")


def test_on_a_cluster_every_migration_runs_on_every_replica_with_replicated_engines() -> None:
    for migration in migrations():
        sql = _statement(CLUSTER.render(migration.sql_template))
        head = re.match(r"\s*(CREATE TABLE IF NOT EXISTS|ALTER TABLE) hw\.(\w+) ON CLUSTER `prod_cluster`\s", sql)
        assert head, f"{migration.name}: {sql[:120]}"
        engines = re.findall(r"ENGINE = (\w+)\((.*)\)", sql)
        assert all(name.startswith("Replicated") for name, _ in engines), (migration.name, engines)
        assert all(arguments.startswith("'/clickhouse/tables/{uuid}/{shard}', '{replica}'") for _, arguments in engines)


def test_engine_arguments_are_kept_after_the_replica_path() -> None:
    sql = CLUSTER.render("CREATE TABLE IF NOT EXISTS {database}.t\n(a UInt8, v UInt32)\nENGINE = ReplacingMergeTree(v)")
    assert sql.endswith("ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{uuid}/{shard}', '{replica}', v)")
    bare = CLUSTER.render("CREATE TABLE IF NOT EXISTS {database}.t (a UInt8) ENGINE = ReplacingMergeTree ORDER BY a")
    assert "ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{uuid}/{shard}', '{replica}') ORDER BY a" in bare
    one_line = CLUSTER.render("CREATE TABLE IF NOT EXISTS {database}.t (a UInt8) ENGINE = MergeTree() ORDER BY (a)")
    assert one_line.endswith("ReplicatedMergeTree('/clickhouse/tables/{uuid}/{shard}', '{replica}') ORDER BY (a)")
    assert CLUSTER.render("CREATE DATABASE IF NOT EXISTS {database}") == (
        "CREATE DATABASE IF NOT EXISTS hw ON CLUSTER `prod_cluster`"
    )


def test_comments_are_left_alone() -> None:
    sql = CLUSTER.render("-- ALTER TABLE x is mentioned here\nALTER TABLE {database}.t ADD COLUMN c UInt8")
    assert sql.splitlines() == [
        "-- ALTER TABLE x is mentioned here",
        "ALTER TABLE hw.t ON CLUSTER `prod_cluster` ADD COLUMN c UInt8",
    ]


def test_retention_sets_content_and_row_ttls_per_table_on_the_cluster() -> None:
    statements = retention_statements(CLUSTER, RetentionSettings(content_days=30, days=180))
    assert len(statements) == len(EXPIRING_TABLES)
    llm_calls = statements[0]
    assert llm_calls.startswith("ALTER TABLE hw.llm_calls ON CLUSTER `prod_cluster` MODIFY COLUMN prompt TTL")
    assert "MODIFY COLUMN grounding TTL toDateTime(start_time) + INTERVAL 2592000 SECOND" in llm_calls
    assert llm_calls.endswith("MODIFY TTL toDateTime(start_time) + INTERVAL 15552000 SECOND")
    assert "attributes" not in llm_calls and "erasable" not in llm_calls, "they live as long as the row"
    assert Layout("hw").mutation_settings == {"mutations_sync": 1}
    assert CLUSTER.mutation_settings == {"mutations_sync": 2}, "a deletion returns once every replica applied it"
