"""Projected wall time and memory of the sharded dedup and packing on the Pile.

Run: ``.venv/bin/python benchmarks/pile_projection.py``. Every input is a measured rate from
``sharded_dedup.py`` / ``dedup_throughput.py`` (CPU seconds, so contention inflates them less
than wall time) or a stated assumption; see ``benchmarks/README.md``.
"""

from __future__ import annotations

import argparse

# The Pile (train): documents and text.
PILE_DOCS = 210e6
PILE_KB_PER_DOC = 825 * 2**30 / PILE_DOCS / 1e3  # 825 GiB of text: ~4.2 kB per document
PILE_TOKENS = 300e9  # GPT-2-sized BPE
DUP_SHARE = 0.30  # documents removed by near+exact dedup (the deduplicated Pile: ~207B of 300B)
BANDS = 18


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    # Measured (benchmarks/README.md): dedup CPU ms per document at two document sizes.
    p.add_argument("--ms-small", type=float, default=1000 / 905, help="0.565 kB docs, all stages")
    p.add_argument("--ms-kjv", type=float, default=1000 / 298, help="3.48 kB docs, all stages")
    p.add_argument("--share-buckets", type=float, default=0.027, help="of dedup CPU")
    p.add_argument("--share-exact", type=float, default=0.0015, help="of dedup CPU")
    p.add_argument("--pack-tokens-per-cpu-s", type=float, default=316e3)
    p.add_argument("--cores-per-node", type=int, default=32)
    p.add_argument("--pair-us", type=float, default=5.0, help="clustering: per candidate pair")
    p.add_argument("--verify-us", type=float, default=0.0, help="clustering: per new link")
    p.add_argument("--process-mib", type=float, default=194.0, help="peak RSS of one task")
    args = p.parse_args()

    c1 = (args.ms_kjv - args.ms_small) / (3.48 - 0.565)  # ms per kB
    c0 = args.ms_small - c1 * 0.565  # ms per document
    ms_doc = c0 + c1 * PILE_KB_PER_DOC
    total = PILE_DOCS * ms_doc / 1e3  # CPU s, all dedup stages
    # Buckets and exact find handle fixed-size records: their cost per document is the small
    # documents' share, whatever the text length; the rest (signatures, filtering) scales.
    buckets = PILE_DOCS * args.ms_small * args.share_buckets / 1e3
    serial_buckets = buckets / BANDS  # one worker per band
    exact = PILE_DOCS * args.ms_small * args.share_exact / 1e3  # one finder task
    parallel = total - buckets - exact
    dups = PILE_DOCS * DUP_SHARE
    pairs = dups * BANDS  # a near-identical copy is a candidate in every band
    cluster = pairs * args.pair_us / 1e6 + dups * args.verify_us / 1e6
    cluster_gib = dups * 200 / 2**30
    pack = PILE_TOKENS / args.pack_tokens_per_cpu_s
    print(f"dedup model: {c0:.2f} ms/doc + {c1:.2f} ms/kB -> {ms_doc:.2f} ms per Pile doc")
    print(f"dedup CPU total {total / 3600:,.0f} h; packing CPU {pack / 3600:,.0f} h")
    print("| nodes | cores | signatures + filtering | buckets | exact find | clustering |"
          " dedup total | packing | RAM per node | clustering RAM |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|")
    for nodes in (1, 8, 64):
        cores = nodes * args.cores_per_node
        k = max(1, cores // BANDS)  # workers per band
        t_par = parallel / cores
        t_buckets = serial_buckets / k
        t_total = t_par + t_buckets + exact + cluster
        t_pack = pack / cores
        ram = args.cores_per_node * args.process_mib / 1024
        print(
            f"| {nodes} | {cores} | {t_par / 3600:.2f} h | {t_buckets / 60:.1f} min | "
            f"{exact / 60:.0f} min | {cluster / 60:.0f} min | **{t_total / 3600:.1f} h** | "
            f"{t_pack / 3600:.2f} h | {ram:.1f} GiB | {cluster_gib:.0f} GiB |"
        )


if __name__ == "__main__":
    main()
