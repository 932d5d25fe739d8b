"""Time to score all heads of one checkpoint: batched passes vs one forward pass per head.

Run: ``.venv/bin/python benchmarks/telemetry_scoring.py``. The per-head loop is timed on the
first ``LOOP_HEADS`` heads and extrapolated to all heads.
"""

from __future__ import annotations

import time

import torch

from ih_kedro.science.telemetry.instrumentation import hook_name, instrument
from ih_kedro.science.telemetry.probes import repeated_token_probes, uniform_token_pool
from ih_kedro.science.telemetry.scores import repeated_probe_scores
from ih_kedro.science.training.models import build_model

LOOP_HEADS = 4
CASES = [("attn-only-2l-d128", 100, 4096), ("gpt2-small", 16, 50257)]


@torch.no_grad()
def per_head_loop(model, probes, heads):
    length = probes.shape[1] // 2
    query = torch.arange(length, 2 * length)
    for layer, head in heads:
        with instrument(model, record_pattern=True, layers=[layer]) as inst:
            model(probes)
        pattern = inst.cache[hook_name(layer, "hook_pattern")][:, head]  # (B, T, T)
        pattern[:, query, query - (length - 1)].mean()


def main() -> None:
    torch.set_num_threads(2)
    for preset, n, vocab in CASES:
        model = build_model(preset, vocab, 128, seed=0).eval()
        probes = repeated_token_probes(n, 50, uniform_token_pool(vocab), seed=0)
        start = time.perf_counter()
        repeated_probe_scores(model, probes, batch_size=32)
        batched = time.perf_counter() - start
        n_layers, n_heads = model.config.num_hidden_layers, model.config.num_attention_heads
        heads = [(la, h) for la in range(n_layers) for h in range(n_heads)][:LOOP_HEADS]
        start = time.perf_counter()
        per_head_loop(model, probes, heads)
        loop = (time.perf_counter() - start) / len(heads) * n_layers * n_heads
        print(
            f"{preset}: n={n} L=50, {n_layers * n_heads} heads: batched all scores "
            f"{batched:.2f}s; per-head loop (PS only, extrapolated) {loop:.1f}s"
        )


if __name__ == "__main__":
    main()
