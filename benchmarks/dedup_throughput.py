"""Dedup of the embedded KJV corpus (the default run) on the sharded datatrove path.

Run: ``.venv/bin/python benchmarks/dedup_throughput.py [--repeats 3] [--tasks 1]``. Measures
one full :func:`~ih_kedro.science.data.sharded.dedup.sharded_deduplicate` (read the zstd shards,
exact keys, word 5-gram MinHash signatures, buckets, verified clustering, filtering) with the
default parameters: wall and CPU seconds (this process and its workers), documents/s and MB/s
of UTF-8 text, and each stage's wall time. The fixed cost of starting the stages (process pools,
logs) dominates at this size: see ``sharded_dedup.py`` for a corpus that matters.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import tempfile
import time
from pathlib import Path

import psutil
import yaml

from ih_kedro.science.data.corpus import iter_pile_documents
from ih_kedro.science.data.embedded_corpus import write_embedded_corpus
from ih_kedro.science.data.sharded.dedup import sharded_deduplicate
from ih_kedro.science.data.sharded.executor import ExecutorSettings

PARAMS = Path(__file__).resolve().parents[1] / "conf/base/parameters_data_engineering.yml"


def cpu_seconds() -> float:
    t = psutil.Process().cpu_times()
    return t.user + t.system + t.children_user + t.children_system


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tasks", type=int, default=1)
    args = parser.parse_args()
    dedup = yaml.safe_load(PARAMS.read_text())["data_engineering"]["dedup"]
    with tempfile.TemporaryDirectory() as tmp:
        paths = write_embedded_corpus(Path(tmp) / "kjv")
        docs = list(iter_pile_documents(paths))
        mb = sum(len(d.text.encode("utf-8")) for d in docs) / 1e6
        walls, cpus, stages = [], [], []
        for _ in range(args.repeats):
            wall, cpu = time.perf_counter(), cpu_seconds()
            _, report = sharded_deduplicate(
                paths, Path(tmp) / "w", **dedup, executor=ExecutorSettings(tasks=args.tasks)
            )
            walls.append(time.perf_counter() - wall)
            cpus.append(cpu_seconds() - cpu)
            stages.append(report["engine"]["stage_wall_s"])
    wall, cpu = statistics.median(walls), statistics.median(cpus)
    print(f"KJV: {len(docs)} documents, {mb:.2f} MB text; params {dedup}; tasks {args.tasks}")
    print(f"python {platform.python_version()}, {platform.machine()}, median of {args.repeats}")
    print(f"wall {wall:.2f} s ({len(docs) / wall:.0f} docs/s, {mb / wall:.2f} MB/s)")
    print(f"CPU  {cpu:.2f} s ({len(docs) / cpu:.0f} docs/s, {mb / cpu:.2f} MB/s per CPU s)")
    for name in stages[0]:
        print(f"  {name:12s} {statistics.median(s[name] for s in stages):6.2f} s wall")
    print(
        f"removed: {report['exact_duplicates']['documents_removed']} exact, "
        f"{report['near_duplicates']['documents_removed']} near duplicates"
    )


if __name__ == "__main__":
    main()
