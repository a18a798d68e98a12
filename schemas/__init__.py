"""ClickHouse DDL, applied in file-name order by ``halluwatch migrate``.

Each ``NNN_name.sql`` file is one migration: a single statement with a ``{database}``
placeholder.  Migrations only add (tables, columns, indexes, codecs): a worker of the
previous release keeps writing to a store the current one migrated.  Applied versions are
recorded in ``schema_migrations``, so a migration runs once per database; statements are
``IF NOT EXISTS`` as well, so a half-applied run can simply be repeated.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources


@dataclass(frozen=True, slots=True)
class Migration:
    """One numbered DDL file."""

    version: int
    name: str
    sql_template: str  # rendered for a database (and a cluster) by pipeline.sinks.ddl.Layout


def migrations() -> list[Migration]:
    """All migrations shipped with this package, oldest first."""
    found = []
    for entry in resources.files(__name__).iterdir():
        if entry.name.endswith(".sql"):
            number, _, name = entry.name.removesuffix(".sql").partition("_")
            found.append(Migration(int(number), name, entry.read_text("utf-8")))
    return sorted(found, key=lambda migration: migration.version)
