"""Per-head recording and intervention through ``transformers``' attention interface.

Every supported model (GPT-2, GPT-NeoX, Llama and our attention-only model) computes q, k, v
itself and hands them to ``ALL_ATTENTION_FUNCTIONS[config._attn_implementation]``. While an
:func:`instrument` context is open, the model is switched to a registered eager attention
function (``ATTENTION_NAME``) that, per layer (``module.layer_idx``):

- records the attention pattern ``hook_pattern`` ``(B, H, T, S)``;
- records the per-head outputs ``hook_z`` ``(B, T, H, dh)``, the input of the output
  projection (TransformerLens' ``hook_z``);
- intervenes on heads: ``zero`` (z_h := 0), ``mean`` (z_h := a supplied mean), and freezes
  attention patterns to supplied values (the building block of pattern-preserving ablation,
  see ``ablation.py``).

Grouped-query attention is handled by repeating k and v ``module.num_key_value_groups``
times, as the eager kernels in ``transformers`` do. Contexts nest: every open context on the
model sees (and may modify) each layer's pattern and z, outermost first.

Cache keys follow TransformerLens: ``blocks.{l}.attn.hook_pattern``,
``blocks.{l}.attn.hook_z``, ``ln_final.hook_input`` ``(B, T, d)`` and ``ln_final.hook_scale``
``(B, T, 1)`` (the divisor of the final LayerNorm/RMSNorm).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from transformers import AttentionInterface
from transformers.masking_utils import AttentionMaskInterface, eager_mask

logger = logging.getLogger(__name__)

ATTENTION_NAME = "ih_telemetry"

_FINAL_NORM_PATHS = ("transformer.ln_f", "ln_f", "gpt_neox.final_layer_norm", "model.norm")
_OUTPUT_PROJECTIONS = ("o_proj", "c_proj", "dense", "out_proj")


def hook_name(layer: int, hook: str) -> str:
    """TransformerLens-style cache key, e.g. ``blocks.1.attn.hook_pattern``."""
    return f"blocks.{layer}.attn.{hook}"


@dataclass
class Instrumentation:
    """State of one open :func:`instrument` context.

    Attributes:
        modules: ids of the attention modules of the instrumented model.
        record_pattern / record_z: which activations to keep in ``cache``.
        layers: layers to record (None = all).
        ablate: ``{layer: [head, ...]}`` heads whose z is replaced.
        mode: ``"zero"`` or ``"mean"`` replacement.
        mean_z: ``{layer: (H, dh) or (T, H, dh)}`` replacement values for ``mode == "mean"``.
        frozen_patterns: ``{layer: (B, H, T, S)}`` patterns used instead of the computed ones.
        enabled: interventions apply only while True (recording always applies).
        cache: recorded activations by TransformerLens name.
    """

    modules: set[int]
    record_pattern: bool = False
    record_z: bool = False
    layers: set[int] | None = None
    ablate: dict[int, list[int]] = field(default_factory=dict)
    mode: str = "zero"
    mean_z: dict[int, torch.Tensor] = field(default_factory=dict)
    frozen_patterns: dict[int, torch.Tensor] = field(default_factory=dict)
    enabled: bool = True
    cache: dict[str, torch.Tensor] = field(default_factory=dict)

    def wants(self, layer: int) -> bool:
        return self.layers is None or layer in self.layers

    def freeze(self, layer: int, pattern: torch.Tensor) -> torch.Tensor:
        frozen = self.frozen_patterns.get(layer) if self.enabled else None
        if frozen is None:
            return pattern
        if frozen.shape != pattern.shape:
            raise ValueError(
                f"frozen pattern of layer {layer} has shape {tuple(frozen.shape)}, the run "
                f"needs {tuple(pattern.shape)}"
            )
        return frozen.to(pattern.dtype)

    def intervene(self, layer: int, z: torch.Tensor) -> torch.Tensor:
        heads = self.ablate.get(layer) if self.enabled else None
        if not heads:
            return z
        z = z.clone()  # (B, T, H, dh)
        if self.mode == "zero":
            z[:, :, heads] = 0.0
        elif self.mode == "mean":
            mean = self.mean_z[layer].to(z.dtype)  # (H, dh) or (T, H, dh)
            if mean.dim() == 3:
                mean = mean[: z.shape[1]]  # (T, H, dh)
                z[:, :, heads] = mean[None, :, heads].expand(z.shape[0], -1, -1, -1)
            else:
                z[:, :, heads] = mean[heads].expand(z.shape[0], z.shape[1], -1, -1)
        else:
            raise ValueError(f"ablation mode must be 'zero' or 'mean', got {self.mode!r}")
        return z

    def record(self, layer: int, pattern: torch.Tensor, z: torch.Tensor) -> None:
        if not self.wants(layer):
            return
        if self.record_pattern:
            self.cache[hook_name(layer, "hook_pattern")] = pattern.detach()  # (B, H, T, S)
        if self.record_z:
            self.cache[hook_name(layer, "hook_z")] = z.detach()  # (B, T, H, dh)


_ACTIVE: list[Instrumentation] = []


def _telemetry_attention(  # noqa: PLR0917 - the transformers attention signature
    module: nn.Module,
    query: torch.Tensor,  # (B, H, T, dh)
    key: torch.Tensor,  # (B, H_kv, S, dh)
    value: torch.Tensor,  # (B, H_kv, S, dh)
    attention_mask: torch.Tensor | None,  # (B or 1, 1, T, S) additive or boolean
    scaling: float | None = None,
    dropout: float = 0.0,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Eager attention with recording and interventions; returns z (B, T, H, dh) and pattern."""
    groups = int(getattr(module, "num_key_value_groups", 1) or 1)
    if groups > 1:
        key = key.repeat_interleave(groups, dim=1)  # (B, H, S, dh)
        value = value.repeat_interleave(groups, dim=1)  # (B, H, S, dh)
    if scaling is None:
        scaling = query.shape[-1] ** -0.5
    scores = torch.matmul(query, key.transpose(-1, -2)) * scaling  # (B, H, T, S)
    if attention_mask is not None:
        mask = attention_mask[..., : key.shape[-2]]
        if mask.dtype == torch.bool:
            scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
        else:
            scores = scores + mask
    pattern = torch.softmax(scores, dim=-1, dtype=torch.float32).to(query.dtype)  # (B, H, T, S)
    layer = int(getattr(module, "layer_idx", -1))
    active = [inst for inst in _ACTIVE if id(module) in inst.modules]
    for inst in active:
        pattern = inst.freeze(layer, pattern)
    if dropout and module.training:
        pattern = nn.functional.dropout(pattern, p=dropout)
    z = torch.matmul(pattern, value).transpose(1, 2).contiguous()  # (B, T, H, dh)
    for inst in active:
        z = inst.intervene(layer, z)
    for inst in active:
        inst.record(layer, pattern, z)
    return z, pattern


AttentionInterface.register(ATTENTION_NAME, _telemetry_attention)
# GPT-2 / Llama / NeoX build their causal mask by implementation name; ours is eager-style.
AttentionMaskInterface.register(ATTENTION_NAME, eager_mask)


def attention_modules(model: nn.Module) -> list[nn.Module]:
    """The self-attention module of every layer, ordered by ``layer_idx``.

    A module qualifies when it has ``layer_idx`` and an output projection (``o_proj``,
    ``c_proj``, ``dense`` or ``out_proj``), which picks GPT-2's ``GPT2Attention``, NeoX's
    ``GPTNeoXAttention``, Llama's ``LlamaAttention`` and our ``AttentionOnlyAttention``.
    """
    found: dict[int, nn.Module] = {}
    for module in model.modules():
        layer = getattr(module, "layer_idx", None)
        if layer is None or not any(hasattr(module, p) for p in _OUTPUT_PROJECTIONS):
            continue
        if "Attention" not in type(module).__name__ and layer in found:
            continue
        found[int(layer)] = module
    if not found:
        raise ValueError(f"no attention modules with layer_idx found in {type(model).__name__}")
    return [found[i] for i in sorted(found)]


def n_layers_heads(model: nn.Module) -> tuple[int, int]:
    """``(n_layers, n_heads)`` of a decoder (query heads, not key/value heads)."""
    config = model.config
    return int(config.num_hidden_layers), int(config.num_attention_heads)


def output_projection_weights(model: nn.Module) -> list[torch.Tensor]:
    """``W_O`` of every layer split by head: a list of ``(H, dh, d_model)`` tensors.

    GPT-2's ``c_proj`` is a ``Conv1D`` whose weight is ``(in, out)``; ``nn.Linear``
    projections (``o_proj``, ``dense``) store ``(out, in)``. Either way the result maps a
    head's z (dh) into the residual stream: ``o_h = z_h @ W_O[h]``.
    """
    _, n_heads = n_layers_heads(model)
    weights = []
    for module in attention_modules(model):
        proj = next(getattr(module, p) for p in _OUTPUT_PROJECTIONS if hasattr(module, p))
        weight = proj.weight
        w_in_out = weight.T if isinstance(proj, nn.Linear) else weight  # (in, out)
        inner, d_model = w_in_out.shape
        weights.append(w_in_out.reshape(n_heads, inner // n_heads, d_model))  # (H, dh, d)
    return weights


def value_weights(model: nn.Module) -> list[torch.Tensor]:
    """``W_V`` of every layer split by query head: a list of ``(H, d_model, dh)`` tensors.

    ``v_h = x @ W_V[h]`` (biases left out). GPT-2's fused ``c_attn`` is a ``Conv1D`` ``(d, 3d)``
    whose last third is V; GPT-NeoX's fused ``query_key_value`` (``nn.Linear``) lays its
    outputs out per head as ``(H, [q, k, v], dh)``; Llama and our attention-only model have a
    ``v_proj`` with ``H_kv`` heads, and query head ``h`` reads key/value head
    ``h // num_key_value_groups`` (grouped-query attention).
    """
    _, n_heads = n_layers_heads(model)
    weights = []
    for module in attention_modules(model):
        if hasattr(module, "v_proj"):
            weight = module.v_proj.weight.T  # (d, H_kv * dh)
            d_model = weight.shape[0]
            groups = int(getattr(module, "num_key_value_groups", 1) or 1)
            per_kv = weight.reshape(d_model, n_heads // groups, -1).permute(1, 0, 2)  # (Hkv,d,dh)
            weights.append(per_kv.repeat_interleave(groups, dim=0))  # (H, d, dh)
        elif hasattr(module, "c_attn"):  # GPT-2 Conv1D: weight is (in, out) = (d, 3d)
            d_model = module.c_attn.weight.shape[0]
            v = module.c_attn.weight[:, 2 * d_model :]  # (d, d)
            weights.append(v.reshape(d_model, n_heads, -1).permute(1, 0, 2))  # (H, d, dh)
        elif hasattr(module, "query_key_value"):  # GPT-NeoX: Linear (3d, d), rows (H, 3, dh)
            weight = module.query_key_value.weight  # (3d, d)
            d_model = weight.shape[1]
            per_head = weight.reshape(n_heads, 3, -1, d_model)[:, 2]  # (H, dh, d)
            weights.append(per_head.transpose(1, 2))  # (H, d, dh)
        else:
            raise ValueError(f"no value projection found in {type(module).__name__}")
    return weights


def final_norm(model: nn.Module) -> nn.Module:
    """The final LayerNorm/RMSNorm before the unembedding, found by model family."""
    for path in _FINAL_NORM_PATHS:
        module: Any = model
        for part in path.split("."):
            module = getattr(module, part, None)
            if module is None:
                break
        if isinstance(module, nn.Module):
            return module
    raise ValueError(
        f"no final norm found in {type(model).__name__} (looked at {_FINAL_NORM_PATHS})"
    )


def norm_is_centering(norm: nn.Module) -> bool:
    """True for LayerNorm (subtracts the mean), False for RMSNorm."""
    return isinstance(norm, nn.LayerNorm) or "LayerNorm" in type(norm).__name__


def _norm_eps(norm: nn.Module) -> float:
    for name in ("eps", "variance_epsilon", "epsilon"):
        if hasattr(norm, name):
            return float(getattr(norm, name))
    return 1e-5


def norm_weight(norm: nn.Module) -> torch.Tensor | None:
    """The final norm's elementwise gain ``gamma`` (d_model,), or None."""
    weight = getattr(norm, "weight", None)
    return weight if isinstance(weight, torch.Tensor) else None


@contextmanager
def capture_final_norm(model: nn.Module, cache: dict[str, torch.Tensor]) -> Iterator[None]:
    """Record the residual entering the final norm and its scale into ``cache``.

    ``ln_final.hook_input`` is ``(B, T, d)``; ``ln_final.hook_scale`` ``(B, T, 1)`` is the
    divisor: ``sqrt(var + eps)`` for LayerNorm (after centring), ``sqrt(mean(x^2) + eps)`` for
    RMSNorm. Direct logit attribution divides a component by it.
    """
    norm = final_norm(model)
    centering, eps = norm_is_centering(norm), _norm_eps(norm)

    def hook(_module: nn.Module, args: tuple[Any, ...]) -> None:
        resid = args[0].detach()  # (B, T, d)
        x = resid.float()
        if centering:
            x = x - x.mean(-1, keepdim=True)
        cache["ln_final.hook_input"] = resid
        cache["ln_final.hook_scale"] = (x.pow(2).mean(-1, keepdim=True) + eps).sqrt()  # (B,T,1)

    handle = norm.register_forward_pre_hook(hook)
    try:
        yield
    finally:
        handle.remove()


@contextmanager
def instrument(
    model: nn.Module,
    *,
    record_pattern: bool = False,
    record_z: bool = False,
    layers: Iterable[int] | None = None,
    ablate: Mapping[int, Iterable[int]] | None = None,
    mode: str = "zero",
    mean_z: Mapping[int, torch.Tensor] | None = None,
    frozen_patterns: Mapping[int, torch.Tensor] | None = None,
    record_final_norm: bool = False,
) -> Iterator[Instrumentation]:
    """Switch ``model`` to the telemetry attention function for the duration of the block.

    Yields the :class:`Instrumentation`, whose ``cache`` fills on every forward pass inside
    the block (each pass overwrites the previous one's entries). The previous attention
    implementation is restored on exit, also on error.

    Args:
        record_pattern / record_z: keep ``hook_pattern`` (B, H, T, S) / ``hook_z`` (B, T, H, dh).
        layers: layers to record (default all).
        ablate: ``{layer: heads}`` whose z is replaced according to ``mode``.
        mode: ``"zero"`` or ``"mean"`` (needs ``mean_z``: ``{layer: (H, dh) or (T, H, dh)}``).
        frozen_patterns: ``{layer: (B, H, T, S)}`` patterns to use instead of computed ones.
        record_final_norm: also record ``ln_final.hook_input`` and ``ln_final.hook_scale``.
    """
    if mode not in ("zero", "mean"):
        raise ValueError(f"ablation mode must be 'zero' or 'mean', got {mode!r}")
    ablate_map = {
        int(layer): sorted({int(h) for h in heads}) for layer, heads in (ablate or {}).items()
    }
    if mode == "mean":
        missing = [layer for layer in ablate_map if layer not in (mean_z or {})]
        if missing:
            raise ValueError(f"mean_source: no mean z for ablated layers {missing}")
    inst = Instrumentation(
        modules={id(m) for m in attention_modules(model)},
        record_pattern=record_pattern,
        record_z=record_z,
        layers=None if layers is None else {int(x) for x in layers},
        ablate=ablate_map,
        mode=mode,
        mean_z=dict(mean_z or {}),
        frozen_patterns=dict(frozen_patterns or {}),
    )
    config = model.config
    previous = config._attn_implementation
    config._attn_implementation = ATTENTION_NAME
    _ACTIVE.append(inst)
    try:
        if record_final_norm:
            with capture_final_norm(model, inst.cache):
                yield inst
        else:
            yield inst
    finally:
        _ACTIVE.remove(inst)
        config._attn_implementation = previous
