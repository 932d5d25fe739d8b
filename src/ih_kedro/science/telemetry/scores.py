"""Head- and model-level induction telemetry for one checkpoint.

Every head is scored from the same batched forward passes (one pass per probe batch, with the
instrumented attention recording all layers), never one pass per head.

Per head, on repeated probes ``x = S ‖ S`` (``|S| = L``, unique tokens), queries ``i`` in the
second half ``[L, 2L)``:

- **prefix matching** (PS): attention from ``i`` to ``i - (L - 1)``, the token after the
  previous occurrence of ``x_i`` (reference ``head_detector.py``). ``prefix_matching_even`` /
  ``_odd``: the same over the queries at even / odd offsets ``i - L`` only. A head that does
  induction at every other position (learned on data whose second halves alternate
  ``A B A B``, repetition frequency 1) scores ~1 on one parity and ~0.5 on PS; the
  position-robust ``prefix_matching_by_parity`` samples (heads × parities as one axis) let
  emergence detection take the best (head, parity).
- **previous token**: attention from ``i`` to ``i - 1`` (same queries, as in the reference).
- **induction / anti-induction**: attention to the token after / before the previous
  occurrence of the query token, found from the tokens themselves, so they apply to any
  probe (on repeated probes induction equals PS). On Bi-Induct snippets ``S ‖ SEP ‖ S`` and
  ``S ‖ SEP ‖ reverse(S)`` the queries are the second copy.
- **logit attribution** (reference): the head's output ``o_h = z_h W_O^h`` (no final norm)
  dotted with the unembedding of each of the ``L`` in-sample tokens, centred over them,
  ReLU'd; the score is the target's share of the positive boosts, in ``[0, 1]``. The target
  of query ``i`` is ``x_{i-L+1}``.
- **direct logit attribution** (DLA): ``o_h`` through the final norm (centred for LayerNorm,
  divided by the clean run's ``ln_final.hook_scale``, times ``gamma``) dotted with the
  target's unembedding, in logits (nats of unnormalised log-probability).
- **attended logit share**: the same centred/ReLU share as logit attribution, but for the
  token the head *attends to most* rather than the target: does the head raise the logit of
  the token it reads, in-sample? In ``[0, 1]``; for an induction head the attended token is
  the target, so it equals logit attribution. (It was called ``copying`` before; it is not
  Olsson et al.'s copying score.)
- **copying** (Olsson et al. 2022): the OV circuit's eigenvalue positivity, a property of the
  weights alone: ``sum(lambda) / sum(|lambda|)`` over the eigenvalues of the head's full OV
  circuit ``W_E W_V^h W_O^h W_U`` (vocab x vocab; norms left out, as in the paper), in
  ``[-1, 1]``; 1 when every eigenvalue is positive (the head copies what it attends to).
  Computed per head from the ``dh x dh`` matrix ``W_O^h W_U W_E W_V^h``, which has the same
  non-zero eigenvalues.

Per model: associative recall (share of second-half positions whose target ranks first over
the full vocabulary, and the mean number of tokens ranked above it), repeated-half loss drop
(mean loss on first-half targets minus second-half targets, nats), and on held-out natural text
the ICL score (loss at a late token minus loss at an early token, Olsson et al.: 500 vs 50 at
``C = 512``, scaled with ``C``, the early token at index 4 or later; not applicable, NaN, below
``C = 32``), loss by position and the validation loss. Its CI needs many sequences: the
per-sequence sd is ~2.6 nats at C = 32, so the default scores 128 held-out sequences.

Per-head values are means over probe samples; ``sd`` is the sd across probe samples (the
tidy rows of one checkpoint: :mod:`ih_kedro.science.telemetry.checkpoint_scores`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np
import torch
from torch import nn

from ih_kedro.science.telemetry.instrumentation import (
    final_norm,
    hook_name,
    instrument,
    n_layers_heads,
    norm_is_centering,
    norm_weight,
    output_projection_weights,
    value_weights,
)

PATTERN_METRICS = (
    "prefix_matching",
    "prefix_matching_even",
    "prefix_matching_odd",
    "previous_token",
    "induction",
    "anti_induction",
)
LOGIT_METRICS = ("logit_attribution", "direct_logit_attribution", "attended_logit_share")


def _device(model: nn.Module) -> torch.device:
    return next(model.parameters()).device


def previous_occurrence(tokens: torch.Tensor) -> torch.Tensor:
    """Position of the most recent earlier occurrence of each token, ``(B, T)``, -1 if none."""
    seq = tokens.shape[1]
    same = tokens[:, :, None] == tokens[:, None, :]  # (B, T, T)
    earlier = torch.ones(seq, seq, dtype=torch.bool, device=tokens.device).tril(-1)  # (T, T)
    positions = torch.arange(seq, device=tokens.device).expand(seq, seq)  # (T, T)
    masked = torch.where(same & earlier, positions, torch.full_like(positions, -1))  # (B, T, T)
    return masked.max(dim=-1).values  # (B, T)


def _attention_at(pattern: torch.Tensor, keys: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """Mean attention from each valid query to its key, per sample and head, ``(B, H)``.

    ``pattern`` is (B, H, T, S); ``keys`` (B, T) holds a key position per query; ``valid``
    (B, T) marks the queries that count. Samples without a valid query get NaN.
    """
    index = keys.clamp(min=0)[:, None, :, None].expand(-1, pattern.shape[1], -1, 1)  # (B,H,T,1)
    picked = pattern.gather(-1, index).squeeze(-1).float()  # (B, H, T)
    weights = valid[:, None, :].float()  # (B, 1, T)
    return (picked * weights).sum(-1) / weights.sum(-1)  # (B, H)


def _pattern_keys(tokens: torch.Tensor, repeated_length: int | None) -> dict[str, tuple]:
    """``{metric: (keys (B, T), valid (B, T))}`` for the attention-based head scores."""
    batch, seq = tokens.shape
    positions = torch.arange(seq, device=tokens.device).expand(batch, seq)  # (B, T)
    prev = previous_occurrence(tokens)  # (B, T)
    has_prev = prev >= 0
    out = {
        "induction": (prev + 1, has_prev),
        "anti_induction": (prev - 1, has_prev & (prev >= 1)),
    }
    if repeated_length is not None:
        length = repeated_length
        second = positions >= length
        even = (positions - length) % 2 == 0  # (B, T) even offsets into the second half
        out["prefix_matching"] = (positions - (length - 1), second)
        # The same over half the queries: a head gated to every other position (data whose
        # second halves alternate A B A B, e.g. repetition frequency 1) scores ~1 on one parity.
        out["prefix_matching_even"] = (positions - (length - 1), second & even)
        out["prefix_matching_odd"] = (positions - (length - 1), second & ~even)
        out["previous_token"] = (positions - 1, second)
    return out


def _half_length(probes: torch.Tensor) -> int:
    """``L`` of repeated probes ``(n, 2L)``; odd lengths raise."""
    if probes.shape[1] % 2:
        raise ValueError(f"repeated probes need an even length, got {probes.shape[1]}")
    return probes.shape[1] // 2


def _pattern_batch_scores(
    cache: dict[str, torch.Tensor], batch: torch.Tensor, length: int | None, n_layers: int
) -> dict[str, torch.Tensor]:
    """Attention-based head scores of one probe batch ``(B, T)``: ``{metric: (B, layers, H)}``."""
    patterns = [cache[hook_name(layer, "hook_pattern")] for layer in range(n_layers)]
    return {
        metric: torch.stack([_attention_at(p, key, valid) for p in patterns], dim=1)  # (B, l, H)
        for metric, (key, valid) in _pattern_keys(batch, length).items()
    }


@torch.no_grad()
def _probe_batches(
    model: nn.Module,
    probes: torch.Tensor,
    batch_size: int,
    record_z: bool,
    record_pattern: bool = True,
) -> Iterable[tuple[torch.Tensor, Any, dict[str, torch.Tensor]]]:
    """Eval-mode forward passes over ``probes`` (n, T) in batches: ``(batch, output, cache)``.

    The cache is the instrumented one (overwritten each batch); ``record_z`` also records the
    final norm's input and scale.
    """
    if batch_size <= 0:
        raise ValueError(f"telemetry.batch_size must be positive, got {batch_size}")
    was_training = model.training
    model.eval()
    device = _device(model)
    try:
        with instrument(
            model, record_pattern=record_pattern, record_z=record_z, record_final_norm=record_z
        ) as inst:
            for start in range(0, probes.shape[0], batch_size):
                batch = probes[start : start + batch_size].to(device)  # (B, T)
                output = model(batch)
                yield batch, output, inst.cache
    finally:
        model.train(was_training)


@torch.no_grad()
def head_pattern_scores(
    model: nn.Module,
    probes: torch.Tensor,
    batch_size: int = 32,
    repeated: bool = True,
) -> dict[str, torch.Tensor]:
    """Attention-based scores of every head, per probe sample.

    Args:
        probes: ``(n, T)`` token ids; ``repeated`` says they are ``S ‖ S`` (adds
            ``prefix_matching`` and ``previous_token``; induction scores always apply).

    Returns:
        ``{metric: (n, n_layers, n_heads)}`` float tensors, attention weights in [0, 1].
    """
    n_layers, _ = n_layers_heads(model)
    length = _half_length(probes) if repeated else None
    chunks: dict[str, list[torch.Tensor]] = {}
    for batch, _output, cache in _probe_batches(model, probes, batch_size, record_z=False):
        for metric, value in _pattern_batch_scores(cache, batch, length, n_layers).items():
            chunks.setdefault(metric, []).append(value.cpu())
    return {metric: torch.cat(parts) for metric, parts in chunks.items()}  # (n, layers, heads)


def prefix_matching_scores_per_sample(
    model: nn.Module, probes: torch.Tensor, batch_size: int = 32
) -> torch.Tensor:
    """Prefix-matching score of every head per probe sample, ``(n_samples, n_layers, n_heads)``."""
    return head_pattern_scores(model, probes, batch_size)["prefix_matching"]


def prefix_matching_scores(
    model: nn.Module, probes: torch.Tensor, batch_size: int = 32
) -> torch.Tensor:
    """Mean prefix-matching score of every head, ``(n_layers, n_heads)`` in [0, 1].

    The mean attention from second-half query ``i`` in ``[L, 2L)`` to key ``i - (L - 1)``.
    """
    return prefix_matching_scores_per_sample(model, probes, batch_size).mean(0)


def uniform_prefix_matching_baseline(length: int) -> float:
    """PS of a head attending uniformly over its causal window: mean of ``1/(i+1)``, i in [L, 2L)."""
    return float(np.mean([1.0 / (i + 1) for i in range(length, 2 * length)]))


def _centred_share(boosts: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """Share of the positive, mean-centred boosts taken by ``index``; (..., K) -> (...)."""
    centred = torch.relu(boosts - boosts.mean(-1, keepdim=True))  # (..., K)
    chosen = centred.gather(-1, index[..., None]).squeeze(-1)  # (...)
    total = centred.sum(-1)
    return torch.where(total > 0, chosen / total.clamp(min=1e-30), torch.zeros_like(total))


def _logit_batch_scores(
    model: nn.Module,
    batch: torch.Tensor,  # (B, 2L)
    cache: dict[str, torch.Tensor],
    w_o: list[torch.Tensor],  # per layer (H, dh, d), float32
    length: int,
) -> dict[str, torch.Tensor]:
    """Logit-based head scores ``{metric: (B, layers, heads)}`` of one repeated-probe batch."""
    n_layers = len(w_o)
    second = slice(length, 2 * length)
    sample = batch[:, :length]  # (B, L)
    targets = batch[:, 1 : length + 1]  # (B, L): target of query i in [L, 2L) is x_{i-L+1}
    w_u = model.get_output_embeddings().weight  # (V, d)
    u_sample = w_u[sample].float()  # (B, L, d)
    target_slot = torch.arange(1, length + 1, device=batch.device) % length  # (L,)
    target_slot = target_slot.expand(batch.shape[0], -1)  # (B, L) index into the sample

    norm = final_norm(model)
    gamma = norm_weight(norm)
    u_target = w_u[targets].float()  # (B, L, d)
    if gamma is not None:
        u_target = u_target * gamma.float()
    if norm_is_centering(norm):
        u_target = u_target - u_target.mean(-1, keepdim=True)
    scale = cache["ln_final.hook_scale"][:, second].float()  # (B, L, 1)

    out: dict[str, list[torch.Tensor]] = {m: [] for m in LOGIT_METRICS}
    for layer in range(n_layers):
        z = cache[hook_name(layer, "hook_z")][:, second].float()  # (B, L, H, dh)
        pattern = cache[hook_name(layer, "hook_pattern")][:, :, second]  # (B, H, L, S)
        head_out = torch.einsum("bthe,hed->bthd", z, w_o[layer])  # (B, L, H, d)
        boosts = torch.einsum("bthd,bkd->bthk", head_out, u_sample)  # (B, L, H, L)
        slot = target_slot[:, :, None].expand(-1, -1, boosts.shape[2])  # (B, L, H)
        out["logit_attribution"].append(_centred_share(boosts, slot).mean(1))  # (B, H)
        attended = pattern.argmax(-1).transpose(1, 2)  # (B, L, H) key positions
        attended_slot = attended % length  # in-sample slot of the attended token
        out["attended_logit_share"].append(_centred_share(boosts, attended_slot).mean(1))  # (B, H)
        dla = torch.einsum("bthd,btd->bth", head_out, u_target) / scale  # (B, L, H)
        out["direct_logit_attribution"].append(dla.mean(1))  # (B, H)
    return {m: torch.stack(v, dim=1) for m, v in out.items()}  # (B, layers, heads)


@torch.no_grad()
def ov_copying_scores(model: nn.Module) -> torch.Tensor:
    """Olsson et al.'s copying score of every head, ``(layers, heads)`` in ``[-1, 1]``.

    ``sum(lambda) / sum(|lambda|)`` over the eigenvalues of ``W_E W_V^h W_O^h W_U``
    ``(V, V)``; the cyclic product ``W_O^h W_U W_E W_V^h`` ``(dh, dh)`` has the same non-zero
    eigenvalues, so the V x V matrix is never built. Norms and biases are left out.
    """
    w_e = model.get_input_embeddings().weight.double()  # (V, d)
    w_u = model.get_output_embeddings().weight.double()  # (V, d): logits = x @ w_u.T
    round_trip = w_u.T @ w_e  # (d, d): unembed then embed
    rows = []
    for w_v, w_o in zip(value_weights(model), output_projection_weights(model), strict=True):
        circuit = w_o.double() @ round_trip @ w_v.double()  # (H, dh, dh)
        eigenvalues = torch.linalg.eigvals(circuit)  # (H, dh) complex
        total = eigenvalues.abs().sum(-1)  # (H,)
        share = eigenvalues.real.sum(-1) / total.clamp(min=1e-300)
        rows.append(torch.where(total > 0, share, torch.zeros_like(share)).float())
    return torch.stack(rows)  # (layers, heads)


def _model_batch_scores(
    batch: torch.Tensor,  # (B, 2L)
    logits: torch.Tensor,  # (B, 2L, V)
    length: int,
) -> dict[str, torch.Tensor]:
    """Model scores ``{metric: (B,)}`` of one repeated-probe batch: recall and loss drop."""
    second = slice(length, 2 * length)
    targets = batch[:, 1 : length + 1]  # (B, L): target of query i in [L, 2L) is x_{i-L+1}
    second_logits = logits[:, second].float()  # (B, L, V)
    target_logit = second_logits.gather(-1, targets[..., None])  # (B, L, 1)
    ranks = (second_logits > target_logit).sum(-1).float()  # (B, L) tokens ranked above
    scores = {
        "associative_recall": (ranks == 0).float().mean(-1),  # (B,)
        "associative_recall_mean_rank": ranks.mean(-1),  # (B,)
    }
    token_loss = nn.functional.cross_entropy(
        logits[:, :-1].float().transpose(1, 2), batch[:, 1:], reduction="none"
    )  # (B, 2L-1); entry t is the loss of predicting x_{t+1}
    first_loss = token_loss[:, : length - 1].mean(-1)  # targets x_1 .. x_{L-1}
    second_loss = token_loss[:, length:].mean(-1)  # targets x_{L+1} .. x_{2L-1}
    scores["repeated_loss_drop"] = first_loss - second_loss  # (B,) nats
    return scores


@torch.no_grad()
def repeated_probe_scores(
    model: nn.Module, probes: torch.Tensor, batch_size: int = 32
) -> dict[str, torch.Tensor]:
    """All head and model scores on repeated probes ``(n, 2L)``, one forward pass per batch.

    Returns ``{metric: (n, n_layers, n_heads)}`` for ``PATTERN_METRICS`` and ``LOGIT_METRICS``
    and ``{metric: (n,)}`` for ``associative_recall``, ``associative_recall_mean_rank`` and
    ``repeated_loss_drop``.
    """
    length = _half_length(probes)
    n_layers, _ = n_layers_heads(model)
    w_o = [w.detach().float() for w in output_projection_weights(model)]  # (H, dh, d) each
    chunks: dict[str, list[torch.Tensor]] = {}
    for batch, output, cache in _probe_batches(model, probes, batch_size, record_z=True):
        batch_scores = {
            **_pattern_batch_scores(cache, batch, length, n_layers),
            **_logit_batch_scores(model, batch, cache, w_o, length),
            **_model_batch_scores(batch, output.logits, length),
        }
        for metric, value in batch_scores.items():
            chunks.setdefault(metric, []).append(value.cpu())
    return {metric: torch.cat(parts) for metric, parts in chunks.items()}


@torch.no_grad()
def associative_recall(
    model: nn.Module, probes: torch.Tensor, batch_size: int = 32
) -> dict[str, float]:
    """Associative recall on repeated probes: ``{"accuracy", "mean_rank"}``.

    ``accuracy`` is the share of second-half positions whose target ranks first over the full
    vocabulary; ``mean_rank`` the mean number of tokens with a strictly higher logit (0 = first).
    Runs the same instrumented forward passes as :func:`repeated_probe_scores` but records
    nothing and skips the head scores (it is the metric of repeated ablation runs).
    """
    length = _half_length(probes)
    accuracy, mean_rank = [], []
    for batch, output, _cache in _probe_batches(
        model, probes, batch_size, record_z=False, record_pattern=False
    ):
        scores = _model_batch_scores(batch, output.logits, length)
        accuracy.append(scores["associative_recall"].cpu())  # (B,)
        mean_rank.append(scores["associative_recall_mean_rank"].cpu())  # (B,)
    return {
        "accuracy": float(torch.cat(accuracy).mean()),
        "mean_rank": float(torch.cat(mean_rank).mean()),
    }


ICL_MIN_CONTEXT = 32
"""Below this context the ICL score is not applicable (reported as NaN, ``not_applicable``)."""
ICL_EARLY_FLOOR = 4
"""The early position is never before this 0-based index (the 5th token)."""


def icl_positions(context_length: int) -> tuple[int, int]:
    """Early and late token positions of the ICL score, 0-based: 49 and 499 at ``C = 512``.

    Olsson et al.'s 50th and 500th tokens, scaled with ``C``; the early position has a floor
    (:data:`ICL_EARLY_FLOOR`) so that a short context does not compare the first few tokens,
    whose loss is dominated by the missing context itself. Raises below
    :data:`ICL_MIN_CONTEXT`.
    """
    if context_length < ICL_MIN_CONTEXT:
        raise ValueError(
            f"context_length: the ICL score needs C >= {ICL_MIN_CONTEXT}, got {context_length}"
        )
    early = max(ICL_EARLY_FLOOR, min(context_length - 1, round(50 * context_length / 512) - 1))
    late = max(early + 1, min(context_length - 1, round(500 * context_length / 512) - 1))
    return early, late


@torch.no_grad()
def loss_by_position(
    model: nn.Module, sequences: np.ndarray | torch.Tensor, batch_size: int = 8
) -> torch.Tensor:
    """Per-token next-token loss on natural text, ``(n_sequences, C)`` in nats.

    ``sequences`` is ``(n, C + 1)`` (``PackedTokens.sequences``): inputs ``[:, :-1]``,
    targets ``[:, 1:]``; entry ``t`` is the loss of predicting token ``t + 1`` from ``0..t``.
    """
    data = torch.as_tensor(np.asarray(sequences, dtype=np.int64))  # (n, C+1)
    was_training = model.training
    model.eval()
    device = _device(model)
    parts = []
    try:
        for start in range(0, data.shape[0], batch_size):
            chunk = data[start : start + batch_size].to(device)  # (B, C+1)
            logits = model(chunk[:, :-1]).logits.float()  # (B, C, V)
            parts.append(
                nn.functional.cross_entropy(
                    logits.transpose(1, 2), chunk[:, 1:], reduction="none"
                ).cpu()  # (B, C)
            )
    finally:
        model.train(was_training)
    return torch.cat(parts)  # (n, C)


def icl_score(token_losses: torch.Tensor) -> torch.Tensor:
    """ICL score per sequence: loss at the late minus the early position, ``(n,)`` nats.

    Negative means later tokens are predicted better (in-context learning).
    """
    early, late = icl_positions(token_losses.shape[1])
    return token_losses[:, late] - token_losses[:, early]


def best_head_samples(samples: torch.Tensor, min_layer: int = 1) -> torch.Tensor:
    """Per-sample score of the head with the best mean in layers ``>= min_layer`` (all layers
    for a model with no more), ``(n,)`` from ``(n, layers, heads)``; NaN samples are ignored
    when choosing the head."""
    first = min_layer if samples.shape[1] > min_layer else 0
    later = samples[:, first:].float()  # (n, layers', heads)
    best = torch.nanmean(later, 0).flatten().argmax()
    return later.flatten(1)[:, best]  # (n,)


def top_fraction_share(scores: torch.Tensor, fraction: float = 0.02) -> float:
    """Share of the total (non-negative) score held by the top ``ceil(fraction * n)`` entries."""
    flat = scores.flatten().clamp(min=0)
    total = float(flat.sum())
    if total <= 0:
        return float("nan")
    k = max(1, math.ceil(fraction * flat.numel()))
    return float(flat.topk(k).values.sum()) / total


def top_heads(scores: torch.Tensor, fraction: float = 0.02, per_layer: bool = False) -> list:
    """The top ``ceil(fraction * n)`` heads by score, overall or per layer: ``[(layer, head)]``."""
    n_layers, n_heads = scores.shape
    if per_layer:
        k = max(1, math.ceil(fraction * n_heads))
        return [(layer, int(h)) for layer in range(n_layers) for h in scores[layer].topk(k).indices]
    k = max(1, math.ceil(fraction * scores.numel()))
    flat = scores.flatten().topk(k).indices
    return [(int(i) // n_heads, int(i) % n_heads) for i in flat]
