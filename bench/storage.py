"""Bytes on disk per LLM call, per table, with and without content; the codecs before and after (``--calls N``).

Fills a fresh embedded chDB with N calls as ``bench/ui_pages.py`` does (8 detectors' findings per
call, 1-2 calls per trace; prompt, sources and answer of 150-300 words each drawn from a word list,
so they compress like prose; JSON evidence quoting the answer; an alert on ~1 % of the traces;
a few hundred verdicts), plus each call's erasable ``user.id`` and ``session.id``, into a database
migrated as the worker migrates it.  Then copies every table into a second database whose columns
carry no codec (ClickHouse's default LZ4: the state before the codec migration), merges both to
one part per partition (``OPTIMIZE ... FINAL``), and reports compressed bytes per call of each
table's content columns (what ``retention.content_days`` expires) and of the rest, before and after.

    .venv/bin/python bench/storage.py [--calls 1000000] [--data-dir DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.ui_pages import DB, DETECTORS, fill, remove_codecs
from pipeline.sinks.clickhouse import connect, migrate
from pipeline.sinks.retention import EXPIRING_TABLES

BEFORE = "before_codecs"
TABLES = ("llm_calls", "findings", "alerts", "labels")
CONTENT = {table.name: set(table.content) for table in EXPIRING_TABLES}


def copy_without_codecs(client: Any) -> None:
    """Every table of DB again in BEFORE, its columns' codecs removed, then its rows copied."""
    client.command(f"CREATE DATABASE IF NOT EXISTS {BEFORE}")
    for table in TABLES:
        client.command(f"CREATE TABLE {BEFORE}.{table} AS {DB}.{table}")
    remove_codecs(client, BEFORE, TABLES)
    for table in TABLES:
        client.command(f"INSERT INTO {BEFORE}.{table} SELECT * FROM {DB}.{table}")  # noqa: S608 - bench-made SQL


def bytes_by_part(client: Any, database: str, table: str) -> tuple[int, int]:
    """Compressed bytes of ``table``'s content columns and of its other columns (active parts)."""
    rows = client.query(
        "SELECT column, sum(column_data_compressed_bytes) FROM system.parts_columns"
        " WHERE database = {db:String} AND table = {t:String} AND active GROUP BY column",
        parameters={"db": database, "t": table},
    ).result_rows
    content = sum(int(size) for column, size in rows if column in CONTENT.get(table, set()))
    return content, sum(int(size) for _, size in rows) - content


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=1_000_000, help="LLM calls (8 findings rows each)")
    parser.add_argument("--batches", type=int, default=10, help="inserts per table (parts before merges)")
    parser.add_argument("--data-dir", type=Path, help="chDB directory (default: a temporary one)")
    args = parser.parse_args()

    with contextlib.ExitStack() as stack:
        data_dir = args.data_dir or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="halluwatch-storage-")))
        client = connect(f"chdb://{data_dir}")
        migrate(client, DB)
        started = time.perf_counter()
        fill(client, args.calls * len(DETECTORS), args.batches, replay_per_mille=0)
        copy_without_codecs(client)
        for database in (DB, BEFORE):
            for table in TABLES:  # wide parts only: compact ones do not count bytes per column
                client.command(f"ALTER TABLE {database}.{table} MODIFY SETTING min_bytes_for_wide_part = 0")
                client.command(f"OPTIMIZE TABLE {database}.{table} FINAL")
        calls = client.query(f"SELECT count() FROM {DB}.llm_calls").result_rows[0][0]  # noqa: S608
        print(f"{calls:,} calls filled, copied and merged in {time.perf_counter() - started:.0f} s")
        print(f"{'bytes per call':<16}{'content':>22}{'rest':>22}{'total':>22}")
        print(f"{'':<16}" + f"{'before':>8}{'after':>8}{'ratio':>6}" * 3)
        totals = [0, 0, 0, 0]
        for table in TABLES:
            before, after = bytes_by_part(client, BEFORE, table), bytes_by_part(client, DB, table)
            sizes = [before[0], after[0], before[1], after[1]]
            totals = [t + s for t, s in zip(totals, sizes, strict=True)]
            print(f"{table:<16}" + _cells(sizes, calls))
        print(f"{'all tables':<16}" + _cells(totals, calls))


def _cells(sizes: list[int], calls: int) -> str:
    """before/after/ratio of content, rest and total, per call."""
    content_before, content_after, rest_before, rest_after = sizes
    pairs = [(content_before, content_after), (rest_before, rest_after),
             (content_before + rest_before, content_after + rest_after)]  # fmt: skip
    return "".join(f"{b / calls:>8.0f}{a / calls:>8.0f}{(b / a if a else 0):>6.2f}" for b, a in pairs)


if __name__ == "__main__":
    main()
