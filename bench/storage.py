"""Bytes on disk per LLM call, per table, with and without content; as stored and with a candidate codec.

Fills a fresh embedded chDB with N calls as ``bench/ui_pages.py`` does (8 detectors' findings per
call, 1-2 calls per trace; prompt, sources and answer of 150-300 words each drawn from a word list,
so they compress like prose; JSON evidence quoting the answer; alerts on ~1,150 traces; 300
verdicts), plus each call's erasable ``user.id`` and ``session.id``, into a database migrated as
the worker migrates it.  Then copies every table into a second database whose text and id
columns (``CODEC_CANDIDATES``) use ``--codec`` (each ``--codec`` in turn), merges every table to
one wide part per partition (``OPTIMIZE ... FINAL``; wide, because compact parts do not count
bytes per column), and reports compressed bytes per call of each table's content columns (what
``retention.content_days`` empties) and of the rest, as stored and with the codec.

    .venv/bin/python bench/storage.py [--calls 1000000] [--codec 'ZSTD(3)' --codec 'LZ4HC(9)']
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

from bench.ui_pages import CODEC_DB, DB, DETECTORS, TABLES, copy_with_codec, fill
from pipeline.sinks.clickhouse import connect, migrate
from pipeline.sinks.retention import EXPIRING_TABLES

CONTENT = {table.name: set(table.content) for table in EXPIRING_TABLES}


def merged(client: Any, database: str) -> None:
    """Every table of ``database`` in one wide part per partition."""
    for table in TABLES:
        client.command(f"ALTER TABLE {database}.{table} MODIFY SETTING min_bytes_for_wide_part = 0")
        client.command(f"OPTIMIZE TABLE {database}.{table} FINAL")


def part_codecs(client: Any, database: str) -> dict[str, int]:
    """How many active parts of ``database`` the server compressed with each default codec.

    ClickHouse's ``<compression>`` configuration may pick a codec by part size (chDB writes its
    largest merged parts with ZSTD): what "as stored" means depends on it.
    """
    rows = client.query(
        "SELECT default_compression_codec, count() FROM system.parts WHERE database = {db:String} AND active"
        " GROUP BY default_compression_codec",
        parameters={"db": database},
    ).result_rows
    return {str(codec): int(count) for codec, count in rows}


def table_bytes(client: Any, database: str, table: str) -> tuple[int, int]:
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
    parser.add_argument("--codec", action="append", help="candidate codec (repeatable; default ZSTD(3))")
    parser.add_argument("--data-dir", type=Path, help="chDB directory (default: a temporary one)")
    args = parser.parse_args()

    with contextlib.ExitStack() as stack:
        data_dir = args.data_dir or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="halluwatch-storage-")))
        client = connect(f"chdb://{data_dir}")
        migrate(client, DB)
        started = time.perf_counter()
        fill(client, args.calls * len(DETECTORS), args.batches, replay_per_mille=0)
        merged(client, DB)
        calls = client.query(f"SELECT count() FROM {DB}.llm_calls").result_rows[0][0]  # noqa: S608
        print(f"{calls:,} calls filled and merged in {time.perf_counter() - started:.0f} s")
        print(f"active parts by the server's default codec: {part_codecs(client, DB)}")
        stored = {table: table_bytes(client, DB, table) for table in TABLES}
        for codec in args.codec or ["ZSTD(3)"]:
            started = time.perf_counter()
            client.command(f"DROP DATABASE IF EXISTS {CODEC_DB}")
            copy_with_codec(client, CODEC_DB, codec)
            merged(client, CODEC_DB)
            print(f"\n{codec}: copied and merged in {time.perf_counter() - started:.0f} s; bytes per call:\n")
            print(f"| table | content as stored | content {codec} | ratio | rest as stored | rest {codec} | ratio "
                  f"| total as stored | total {codec} | ratio |")  # fmt: skip
            print("|---|---|---|---|---|---|---|---|---|---|")
            totals = [0, 0, 0, 0]
            for table in TABLES:
                (content, rest), (content_coded, rest_coded) = stored[table], table_bytes(client, CODEC_DB, table)
                sizes = [content, content_coded, rest, rest_coded]
                totals = [t + s for t, s in zip(totals, sizes, strict=True)]
                print(f"| {table} | " + _cells(sizes, calls))
            print("| all tables | " + _cells(totals, calls))


def _cells(sizes: list[int], calls: int) -> str:
    """As stored / with the codec / ratio, of content, rest and total, per call."""
    content_stored, content_coded, rest_stored, rest_coded = sizes
    pairs = [(content_stored, content_coded), (rest_stored, rest_coded),
             (content_stored + rest_stored, content_coded + rest_coded)]  # fmt: skip
    return " | ".join(f"{s / calls:.0f} | {c / calls:.0f} | {(s / c if c else 0):.2f}" for s, c in pairs) + " |"


if __name__ == "__main__":
    main()
