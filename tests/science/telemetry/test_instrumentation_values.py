"""Value-asserting tests of ``telemetry/instrumentation.py`` (hand-set patterns and z, the
model's own forward pass as reference), written to kill mutation-testing survivors."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from ih_kedro.science.telemetry import instrumentation as ins
from ih_kedro.science.telemetry.instrumentation import (
    Instrumentation,
    attention_modules,
    capture_final_norm,
    final_norm,
    hook_name,
    instrument,
    n_layers_heads,
    norm_is_centering,
    norm_weight,
)
from ih_kedro.science.training.models import build_model


def _z() -> torch.Tensor:
    return torch.arange(2 * 3 * 4 * 2, dtype=torch.float32).reshape(2, 3, 4, 2) + 1.0


def test_hook_name_is_transformerlens_key():
    assert hook_name(3, "hook_z") == "blocks.3.attn.hook_z"


def test_zero_ablation_zeroes_only_listed_heads_and_respects_enabled():
    inst = Instrumentation(modules=set(), ablate={1: [0, 2]})
    z = _z()
    out = inst.intervene(1, z)
    expected = z.clone()
    expected[:, :, [0, 2]] = 0.0
    assert torch.equal(out, expected)
    assert torch.equal(z, _z())  # input untouched
    assert torch.equal(inst.intervene(0, z), z)  # other layer
    inst.enabled = False
    assert torch.equal(inst.intervene(1, z), z)


def test_mean_ablation_with_per_head_and_per_position_means():
    mean2 = torch.tensor([[10.0, 11.0], [20.0, 21.0], [30.0, 31.0], [40.0, 41.0]])  # (H, dh)
    inst = Instrumentation(modules=set(), ablate={0: [1, 3]}, mode="mean", mean_z={0: mean2})
    out = inst.intervene(0, _z())
    for b in range(2):
        for t in range(3):
            assert out[b, t, 1].tolist() == [20.0, 21.0]
            assert out[b, t, 3].tolist() == [40.0, 41.0]
            assert torch.equal(out[b, t, 0], _z()[b, t, 0])
            assert torch.equal(out[b, t, 2], _z()[b, t, 2])
    mean3 = torch.arange(5 * 4 * 2, dtype=torch.float64).reshape(5, 4, 2) * -1.0  # (T>3, H, dh)
    inst.mean_z = {0: mean3}
    out = inst.intervene(0, _z())
    assert out.dtype == torch.float32
    for b in range(2):
        for t in range(3):
            assert out[b, t, 1].tolist() == mean3[t, 1].tolist()
            assert out[b, t, 3].tolist() == mean3[t, 3].tolist()
            assert torch.equal(out[b, t, 2], _z()[b, t, 2])


def test_unknown_mode_raises_in_intervene_and_instrument():
    inst = Instrumentation(modules=set(), ablate={0: [0]}, mode="resample")
    with pytest.raises(ValueError, match="'zero' or 'mean', got 'resample'"):
        inst.intervene(0, _z())
    model = build_model("attn-only-2l-d64", 50, 24, seed=0)
    with pytest.raises(ValueError, match="got 'x'"), instrument(model, mode="x"):
        pass
    with pytest.raises(ValueError, match=r"layers \[1\]"):
        with instrument(
            model, ablate={0: [0], 1: [1]}, mode="mean", mean_z={0: torch.zeros(4, 16)}
        ):
            pass


def test_freeze_replaces_pattern_casts_dtype_and_checks_shape():
    pattern = torch.rand(1, 2, 3, 3)
    frozen = torch.full((1, 2, 3, 3), 0.25, dtype=torch.float64)
    inst = Instrumentation(modules=set(), frozen_patterns={2: frozen})
    out = inst.freeze(2, pattern)
    assert out.dtype == torch.float32 and torch.equal(out, torch.full((1, 2, 3, 3), 0.25))
    assert inst.freeze(1, pattern) is pattern
    with pytest.raises(ValueError, match=r"layer 2 has shape \(1, 2, 3, 3\).*\(1, 2, 4, 4\)"):
        inst.freeze(2, torch.rand(1, 2, 4, 4))
    inst.enabled = False
    assert inst.freeze(2, pattern) is pattern


def test_record_honours_layers_and_flags():
    p, z = torch.rand(1, 2, 3, 3), _z()
    inst = Instrumentation(modules=set(), record_pattern=True, layers={1})
    inst.record(0, p, z)
    assert inst.cache == {}
    inst.record(1, p, z)
    assert set(inst.cache) == {"blocks.1.attn.hook_pattern"}
    assert torch.equal(inst.cache["blocks.1.attn.hook_pattern"], p)
    inst = Instrumentation(modules=set(), record_z=True)
    inst.record(4, p, z)
    assert set(inst.cache) == {"blocks.4.attn.hook_z"} and torch.equal(
        inst.cache[hook_name(4, "hook_z")], z
    )


class _Module(nn.Module):
    def __init__(self, groups=1):
        super().__init__()
        self.layer_idx = 0
        self.num_key_value_groups = groups


def _reference(q, k, v, mask_add, scaling):
    scores = q @ k.transpose(-1, -2) * scaling + mask_add
    pattern = scores.softmax(-1)
    return (pattern @ v).transpose(1, 2), pattern


def test_telemetry_attention_gqa_default_scaling_and_masks():
    g = torch.Generator().manual_seed(0)
    q = torch.randn(2, 4, 5, 8, generator=g)
    k = torch.randn(2, 2, 5, 8, generator=g)
    v = torch.randn(2, 2, 5, 8, generator=g)
    causal = torch.tril(torch.ones(5, 5, dtype=torch.bool))
    k_rep, v_rep = k.repeat_interleave(2, 1), v.repeat_interleave(2, 1)
    add = torch.zeros(5, 5).masked_fill(~causal, float("-inf"))
    z_ref, p_ref = _reference(q, k_rep, v_rep, add, 8**-0.5)
    module = _Module(groups=2)
    bool_mask = torch.zeros(1, 1, 5, 7, dtype=torch.bool)  # extra columns cut to the keys
    bool_mask[..., :5] = causal
    z, p = ins._telemetry_attention(module, q, k, v, bool_mask)
    torch.testing.assert_close(p, p_ref)
    torch.testing.assert_close(z, z_ref)
    add_mask = torch.zeros(1, 1, 5, 7)
    add_mask[..., :5] = add
    z, p = ins._telemetry_attention(module, q, k, v, add_mask, scaling=0.3)
    z_ref, p_ref = _reference(q, k_rep, v_rep, add, 0.3)
    torch.testing.assert_close(p, p_ref)
    torch.testing.assert_close(z, z_ref)
    # No mask, no groups attribute: plain softmax over all keys, kv heads 1:1.
    plain = nn.Module()
    z, p = ins._telemetry_attention(plain, q[:, :2], k, v, None)
    z_ref, p_ref = _reference(q[:, :2], k, v, 0.0, 8**-0.5)
    torch.testing.assert_close(p, p_ref)
    torch.testing.assert_close(z, z_ref)


def test_dropout_applies_only_in_training():
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(1, 1, 4, 4, generator=g) for _ in range(3))
    module = _Module()
    module.eval()
    z_eval, _ = ins._telemetry_attention(module, q, k, v, None, dropout=0.5)
    z_ref, _ = _reference(q, k, v, 0.0, 0.5)
    torch.testing.assert_close(z_eval, z_ref)
    module.train()
    torch.manual_seed(0)
    z_train, _ = ins._telemetry_attention(module, q, k, v, None, dropout=0.5)
    assert not torch.allclose(z_train, z_ref)


def test_frozen_pattern_drives_the_model_and_nested_contexts_both_record():
    model = build_model("gpt2-tiny", 50, 24, seed=0).eval()
    tokens = torch.randint(0, 50, (1, 6), generator=torch.Generator().manual_seed(0))
    n_heads = model.config.num_attention_heads
    uniform = torch.tril(torch.ones(6, 6))
    uniform = (uniform / uniform.sum(-1, keepdim=True)).expand(1, n_heads, 6, 6).clone()
    with torch.no_grad():
        with instrument(model, record_pattern=True, layers=[0]) as outer:
            with instrument(model, frozen_patterns={0: uniform}, record_pattern=True) as inner:
                model(tokens)
            outer_only = {k: v.clone() for k, v in outer.cache.items()}
            inner.enabled = False
    assert set(outer_only) == {hook_name(0, "hook_pattern")}
    torch.testing.assert_close(outer_only[hook_name(0, "hook_pattern")], uniform)
    torch.testing.assert_close(inner.cache[hook_name(0, "hook_pattern")], uniform)
    assert not torch.allclose(inner.cache[hook_name(1, "hook_pattern")][0, 0], uniform[0, 0])
    assert ins._ACTIVE == []


def test_instrument_restores_implementation_on_error():
    model = build_model("llama-tiny", 50, 24, seed=0, attn_implementation="eager")
    with pytest.raises(RuntimeError), instrument(model):
        raise RuntimeError
    assert model.config._attn_implementation == "eager" and ins._ACTIVE == []


@pytest.mark.parametrize("preset", ["gpt2-tiny", "llama-tiny", "pythia-tiny", "attn-only-2l-d64"])
def test_final_norm_capture_reproduces_the_norm(preset):
    model = build_model(preset, 50, 24, seed=0).eval()
    norm = final_norm(model)
    with torch.no_grad():
        for p in norm.parameters():
            p.normal_(generator=torch.Generator().manual_seed(5))
    tokens = torch.randint(0, 50, (2, 7), generator=torch.Generator().manual_seed(4))
    captured = {}
    handle = norm.register_forward_hook(lambda m, a, o: captured.__setitem__("out", o))
    cache: dict[str, torch.Tensor] = {}
    with torch.no_grad(), capture_final_norm(model, cache):
        model(tokens)
    handle.remove()
    x, scale = cache["ln_final.hook_input"], cache["ln_final.hook_scale"]
    centering = norm_is_centering(norm)
    assert centering == (preset != "llama-tiny")
    xc = x - x.mean(-1, keepdim=True) if centering else x
    expected = xc / scale * norm_weight(norm)
    if getattr(norm, "bias", None) is not None:
        expected = expected + norm.bias
    torch.testing.assert_close(expected, captured["out"], atol=1e-5, rtol=1e-5)
    eps = getattr(norm, "eps", getattr(norm, "variance_epsilon", None))
    torch.testing.assert_close(scale, (xc.pow(2).mean(-1, keepdim=True) + eps).sqrt())
    with torch.no_grad():
        model(tokens * 0)
    assert torch.equal(cache["ln_final.hook_input"], x)  # hook removed on exit


def test_norm_helpers_on_plain_modules():
    class Gain(nn.Module):
        def __init__(self):
            super().__init__()
            self.epsilon = 0.25

    assert ins._norm_eps(Gain()) == 0.25
    assert ins._norm_eps(nn.Identity()) == 1e-5
    assert ins._norm_eps(nn.LayerNorm(3, eps=0.125)) == 0.125
    assert norm_weight(Gain()) is None
    assert norm_is_centering(nn.LayerNorm(3)) and not norm_is_centering(nn.Identity())
    with pytest.raises(ValueError, match="no final norm found in Identity"):
        final_norm(nn.Identity())


def test_attention_modules_order_and_errors():
    model = build_model("llama-tiny", 50, 24, seed=0)
    mods = attention_modules(model)
    assert [m.layer_idx for m in mods] == [0, 1]
    assert all("Attention" in type(m).__name__ for m in mods)
    assert n_layers_heads(model) == (2, model.config.num_attention_heads)
    with pytest.raises(ValueError, match="no attention modules with layer_idx found in Linear"):
        attention_modules(nn.Linear(2, 2))


# --- written against the second mutation run's survivors ------------------------------------
class _Projecting(nn.Module):
    def __init__(self, layer: int) -> None:
        super().__init__()
        self.layer_idx = layer
        self.o_proj = nn.Linear(2, 2)


class MyAttention(_Projecting):
    pass


class Block(_Projecting):
    """Not an attention module, but it carries layer_idx and an output projection."""

    def __init__(self, layer: int, child: nn.Module | None = None) -> None:
        super().__init__(layer)
        self.child = child


def test_attention_modules_prefer_attention_classes_and_keep_scanning():
    # Block 0 (first in modules()) is replaced by its MyAttention child; the helper of layer 0
    # that comes later does not displace it; layer 1 after the skipped helper is still found.
    attn0 = MyAttention(0)
    model = nn.Sequential(Block(0, attn0), Block(0), MyAttention(1))
    assert attention_modules(model) == [attn0, model[2]]
    lone = nn.Sequential(Block(3))  # a non-Attention module is taken when nothing else is
    assert attention_modules(lone) == [lone[0]]


def test_value_weights_names_the_module_without_a_value_projection():
    model = nn.Sequential(MyAttention(0))
    model.config = type("Config", (), {"num_hidden_layers": 1, "num_attention_heads": 2})()
    with pytest.raises(ValueError, match="no value projection found in MyAttention"):
        ins.value_weights(model)


def test_norm_is_centering_by_class_or_name_and_norm_weight_only_tensors():
    class FusedLayerNorm(nn.Module):  # not an nn.LayerNorm subclass: recognised by its name
        pass

    class RMSNorm(nn.Module):
        pass

    assert norm_is_centering(nn.LayerNorm(4)) and norm_is_centering(FusedLayerNorm())
    assert not norm_is_centering(RMSNorm())
    gain = nn.LayerNorm(4)
    assert norm_weight(gain) is gain.weight
    odd = RMSNorm()
    odd.weight = 1.0  # a non-tensor attribute is no gain
    assert norm_weight(odd) is None
