"""Causal head ablation usable around any evaluation.

Modes (``ablate_heads``):

- ``zero``: the head's output z_h (``hook_z``) is set to 0 at every position.
- ``mean``: z_h is replaced by its mean over a reference batch (``mean_source``), which keeps
  the residual stream on-distribution.
- ``pattern_preserving``: every forward pass first runs the *clean* model on the same input and
  records every head's attention pattern; the ablated pass then uses those clean patterns for
  *all* heads (so no head downstream can re-route its attention in response) while the ablated
  heads' z is zeroed (or mean-replaced when ``mean_source`` is given). The effect measured is
  therefore the ablated heads' contribution through paths that do not change any attention
  pattern: the direct path to the logits and, in deeper models, value-composition/MLP paths;
  key/query composition is removed. For heads in the last attention layer of an
  attention-only model it is exactly the direct path. Each forward costs two passes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from typing import Any

import numpy as np
import torch
from torch import nn

from ih_kedro.science.telemetry.instrumentation import (
    Instrumentation,
    hook_name,
    instrument,
    n_layers_heads,
)

logger = logging.getLogger(__name__)

ABLATION_MODES = ("zero", "mean", "pattern_preserving")
Head = tuple[int, int]


def _by_layer(heads: Iterable[Sequence[int]]) -> dict[int, list[int]]:
    grouped: dict[int, list[int]] = {}
    for layer, head in heads:
        grouped.setdefault(int(layer), []).append(int(head))
    return grouped


@torch.no_grad()
def mean_z(
    model: nn.Module, tokens: torch.Tensor, per_position: bool = False, batch_size: int = 32
) -> dict[int, torch.Tensor]:
    """Mean ``hook_z`` of every layer over ``tokens`` (n, T): ``{layer: (H, dh)}`` (or (T, H, dh))."""
    sums: dict[int, torch.Tensor] = {}
    count = 0
    device = next(model.parameters()).device
    with instrument(model, record_z=True) as inst:
        for start in range(0, tokens.shape[0], batch_size):
            batch = tokens[start : start + batch_size].to(device)  # (B, T)
            model(batch)
            for key, z in inst.cache.items():
                layer = int(key.split(".")[1])
                part = z.float().sum(0) if per_position else z.float().sum((0, 1))
                sums[layer] = sums.get(layer, 0) + part
            count += batch.shape[0] if per_position else batch.shape[0] * batch.shape[1]
    return {layer: total / count for layer, total in sums.items()}


@contextmanager
def ablate_heads(
    model: nn.Module,
    heads: Iterable[Sequence[int]],
    mode: str = "zero",
    mean_source: Mapping[int, torch.Tensor] | torch.Tensor | None = None,
) -> Iterator[Instrumentation]:
    """Ablate ``heads`` (``[(layer, head), ...]``) for every forward pass inside the block.

    Args:
        mode: ``"zero"``, ``"mean"`` or ``"pattern_preserving"`` (see the module docstring).
        mean_source: for ``"mean"`` (and optionally ``"pattern_preserving"``): either the mean
            z per layer ``{layer: (H, dh) or (T, H, dh)}`` or reference token ids ``(n, T)``
            whose mean z is computed first.
    """
    if mode not in ABLATION_MODES:
        raise ValueError(f"ablation mode must be one of {ABLATION_MODES}, got {mode!r}")
    grouped = _by_layer(heads)
    n_layers, n_heads = n_layers_heads(model)
    for layer, hs in grouped.items():
        if not 0 <= layer < n_layers or any(not 0 <= h < n_heads for h in hs):
            raise ValueError(f"heads: ({layer}, {hs}) outside {n_layers} layers x {n_heads} heads")
    if mode == "zero" and mean_source is not None:
        raise ValueError("mean_source: mode='zero' zeroes the heads; use mode='mean' for means")
    means = None
    if isinstance(mean_source, torch.Tensor):
        means = mean_z(model, mean_source)
    elif mean_source is not None:
        means = dict(mean_source)
    if mode == "mean" and means is None:
        raise ValueError("mean_source: mode='mean' needs mean z values or reference tokens")
    z_mode = "mean" if means is not None else "zero"

    if mode != "pattern_preserving":
        with instrument(model, ablate=grouped, mode=z_mode, mean_z=means) as inst:
            yield inst
        return

    with ExitStack() as stack:
        inst = stack.enter_context(instrument(model, ablate=grouped, mode=z_mode, mean_z=means))
        state = {"busy": False}

        def pre_hook(module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
            if state["busy"]:
                return
            state["busy"] = True
            inst.enabled = False
            try:
                with torch.no_grad(), instrument(module, record_pattern=True) as clean:
                    module(*args, **kwargs)
                inst.frozen_patterns = {
                    layer: clean.cache[hook_name(layer, "hook_pattern")]
                    for layer in range(n_layers)
                }
            finally:
                inst.enabled = True
                state["busy"] = False

        handle = model.register_forward_pre_hook(pre_hook, with_kwargs=True)
        stack.callback(handle.remove)
        yield inst


def all_heads(model: nn.Module) -> list[Head]:
    """Every ``(layer, head)`` of the model."""
    n_layers, n_heads = n_layers_heads(model)
    return [(layer, head) for layer in range(n_layers) for head in range(n_heads)]


def random_head_control(
    all_heads: Sequence[Sequence[int]],
    k: int,
    exclude: Iterable[Sequence[int]] = (),
    seed: int = 0,
    match_layers: Sequence[Sequence[int]] | None = None,
) -> list[Head]:
    """``k`` heads drawn without replacement from ``all_heads`` minus ``exclude``.

    With ``match_layers`` (e.g. the ablated heads), draws as many heads per layer as it has,
    so the control removes the same amount of each layer. Deterministic in ``seed``.
    """
    excluded = {(int(a), int(b)) for a, b in exclude}
    candidates = [(int(a), int(b)) for a, b in all_heads if (int(a), int(b)) not in excluded]
    rng = np.random.default_rng(seed)
    if match_layers is not None:
        chosen: list[Head] = []
        for layer, matched in sorted(_by_layer(match_layers).items()):
            count = len(matched)
            pool = [h for h in candidates if h[0] == layer]
            if len(pool) < count:
                raise ValueError(
                    f"random_head_control: layer {layer} has only {len(pool)} heads left"
                )
            picks = rng.choice(len(pool), size=count, replace=False)
            chosen.extend(pool[i] for i in sorted(picks))
        return chosen
    if k > len(candidates):
        raise ValueError(f"random_head_control: k={k} exceeds the {len(candidates)} candidates")
    picks = rng.choice(len(candidates), size=k, replace=False)
    return [candidates[i] for i in sorted(picks)]


def ablation_effect(
    model: nn.Module,
    heads: Sequence[Sequence[int]],
    metric_fn: Callable[[nn.Module], float],
    *,
    mode: str = "zero",
    mean_source: Mapping[int, torch.Tensor] | torch.Tensor | None = None,
    n_controls: int = 3,
    seed: int = 0,
    match_layers: bool = True,
) -> dict[str, Any]:
    """Relative drop of ``metric_fn`` (higher = better) when ``heads`` are ablated, vs control.

    The control ablates as many random heads (same count per layer when ``match_layers``),
    ``n_controls`` times with seeds ``seed, seed + 1, ...``.

    Returns:
        ``baseline``, ``ablated``, ``relative_drop = (baseline - ablated) / |baseline|``,
        ``control_relative_drop`` (mean over controls), ``control_sd``, ``control_drops``,
        ``excess_drop = relative_drop - control_relative_drop``, ``control_heads``, ``seed``.
    """
    heads = [(int(a), int(b)) for a, b in heads]
    baseline = float(metric_fn(model))
    denom = abs(baseline) if baseline != 0 else float("nan")
    with ablate_heads(model, heads, mode=mode, mean_source=mean_source):
        ablated = float(metric_fn(model))
    drop = (baseline - ablated) / denom
    control_drops, control_heads = [], []
    for i in range(n_controls):
        control = random_head_control(
            all_heads(model), len(heads), exclude=heads, seed=seed + i,
            match_layers=heads if match_layers else None,
        )  # fmt: skip
        with ablate_heads(model, control, mode=mode, mean_source=mean_source):
            control_drops.append((baseline - float(metric_fn(model))) / denom)
        control_heads.append(control)
    control_mean = float(np.mean(control_drops)) if control_drops else float("nan")
    return {
        "baseline": baseline,
        "ablated": ablated,
        "relative_drop": drop,
        "control_relative_drop": control_mean,
        "control_sd": float(np.std(control_drops, ddof=1)) if len(control_drops) > 1 else 0.0,
        "control_drops": control_drops,
        "excess_drop": drop - control_mean,
        "control_heads": control_heads,
        "seed": seed,
        "mode": mode,
    }
