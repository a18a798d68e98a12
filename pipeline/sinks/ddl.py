"""DDL for one server or for a cluster (setting ``clickhouse_cluster``): the same statements, rendered for either.

On a cluster each statement runs ``ON CLUSTER`` (every replica applies it) and each MergeTree
engine becomes its Replicated twin, keyed in ClickHouse Keeper by the table's UUID and the
server's ``{shard}`` and ``{replica}`` macros.  One shard is assumed: every replica then holds
every row, so reads and writes need no Distributed table.  ClickHouse Cloud needs neither: it
replicates every MergeTree table and its DDL by itself, so there the cluster setting stays empty.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Statement heads that name a table (or the database) right after them; ON CLUSTER goes after the name.
_NAMED = re.compile(r"^(\s*(?:CREATE TABLE IF NOT EXISTS|ALTER TABLE|CREATE DATABASE IF NOT EXISTS)\s+)(\S+)")
_ENGINE = re.compile(r"ENGINE = (\w*)MergeTree(?:\(([^()]*)\))?")
REPLICA_PATH = "'/clickhouse/tables/{uuid}/{shard}', '{replica}'"


@dataclass(frozen=True, slots=True)
class Layout:
    """Where the tables live: a database, on one server (``cluster`` empty) or on every replica of a cluster."""

    database: str
    cluster: str = ""

    def render(self, template: str) -> str:
        """``template`` (a ``{database}`` placeholder, one statement) as this layout runs it."""
        sql = template.replace("{database}", self.database)
        if not self.cluster:
            return sql
        return "\n".join(self._clustered(line) for line in sql.splitlines())

    @property
    def mutation_settings(self) -> dict[str, int]:
        """Query settings that make an ALTER ... DELETE/UPDATE return only once done (on every replica)."""
        return {"mutations_sync": 2 if self.cluster else 1}

    def _clustered(self, line: str) -> str:
        if line.lstrip().startswith("--"):
            return line
        line = _NAMED.sub(rf"\1\2 ON CLUSTER `{self.cluster}`", line)
        return _ENGINE.sub(_replicated, line)


def _replicated(engine: re.Match[str]) -> str:
    kind, arguments = engine.group(1), engine.group(2)
    return f"ENGINE = Replicated{kind}MergeTree({REPLICA_PATH}{', ' + arguments if arguments else ''})"
