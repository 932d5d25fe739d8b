"""Sharded dedup and packing throughput (datatrove stages) on a synthetic ~100k-document corpus.

Run: ``.venv/bin/python benchmarks/sharded_dedup.py [--replicas 13] [--out bench.json]``.

The corpus: the King James Version cut into 100-word windows (~7.9k base documents), replicated
``--replicas`` times; every replica after the first has 20% of its words replaced by random
KJV words (seeded), so replicas are not near-duplicates of each other (word 5-gram Jaccard
~0.2). Then ``--near`` planted near-duplicates (a copy of a random document with 2 of its 100
words replaced: Jaccard ~0.8) and ``--exact`` planted exact duplicates (upper-cased copies) are
added at random places. The KJV itself has near-duplicate passages (e.g. the twelve offerings of
Numbers 7): they are counted by deduplicating the unperturbed base set alone.

Measured, for the same 2 tasks with 1 and with 2 workers: wall time, CPU time of the process
tree, documents/s and MB/s (of UTF-8 text), each stage's wall time and peak RSS (sum over the
process tree, and the largest single process; sampled every 50 ms), and recall of the planted
copies. Then the same for sharded packing (tokenizer trained on a 2,000-document sample).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import psutil

from ih_kedro.science.data.corpus import iter_pile_documents
from ih_kedro.science.data.corpus import write_pile_shards as write_shards
from ih_kedro.science.data.embedded_corpus import kjv_documents
from ih_kedro.science.data.sharded.dedup import sharded_deduplicate
from ih_kedro.science.data.sharded.executor import ExecutorSettings
from ih_kedro.science.data.sharded.packing import ShardedPacking, write_sharded_tokens
from ih_kedro.science.data.split import is_held_out
from ih_kedro.science.data.tokenization import train_bpe_tokenizer


class RssSampler:
    """Samples the RSS of this process and its descendants every ``interval`` seconds."""

    def __init__(self, interval: float = 0.05) -> None:
        self.interval = interval
        self.samples: list[tuple[float, int, int]] = []  # (time, total, largest process)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        me = psutil.Process()
        while not self._stop.is_set():
            rss = []
            for p in [me, *me.children(recursive=True)]:
                try:
                    rss.append(p.memory_info().rss)
                except psutil.Error:
                    pass
            self.samples.append((time.time(), sum(rss), max(rss)))
            time.sleep(self.interval)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def peak(self, start: float, end: float) -> tuple[float, float]:
        inside = [(t, s, m) for t, s, m in self.samples if start <= t <= end]
        if not inside:
            return float("nan"), float("nan")
        return max(s for _, s, _ in inside) / 2**20, max(m for _, _, m in inside) / 2**20


def make_corpus(folder: Path, replicas: int, n_near: int, n_exact: int, seed: int = 0) -> dict:
    rng = random.Random(seed)
    words = " ".join(d["text"] for d in kjv_documents()).split()
    vocab = sorted(set(re.findall(r"\w+", " ".join(words[:200_000]))))
    base = [" ".join(words[i : i + 100]) for i in range(0, len(words) - 99, 100)]
    docs = list(base)
    for _ in range(1, replicas):
        for text in base:
            w = text.split()
            for j in rng.sample(range(len(w)), len(w) // 5):
                w[j] = rng.choice(vocab)
            docs.append(" ".join(w))
    n_unique = len(docs)
    planted: list[tuple[str, str]] = []  # (original text, copy text)
    for _ in range(n_near):
        original = docs[rng.randrange(n_unique)]
        w = original.split()
        for j in rng.sample(range(len(w)), 2):
            w[j] = "planted" + rng.choice(vocab)
        planted.append((original, " ".join(w)))
    for _ in range(n_exact):
        original = docs[rng.randrange(n_unique)]
        planted.append((original, original.upper()))
    # Copies go after all originals, in random order, so a found copy is the one removed.
    copies = [c for _, c in planted]
    rng.shuffle(copies)
    all_docs = docs + copies
    paths = write_shards(({"text": t} for t in all_docs), folder, "bench", docs_per_shard=5000)
    base_paths = write_shards(({"text": t} for t in base), folder / "base", "base", 5000)
    return {
        "paths": paths,
        "base_paths": base_paths,
        "n_docs": len(all_docs),
        "n_base": len(base),
        "n_near": n_near,
        "n_exact": n_exact,
        "copies": set(range(n_unique, len(all_docs))),
        "mb": sum(len(t.encode()) for t in all_docs) / 1e6,
    }


def cpu_seconds() -> float:
    me = psutil.Process()
    t = me.cpu_times()
    return t.user + t.system + t.children_user + t.children_system


def run_dedup(corpus: dict, work: Path, workers: int, sampler: RssSampler) -> dict:
    settings = ExecutorSettings(tasks=2, workers=workers)
    wall, cpu = time.perf_counter(), cpu_seconds()
    keep, report = sharded_deduplicate(corpus["paths"], work, executor=settings)
    wall, cpu = time.perf_counter() - wall, cpu_seconds() - cpu
    removed = set(np.flatnonzero(~np.asarray(keep)).tolist())
    stages = {}
    for name, (start, end) in report["engine"]["stage_unix_time"].items():
        total, largest = sampler.peak(start, end)
        stages[name] = {
            "wall_s": report["engine"]["stage_wall_s"][name],
            "peak_rss_tree_mib": round(total, 1),
            "peak_rss_process_mib": round(largest, 1),
        }
    return {
        "workers": workers,
        "tasks": 2,
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "docs_per_s": round(corpus["n_docs"] / wall),
        "mb_per_s": round(corpus["mb"] / wall, 3),
        "docs_per_cpu_s": round(corpus["n_docs"] / cpu),
        "mb_per_cpu_s": round(corpus["mb"] / cpu, 3),
        "removed_exact": report["exact_duplicates"]["documents_removed"],
        "removed_near": report["near_duplicates"]["documents_removed"],
        "planted_copies_removed": len(removed & corpus["copies"]),
        "other_removed": len(removed - corpus["copies"]),
        "stages": stages,
    }


def run_packing(corpus: dict, keep_all: int, out: Path, workers: int, sampler: RssSampler):
    docs = iter_pile_documents(corpus["paths"])
    sample = [next(docs).text for _ in range(2000)]
    tokenizer = train_bpe_tokenizer(sample, vocab_size=1024)
    counts = [5000] * (len(corpus["paths"]) - 1)
    counts.append(corpus["n_docs"] - sum(counts))
    packing = ShardedPacking(
        paths=[str(p) for p in corpus["paths"]],
        file_offsets=np.concatenate([[0], np.cumsum(counts)[:-1]]).tolist(),
        keep=None,
        split="train",
        held_out_fraction=0.02,
        tokenizer_json=tokenizer.to_str(),
        eos_token_id=0,
        vocab_size=1024,
        batch_size=256,
        executor=ExecutorSettings(tasks=2, workers=workers),
    )
    start, wall, cpu = time.time(), time.perf_counter(), cpu_seconds()
    packed = write_sharded_tokens(packing, out)
    wall, cpu = time.perf_counter() - wall, cpu_seconds() - cpu
    total, largest = sampler.peak(start, time.time())
    return {
        "workers": workers,
        "tasks": 2,
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "tokens": len(packed),
        "documents": packed.meta["n_documents"],
        "docs_per_s": round(packed.meta["n_documents"] / wall),
        "tokens_per_s": round(len(packed) / wall),
        "mb_per_s": round(corpus["mb"] / wall, 3),  # of input text read
        "docs_per_cpu_s": round(packed.meta["n_documents"] / cpu),
        "peak_rss_tree_mib": round(total, 1),
        "peak_rss_process_mib": round(largest, 1),
        "checksum": packed.checksum,
        "shards": len(packed.meta["shards"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--replicas", type=int, default=13)
    parser.add_argument("--near", type=int, default=1000)
    parser.add_argument("--exact", type=int, default=500)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--skip-dedup", action="store_true", help="packing only")
    parser.add_argument(
        "--pack-shards",
        type=int,
        default=None,
        help="pack only the first N shards (5,000 docs each)",
    )
    args = parser.parse_args()
    result: dict = {"load_average_before": os.getloadavg(), "cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory() as tmp_name, RssSampler() as sampler:
        tmp = Path(tmp_name)
        t0 = time.perf_counter()
        corpus = make_corpus(tmp / "corpus", args.replicas, args.near, args.exact)
        result["corpus"] = {
            k: corpus[k] for k in ("n_docs", "n_base", "n_near", "n_exact", "mb")
        } | {"shards": len(corpus["paths"]), "generate_s": round(time.perf_counter() - t0, 1)}
        _, base_report = sharded_deduplicate(corpus["base_paths"], tmp / "wb")
        result["corpus"]["natural_removed_in_base"] = (
            base_report["documents_in"] - base_report["documents_out"]
        )
        print(json.dumps(result, indent=1), flush=True)
        result["dedup"] = [run_dedup(corpus, tmp / f"w{w}", w, sampler) for w in (1, 2)]
        print(json.dumps(result["dedup"], indent=1), flush=True)
        result["packing"] = [run_packing(corpus, 0, tmp / f"p{w}", w, sampler) for w in (1, 2)]
        print(json.dumps(result["packing"], indent=1), flush=True)
        n_val = sum(is_held_out(d.text, 0.02) for d in iter_pile_documents(corpus["paths"][:1]))
        result["packing_validation_docs_first_shard"] = n_val
    result["load_average_after"] = os.getloadavg()
    if args.out:
        args.out.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
