"""Frozen attention patterns, probes and model shared by the score and checkpoint-score tests."""

from __future__ import annotations

import torch
from torch import nn

from ih_kedro.science.training.models import build_model


def table_patterns(n_heads: int = 4) -> dict[int, torch.Tensor]:
    """Frozen (1, H, 6, 6) patterns. Layer 0: head 0 P0[i, j] = 0.01 (10 i + j), head 1
    P1[i, j] = (j + 1) / (i + 1), head 2 all ones, head 3 all zeros; layer 1 swaps heads 0/1."""
    i = torch.arange(6.0)[:, None]
    j = torch.arange(6.0)[None, :]
    p0 = 0.01 * (10 * i + j)
    p1 = (j + 1) / (i + 1)
    ones, zeros = torch.ones(6, 6), torch.zeros(6, 6)
    layer0 = torch.stack([p0, p1, ones, zeros][:n_heads])[None]  # (1, H, 6, 6)
    layer1 = torch.stack([p1, p0, ones, zeros][:n_heads])[None]
    return {0: layer0, 1: layer1}


# Three probes, scored one per batch: S || S, a non-repeated one (previous occurrences
# -1, -1, 0, -1, 1, 3) and one with no repeated token (no valid induction query: NaN).
TABLE_PROBES = torch.tensor([[1, 2, 3, 1, 2, 3], [7, 8, 7, 9, 8, 9], [1, 2, 3, 4, 5, 6]])


def table_model() -> nn.Module:
    return build_model("attn-only-2l-d64", 20, 6, seed=0).eval()  # 4 heads
