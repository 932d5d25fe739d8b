"""Out-of-core data engineering on datatrove: dedup and packing in parallel tasks over shards.

One executor setting (local processes, Ray or Slurm) runs every stage; the in-memory path in
the parent package gives the same documents on a small corpus.
"""
