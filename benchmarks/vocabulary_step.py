"""Step cost of the synthetic experiments' models over the tokenizer's vocabulary vs a compact one.

``pareto`` and ``markov`` train on data that emits only 257 / 64 token types; their token streams
are relabelled into a compact vocabulary (``ih_kedro.science.data.vocabulary``: the kept tokens + one
id for every other type + EOS). This measures what that buys: one training step (forward,
cross-entropy, backward, AdamW) of the attention-only 2L d128 at each experiment's B x C, on one
thread, over 1,024 ids and over the compact size.

    .venv/bin/python benchmarks/vocabulary_step.py --steps 30
"""

from __future__ import annotations

import argparse
import time

import torch

from ih_kedro.science.training.models import build_model

CASES = (  # (experiment, B, C, compact vocabulary size)
    ("pareto", 64, 32, 258),
    ("markov", 128, 32, 66),
)


def step_seconds(batch: int, context: int, vocab: int, steps: int, warmup: int = 5) -> float:
    """Mean seconds per training step over ``steps`` steps after ``warmup``."""
    model = build_model("attn-only-2l-d128", vocab, context, seed=0, attn_implementation="sdpa")
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.98))
    tokens = torch.randint(
        0, vocab, (batch, context + 1), generator=torch.Generator().manual_seed(0)
    )

    def step() -> None:
        logits = model(tokens[:, :-1]).logits  # (B, C, V)
        loss = torch.nn.functional.cross_entropy(
            logits.reshape(-1, vocab), tokens[:, 1:].reshape(-1)
        )
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    for _ in range(warmup):
        step()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    return (time.perf_counter() - start) / steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--full-vocabulary", type=int, default=1024)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print("| experiment | B x C | ms/step, 1,024 ids | ms/step, compact | compact ids | speed-up |")
    print("|---|---|---|---|---|---|")
    for name, batch, context, compact in CASES:
        full = step_seconds(batch, context, args.full_vocabulary, args.steps)
        small = step_seconds(batch, context, compact, args.steps)
        print(f"| {name} | {batch} x {context} | {1e3 * full:.1f} | {1e3 * small:.1f} | {compact} "
              f"| {full / small:.2f}x |")  # fmt: skip


if __name__ == "__main__":
    main()
