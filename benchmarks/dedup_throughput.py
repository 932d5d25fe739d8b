"""Dedup throughput on the embedded KJV corpus with the default parameters.

Run: ``.venv/bin/python benchmarks/dedup_throughput.py [--repeats 3]``. Measures one full
``deduplicate`` pass (read the zstd shards, normalise, exact hash, word 5-gram MinHash with
the default permutations, LSH query + insert) and its parts, in documents/s and MB/s of UTF-8
text. Prints a small table; rates are per CPU second of this process.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import tempfile
import time
from pathlib import Path

import yaml

from ih_kedro.science.corpus import (
    DocumentStream,
    MinHasher,
    content_hash,
    deduplicate,
    write_embedded_corpus,
)

PARAMS = Path(__file__).resolve().parents[1] / "conf/base/parameters_data_engineering.yml"


def _timed(fn, repeats: int) -> tuple[float, float]:
    """Median (wall, CPU) seconds of ``repeats`` calls. CPU time of this process is the
    number to compare on a shared machine; wall time includes waiting for a core."""
    walls, cpus = [], []
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return statistics.median(walls), statistics.median(cpus)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    dedup = yaml.safe_load(PARAMS.read_text())["data_engineering"]["dedup"]
    with tempfile.TemporaryDirectory() as tmp:
        stream = DocumentStream(write_embedded_corpus(Path(tmp)))
        docs = list(stream)
        n_docs = len(docs)
        mb = sum(len(d.text.encode("utf-8")) for d in docs) / 1e6
        hasher = MinHasher(dedup["num_perm"], dedup["seed"], dedup["shingle_size"])
        rows = [
            ("read shards (zstd + JSON)", _timed(lambda: sum(1 for _ in stream), args.repeats)),
            ("exact hash only", _timed(lambda: [content_hash(d.text) for d in docs], args.repeats)),
            ("MinHash signatures only", _timed(lambda: [hasher(d.text) for d in docs], args.repeats)),
            ("full deduplicate (from shards)", _timed(lambda: deduplicate(stream, **dedup), args.repeats)),
        ]  # fmt: skip
        _, report = deduplicate(stream, **dedup)
    print(f"KJV: {n_docs} documents, {mb:.2f} MB text; params {dedup}")
    print(f"python {platform.python_version()}, {platform.machine()}, median of {args.repeats}")
    print(f"{'stage':32s} {'wall s':>7s} {'CPU s':>7s} {'docs/s':>8s} {'MB/s':>6s}  (per CPU s)")
    for name, (wall, cpu) in rows:
        print(f"{name:32s} {wall:7.3f} {cpu:7.3f} {n_docs / cpu:8.0f} {mb / cpu:6.2f}")
    print(
        f"removed: {report['exact_duplicates']['documents_removed']} exact, "
        f"{report['near_duplicates']['documents_removed']} near duplicates"
    )


if __name__ == "__main__":
    main()
