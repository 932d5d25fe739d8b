"""Projected wall time of the paper grid (conf/paper) on N GPUs, one run per GPU.

Per-run cost = training FLOPs per token x tokens trained, as the sweep manifest's ``flops``
column computes it (6N + 6LCd), plus the LM head's matmul (6·d·V per token), which the
manifest leaves out with the embeddings but which dominates a 2-layer model with GPT-2's
50,257-token vocabulary. Runs are independent Ray tasks, so N GPUs run them greedily, longest
first (LPT); the grid's wall time is the busiest GPU's total.

    .venv/bin/python benchmarks/paper_projection.py --peak-tflops 989 --mfu 0.11
"""

from __future__ import annotations

import argparse
import heapq
from pathlib import Path

import yaml

from ih_kedro.science.training.grid import expand_grid
from ih_kedro.science.training.models import build_model, training_flops_per_token

ROOT = Path(__file__).resolve().parents[1]


def paper_vocab_size() -> int:
    """The paper tokenizer's vocabulary size (``conf/paper/parameters_data_engineering.yml``)."""
    data = yaml.safe_load((ROOT / "conf/paper/parameters_data_engineering.yml").read_text())
    return int(data["data_engineering"]["tokenizer"]["vocab_size"])


def flops_per_token(model, context_length: int, vocab: int) -> float:
    """Training FLOPs per token: the manifest's 6N + 6LCd plus the LM head's 6·d·V."""
    d_model = model.config.hidden_size
    return training_flops_per_token(model, context_length) + 6 * d_model * vocab


def lpt_makespan(costs: list[float], n_workers: int) -> float:
    """Longest-processing-time-first schedule of ``costs`` on ``n_workers``: the makespan."""
    loads = [0.0] * n_workers
    heapq.heapify(loads)
    for cost in sorted(costs, reverse=True):
        heapq.heappush(loads, heapq.heappop(loads) + cost)
    return max(loads)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peak-tflops", type=float, default=989.0, help="bf16 dense peak")
    parser.add_argument(
        "--mfu",
        type=float,
        default=0.11,
        help="model FLOPs utilisation (measured on one H200: 0.11 at 65,536-token passes, "
        "0.059 at 4,096; benchmarks/README.md)",
    )
    parser.add_argument("--gpus", type=int, nargs="+", default=[1, 8, 64])
    parser.add_argument(
        "--tokens-fraction",
        type=float,
        default=1.0,
        help="fraction of each run's token budget trained (1 = no early stop)",
    )
    args = parser.parse_args()
    params = yaml.safe_load((ROOT / "conf/paper/parameters_law_fit.yml").read_text())
    vocab = paper_vocab_size()
    configs = expand_grid(params["law_fit"]["training"])
    rate = args.peak_tflops * 1e12 * args.mfu  # FLOP/s per GPU
    models: dict = {}
    costs = []
    for config in configs:
        key = (str(config.preset), config.positions)
        if key not in models:
            models[key] = build_model(config.preset, vocab, config.positions, seed=0)
        model = models[key]
        per_token = flops_per_token(model, config.context_length, vocab)
        tokens = config.total_steps * config.tokens_per_step * args.tokens_fraction
        costs.append(per_token * tokens / rate)  # seconds on one GPU
    total = sum(costs)
    print(
        f"{len(configs)} runs; per run {min(costs) / 3600:.2f}-{max(costs) / 3600:.2f} GPU-h; "
        f"total {total / 3600:.1f} GPU-h at {args.mfu:.0%} of {args.peak_tflops:g} TFLOP/s"
    )
    print("| GPUs | wall | busiest GPU's share of the work |")
    print("|---|---|---|")
    for n in args.gpus:
        wall = lpt_makespan(costs, n)
        print(f"| {n} | {wall / 3600:.1f} h | {wall / total:.1%} |")


if __name__ == "__main__":
    main()
