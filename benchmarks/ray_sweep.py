"""Sweep wall time: the Ray executor (one single-thread run per core) vs sequential.

Trains cells of the default ``law_fit`` grid (conf/base/parameters_law_fit.yml) on the packed
corpus that ``kedro run --pipeline=data_engineering`` writes, once with
``executor.kind=sequential`` and all cores' threads in one run at a time (today's way), once
with ``kind=ray``, one-thread runs side by side, back to back, in fresh checkpoint folders.
Prints both walls, the speed-up and whether every run stopped at the same step.

    .venv/bin/kedro run --pipeline=data_engineering
    .venv/bin/python benchmarks/ray_sweep.py                                # the whole grid
    .venv/bin/python benchmarks/ray_sweep.py --batch-sizes 32 128 --context-lengths 24 32 \\
        --max-steps 300                                                     # a smaller grid
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import yaml

from ih_kedro.pipelines.training.nodes import train_sweep
from ih_kedro.science.data.tokenization import read_packed_tokens
from ih_kedro.science.training.checkpoints import CheckpointStore

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", default=str(ROOT / "data/05_model_input/train_tokens"))
    parser.add_argument("--batch-sizes", type=int, nargs="*")
    parser.add_argument("--context-lengths", type=int, nargs="*")
    parser.add_argument("--max-steps", type=int, help="cap every run's steps")
    parser.add_argument("--order", default="sequential,ray")
    args = parser.parse_args()
    params = yaml.safe_load((ROOT / "conf/base/parameters_law_fit.yml").read_text())
    training = params["law_fit"]["training"]
    training["mlflow"] = False
    if args.batch_sizes:
        training["batch_sizes"] = args.batch_sizes
    if args.context_lengths:
        training["context_lengths"] = args.context_lengths
    if args.max_steps:
        training["max_steps"] = args.max_steps
    packed = read_packed_tokens(args.tokens)
    cores = len(os.sched_getaffinity(0))
    executors = {
        "sequential": {"kind": "sequential", "num_cpus_per_run": cores},
        "ray": {"kind": "ray", "num_cpus_per_run": 1},
    }
    walls, steps = {}, {}
    with tempfile.TemporaryDirectory(prefix="ray-sweep-bench-") as folder:
        for kind in args.order.split(","):
            store = CheckpointStore(Path(folder) / kind)
            start = time.perf_counter()
            manifest = train_sweep(packed, store, {**training, "executor": executors[kind]})
            walls[kind] = time.perf_counter() - start
            steps[kind] = manifest.set_index("run_name")["steps_trained"].to_dict()
            print(f"{kind}: {walls[kind]:.1f} s, steps {steps[kind]}", flush=True)
    same = steps["sequential"] == steps["ray"]
    print(
        f"| {len(steps['ray'])} runs | sequential ({cores} threads) {walls['sequential']:.0f} s "
        f"| Ray ({cores} x 1 thread) {walls['ray']:.0f} s "
        f"| speed-up {walls['sequential'] / walls['ray']:.2f}x | same stop steps: {same} |"
    )


if __name__ == "__main__":
    main()
