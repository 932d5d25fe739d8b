"""Every head and model score of one checkpoint as tidy rows: telemetry's unit of work.

:func:`score_checkpoint` runs the probe passes of :mod:`ih_kedro.science.telemetry.scores` on
one model (repeated probes, then each Bi-Induct variant), adds Olsson et al.'s OV copying score
of every head and, on held-out natural text, the ICL score, loss by position and validation
loss. Per-head values are means over probe samples with their sd; it also returns the per-sample
arrays emergence detection reads (:mod:`ih_kedro.science.telemetry.emergence`).
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import torch
from torch import nn

from ih_kedro.science.telemetry.probes import ProbeSet
from ih_kedro.science.telemetry.scores import (
    ICL_MIN_CONTEXT,
    best_head_samples,
    head_pattern_scores,
    icl_score,
    loss_by_position,
    ov_copying_scores,
    repeated_probe_scores,
    top_fraction_share,
)

logger = logging.getLogger(__name__)


def _loss_positions(context_length: int, n_points: int = 16) -> list[int]:
    grid = np.unique(np.geomspace(1, context_length, n_points).round().astype(int)) - 1
    return [int(p) for p in grid]


def _mean_sd(values: torch.Tensor) -> tuple[float, float]:
    arr = values.double().numpy()
    arr = arr[np.isfinite(arr)]
    if arr.size == 0:
        return float("nan"), float("nan")
    return float(arr.mean()), float(arr.std(ddof=1)) if arr.size > 1 else 0.0


def _probe_scores(
    model: nn.Module, probe_set: ProbeSet, batch_size: int
) -> dict[str, torch.Tensor]:
    """Per-sample scores of the repeated probes (:func:`repeated_probe_scores`) plus
    ``induction_<variant>`` and ``anti_induction_<variant>`` ``(n, layers, heads)`` of every
    Bi-Induct variant of ``probe_set``."""
    scores = repeated_probe_scores(model, probe_set.tokens, batch_size)
    for variant, tokens in probe_set.variants.items():
        variant_scores = head_pattern_scores(model, tokens, batch_size, repeated=False)
        for metric in ("induction", "anti_induction"):
            scores[f"{metric}_{variant}"] = variant_scores[metric]
    return scores


def _head_rows(
    scores: dict[str, torch.Tensor], base: dict[str, Any], source: str
) -> tuple[list[dict[str, Any]], dict[str, torch.Tensor]]:
    """One row per (head metric, layer, head) with the mean and sd over probe samples, and
    each head metric's ``(layers, heads)`` NaN-ignoring mean."""
    head_rows: list[dict[str, Any]] = []
    head_metric_means: dict[str, torch.Tensor] = {}
    for metric, values in scores.items():
        if values.dim() != 3:
            continue
        head_metric_means[metric] = torch.nanmean(values.float(), dim=0)  # (layers, heads)
        n_layers, n_heads = values.shape[1:]
        for layer in range(n_layers):
            for head in range(n_heads):
                value, sd = _mean_sd(values[:, layer, head])
                head_rows.append(
                    {**base, "layer": layer, "head": head, "metric": metric, "value": value,
                     "sd": sd, "probe_source": source}
                )  # fmt: skip
    return head_rows, head_metric_means


def _copying_rows(model: nn.Module, base: dict[str, Any]) -> list[dict[str, Any]]:
    """Olsson et al.'s copying score: a property of the weights, one row per head (no sd)."""
    rows: list[dict[str, Any]] = []
    copying = ov_copying_scores(model)  # (layers, heads)
    for layer in range(copying.shape[0]):
        for head in range(copying.shape[1]):
            rows.append(
                {**base, "layer": layer, "head": head, "metric": "copying",
                 "value": float(copying[layer, head]), "sd": float("nan"),
                 "probe_source": "weights"}
            )  # fmt: skip
    return rows


def _model_row(
    base: dict[str, Any], metric: str, values: torch.Tensor | float, probe_source: str
) -> dict[str, Any]:
    """A model row: the mean and sd of per-sample ``values``, or one value with sd NaN."""
    if isinstance(values, torch.Tensor):
        value, sd = _mean_sd(values.flatten())
    else:
        value, sd = float(values), float("nan")
    return {**base, "metric": metric, "value": value, "sd": sd, "probe_source": probe_source}


def _probe_model_rows(
    scores: dict[str, torch.Tensor],
    head_metric_means: dict[str, torch.Tensor],
    base: dict[str, Any],
    source: str,
    top_fraction: float,
    min_layer: int,
) -> list[dict[str, Any]]:
    """Model rows from the probes: recall, loss drop, the best head's prefix matching
    (layers ``>= min_layer``) and the top ``top_fraction`` heads' share of induction, overall
    and per layer."""
    rows = [
        _model_row(base, metric, scores[metric], source)
        for metric in ("associative_recall", "associative_recall_mean_rank", "repeated_loss_drop")
    ]
    ps = scores["prefix_matching"]  # (n, layers, heads)
    rows.append(_model_row(base, "prefix_matching_max", best_head_samples(ps, min_layer), source))
    induction = head_metric_means["induction"]
    share_name = f"induction_top{top_fraction * 100:g}pct_share"
    rows.append(_model_row(base, share_name, top_fraction_share(induction, top_fraction), source))
    for layer in range(induction.shape[0]):
        share = top_fraction_share(induction[layer], top_fraction)
        rows.append(_model_row(base, f"{share_name}_layer{layer}", share, source))
    return rows


def _validation_rows(
    model: nn.Module,
    validation_sequences: np.ndarray | None,
    base: dict[str, Any],
    batch_size: int,
) -> list[dict[str, Any]]:
    """Model rows on held-out natural text: ICL score, validation loss and loss by position;
    none without sequences or when their ids exceed the model's vocabulary (a warning)."""
    if validation_sequences is None or not len(validation_sequences):
        return []
    vocab = model.get_output_embeddings().weight.shape[0]
    if int(np.asarray(validation_sequences).max()) >= vocab:
        logger.warning("validation tokens exceed the model's vocabulary: ICL metrics skipped")
        return []
    losses = loss_by_position(model, validation_sequences, batch_size=max(1, batch_size // 4))
    rows: list[dict[str, Any]] = []
    if losses.shape[1] >= ICL_MIN_CONTEXT:
        rows.append(_model_row(base, "icl_score", icl_score(losses), "validation"))
    else:  # too short a context for early vs late tokens to mean in-context learning
        rows.append(_model_row(base, "icl_score", float("nan"), "not_applicable"))
    rows.append(_model_row(base, "validation_loss", losses.mean(1), "validation"))
    for pos in _loss_positions(losses.shape[1]):
        rows.append(_model_row(base, f"loss_pos_{pos + 1:05d}", losses[:, pos], "validation"))
    return rows


def score_checkpoint(
    model: nn.Module,
    probe_set: ProbeSet,
    validation_sequences: np.ndarray | None,
    *,
    batch_size: int = 32,
    top_fraction: float = 0.02,
    min_layer: int = 1,
    run_name: str = "",
    step: int = 0,
    tokens_seen: float = float("nan"),
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, np.ndarray]]:
    """Score every head and the model at one checkpoint.

    Args:
        probe_set: repeated probes (and optional Bi-Induct variants); ``L = probe_set.length``.
        validation_sequences: ``(n, C + 1)`` held-out natural text for the ICL score, loss by
            position and validation loss; None skips them.
        top_fraction: the top share of heads for the concentration metrics (2%).
        min_layer: ``prefix_matching_max`` is the best head over layers ``>= min_layer``
            (layer 0 cannot be an induction head; falls back to all layers for 1-layer models).

    Returns:
        ``head_rows`` (``run_name, step, tokens_seen, layer, head, metric, value, sd,
        probe_source``), ``model_rows`` (same without layer/head) and per-sample arrays
        ``{"prefix_matching": (n, layers, heads), "prefix_matching_by_parity": (n, layers,
        2 heads)`` (even-query then odd-query scores of every head), ``"associative_recall": (n,),
        "repeated_loss_drop": (n,)}``.
    """
    base = {"run_name": run_name, "step": int(step), "tokens_seen": float(tokens_seen)}
    source = probe_set.source
    scores = _probe_scores(model, probe_set, batch_size)
    head_rows, head_metric_means = _head_rows(scores, base, source)
    head_rows.extend(_copying_rows(model, base))
    model_rows = _probe_model_rows(scores, head_metric_means, base, source, top_fraction, min_layer)
    model_rows.extend(_validation_rows(model, validation_sequences, base, batch_size))

    # Heads x parities as one axis, (n, layers, 2 heads): the best (head, parity) is a
    # position-robust prefix-matching score for emergence detection ("prefix_matching_by_parity").
    by_parity = torch.cat([scores["prefix_matching_even"], scores["prefix_matching_odd"]], dim=-1)
    model_rows.append(
        _model_row(
            base, "prefix_matching_by_parity_max", best_head_samples(by_parity, min_layer), source
        )
    )
    samples = {
        "prefix_matching": scores["prefix_matching"].numpy().astype(np.float32),
        "prefix_matching_by_parity": by_parity.numpy().astype(np.float32),
        "associative_recall": scores["associative_recall"].numpy().astype(np.float32),
        "repeated_loss_drop": scores["repeated_loss_drop"].numpy().astype(np.float32),
    }
    return head_rows, model_rows, samples
