"""What one source part costs: encoding it, against reading it back from the passage store or a ClickHouse table.

The parts are RAGTruth's sources cut as the detectors read them (``detectors.reading``),
encoded by the default model; each store gets them written in one batch and read back in
batches of ``--batch`` (a batch of calls' parts), several rounds, median per part.  The
ClickHouse table is the same key/value shape in embedded chDB (a ClickHouse server adds a
network round trip and the transfer on top).

    .venv/bin/python bench/passage_store.py [--parts 400] [--batch 64] [--rounds 5] [--profile accurate]
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from detectors.config import EmbeddingConfig
from detectors.models.embeddings import Embedder
from detectors.models.passage_store import PassageStore
from detectors.text.reading import parts_of
from pipeline.offline.evaluate import read_records
from pipeline.sinks.clickhouse import connect

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parts", type=int, default=400)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--profile", default="accurate", choices=("accurate", "fast"))
    args = parser.parse_args()
    texts = list(dict.fromkeys(
        source[start:end]
        for record in read_records(DATA / "ragtruth" / "ragtruth.jsonl")
        for source in record.context
        for start, end in parts_of(source, 500)
    ))[: args.parts]  # fmt: skip
    embedder = Embedder(EmbeddingConfig(profile=args.profile))  # type: ignore[arg-type]
    embedder.load()
    encode = []
    for _ in range(args.rounds):
        embedder.close()  # an empty in-memory cache: every part through the model
        embedder.load()
        started = time.perf_counter()
        passes = embedder.encode_tokens(texts, cache=True)
        encode.append((time.perf_counter() - started) / len(texts))
    rows = {
        hashlib.blake2b(t.encode(), digest_size=20).digest(): p.to_bytes() for t, p in zip(texts, passes, strict=True)
    }
    keys = list(rows)
    batches = [keys[i : i + args.batch] for i in range(0, len(keys), args.batch)]
    size = sum(map(len, rows.values())) / len(rows)
    print(f"{len(texts)} RAGTruth parts ({args.profile}), {size / 1e3:.0f} kB each stored, batches of {args.batch}, "
          f"median of {args.rounds} rounds, per part:")  # fmt: skip
    print(f"  encode (one thread): {statistics.median(encode) * 1e3:.2f} ms")
    with tempfile.TemporaryDirectory() as folder:
        store = PassageStore(Path(folder) / "passages.sqlite", max_megabytes=10_000, ttl_hours=1)
        write = _timed(lambda: store.write(rows), args.rounds) / len(rows)
        read = _timed(lambda: [store.read(batch) for batch in batches], args.rounds) / len(rows)
        print(f"  SQLite passage store: write {write * 1e3:.2f} ms, read {read * 1e3:.2f} ms")
        client = connect(f"chdb://{folder}/clickhouse")
        client.command("CREATE TABLE passages (key String, vectors String) ENGINE = MergeTree ORDER BY key")
        data = [[key.hex(), value] for key, value in rows.items()]
        write = _timed(lambda: client.insert("passages", data, column_names=["key", "vectors"]), args.rounds) / len(
            rows
        )

        def select() -> None:
            for batch in batches:
                client.query(
                    "SELECT key, vectors FROM passages WHERE key IN %(keys)s",
                    parameters={"keys": [key.hex() for key in batch]},
                    query_formats={"String": "bytes"},
                )

        read = _timed(select, args.rounds) / len(rows)
        print(f"  ClickHouse table (embedded chDB): write {write * 1e3:.2f} ms, read {read * 1e3:.2f} ms")


def _timed(action: object, rounds: int) -> float:
    seconds = []
    for _ in range(rounds):
        started = time.perf_counter()
        action()  # type: ignore[operator]
        seconds.append(time.perf_counter() - started)
    return statistics.median(seconds)


if __name__ == "__main__":
    main()
