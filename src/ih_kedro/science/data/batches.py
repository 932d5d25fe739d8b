"""Deterministic training batches: the batch at step ``s`` is a pure function of (seed, step).

Every batch is ``B`` random windows of ``C + 1`` tokens from the packed token stream (inputs
``[:, :-1]``, next-token targets ``[:, 1:]``). The windows' offsets and any data-variant edits
come from a NumPy generator seeded with ``(seed, step)`` alone, so any step's batch can be
reproduced in isolation and a resumed run sees exactly the batches an uninterrupted run sees.

The data variant that edits the windows is looked up by name in the registry
(:mod:`ih_kedro.science.data.variants.registry`; the copy variants are in
:mod:`ih_kedro.science.data.variants.copies`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ih_kedro.science.data.variants.registry import lookup_variant

# Salt that keeps the batch stream independent of other uses of the same run seed
# (model init uses the seed directly).
_BATCH_STREAM = 0x1D_BA7C


@dataclass(frozen=True)
class Batch:
    """One training batch.

    ``tokens`` holds ``B`` windows of ``C + 1`` token ids: the model reads ``tokens[:, :-1]`` and
    predicts ``tokens[:, 1:]``. ``copied`` marks the positions a data variant wrote.
    """

    tokens: torch.Tensor  # (B, C+1) int64
    copied: np.ndarray  # (B, C+1) bool

    @property
    def inputs(self) -> torch.Tensor:
        return self.tokens[:, :-1]  # (B, C)

    @property
    def targets(self) -> torch.Tensor:
        return self.tokens[:, 1:]  # (B, C)

    @property
    def copied_fraction(self) -> float:
        """Fraction of the batch's tokens that a data variant copied (0 for natural text)."""
        return float(self.copied.mean()) if self.copied.size else 0.0


def batch_rng(seed: int, step: int) -> np.random.Generator:
    """The generator that draws step ``step``'s batch of a run seeded ``seed``."""
    return np.random.default_rng([_BATCH_STREAM, int(seed), int(step)])


def sample_batch(
    tokens: np.ndarray,
    batch_size: int,
    context_length: int,
    seed: int,
    step: int,
    *,
    data_variant: str = "natural",
    variant_options: Mapping[str, Any] | None = None,
) -> Batch:
    """Return the batch of step ``step`` (0-based) for a run seeded ``seed``.

    ``tokens`` is the flat packed stream (1-D, possibly a memmap). Each of the ``batch_size``
    windows has ``context_length + 1`` tokens starting at a uniform random offset. The result
    depends on nothing but the arguments.
    """
    variant = lookup_variant(data_variant)
    width = context_length + 1
    n_tokens = int(tokens.shape[0])
    if batch_size <= 0 or context_length <= 0:
        raise ValueError(
            f"batch_size ({batch_size}) and context_length ({context_length}) must be positive"
        )
    if n_tokens < width:
        raise ValueError(
            f"the corpus has {n_tokens} tokens, fewer than one sequence of {width} tokens"
        )
    rng = batch_rng(seed, step)
    offsets = rng.integers(0, n_tokens - width + 1, size=batch_size)  # (B,)
    index = offsets[:, None] + np.arange(width)[None, :]  # (B, C+1)
    windows = np.asarray(tokens[index], dtype=np.int64)  # (B, C+1)
    copied = variant(windows, rng, variant_options or {}, step)  # (B, C+1)
    return Batch(tokens=torch.from_numpy(windows), copied=copied)


__all__ = ["Batch", "batch_rng", "sample_batch"]
