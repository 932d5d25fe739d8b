"""In-context copy accuracy on held-out natural text: an ICL measure tiny models can do.

The function-vector probes and the late-minus-early loss (``icl_score``) sit at chance for the
2-layer CPU models of the embedded default, so the Bi-Induct comparison needs an in-context
performance measure those models can be above chance on. This one asks for the most basic
in-context skill, reproducing text seen earlier in the window:

- a **copy probe** is the first ``L`` tokens ``x`` of a held-out natural sequence, repeated:
  ``x ‖ x`` (``2L`` tokens, ``2L <= C``);
- **copy accuracy** (``copy``) is the top-1 accuracy of the next-token prediction on the second
  copy, i.e. predicting ``x[1..L-1]`` at positions ``L+1..2L-1`` (the first token of the second
  copy follows ``x[L-1]``, which has no earlier occurrence to copy from, so it is left out);
- its **chance level** (``copy_first``) is the same model's accuracy on the same tokens in the
  first copy (predicting ``x[1..L-1]`` at positions ``1..L-1``), where nothing earlier in the
  window predicts them: the accuracy the model reaches from its unigram/bigram knowledge alone.

``copy - copy_first`` is the in-context gain; an induction head makes ``copy`` approach 1 while
``copy_first`` stays at the model's ordinary next-token accuracy. Per-item values (one per
probe) are returned so CIs can be taken over probes and seeds. Plain torch/numpy.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn


def copy_probes(sequences: np.ndarray, length: int) -> torch.Tensor:
    """``x ‖ x`` for the first ``length`` tokens ``x`` of each sequence: ``(n, 2 · length)``.

    Raises:
        ValueError: ``length < 2`` (nothing to predict) or longer than the sequences.
    """
    sequences = np.asarray(sequences)
    if sequences.ndim != 2:
        raise ValueError(f"copy_probes: sequences must be (n, T), got shape {sequences.shape}")
    if not 2 <= length <= sequences.shape[1]:
        raise ValueError(
            f"copy_probes: length must be in [2, {sequences.shape[1]}] (the sequences' length), "
            f"got {length}"
        )
    first = torch.as_tensor(sequences[:, :length].astype(np.int64))  # (n, L)
    return torch.cat([first, first], dim=1)  # (n, 2L)


@torch.no_grad()
def copy_accuracy(
    model: nn.Module, probes: torch.Tensor, batch_size: int = 32
) -> dict[str, np.ndarray]:
    """Per-probe top-1 accuracy on the second copy (``copy``) and on the first (``copy_first``).

    Args:
        model: a causal LM returning ``.logits`` (B, T, vocab).
        probes: ``(n, 2L)`` from :func:`copy_probes`.
        batch_size: probes per forward pass.

    Returns:
        ``{"copy": (n,), "copy_first": (n,)}``, each the share of the ``L - 1`` predicted tokens
        that the argmax got right (a fraction in [0, 1]).
    """
    if probes.ndim != 2 or probes.shape[1] % 2 or probes.shape[1] < 4:
        raise ValueError(f"copy_accuracy: probes must be (n, 2L) with L >= 2, got {probes.shape}")
    half = probes.shape[1] // 2
    device = next(model.parameters()).device
    second, first = [], []
    for start in range(0, probes.shape[0], batch_size):
        batch = probes[start : start + batch_size].to(device)  # (B, 2L)
        predicted = model(batch).logits.argmax(-1)  # (B, 2L): prediction for position t + 1
        correct = predicted[:, :-1] == batch[:, 1:]  # (B, 2L - 1): target at position t + 1
        # Targets x[1..L-1]: positions 1..L-1 (first copy) and L+1..2L-1 (second copy).
        first.append(correct[:, : half - 1].float().mean(1).cpu())  # (B,)
        second.append(correct[:, half:].float().mean(1).cpu())  # (B,)
    return {
        "copy": torch.cat(second).numpy().astype(float),
        "copy_first": torch.cat(first).numpy().astype(float),
    }


__all__ = ["copy_accuracy", "copy_probes"]
