import pytest
import torch

from ih_kedro.science.telemetry.instrumentation import (
    ATTENTION_NAME,
    attention_modules,
    final_norm,
    hook_name,
    instrument,
    output_projection_weights,
    value_weights,
)
from ih_kedro.science.training.models import build_model


@pytest.mark.parametrize("preset", ["attn-only-2l-d64", "gpt2-tiny", "llama-tiny", "pythia-tiny"])
def test_patterns_and_z_match_eager_and_outputs_unchanged(preset):
    model = build_model(preset, 50, 24, seed=0, attn_implementation="sdpa").eval()
    tokens = torch.randint(0, 50, (2, 12), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        model.config._attn_implementation = "eager"
        reference = model(tokens, output_attentions=True)
        model.config._attn_implementation = "sdpa"
        with instrument(model, record_pattern=True, record_z=True, record_final_norm=True) as inst:
            assert model.config._attn_implementation == ATTENTION_NAME
            out = model(tokens)
    assert model.config._attn_implementation == "sdpa"
    torch.testing.assert_close(out.logits, reference.logits, atol=1e-5, rtol=1e-5)
    n_heads = model.config.num_attention_heads
    for layer in range(2):
        torch.testing.assert_close(
            inst.cache[hook_name(layer, "hook_pattern")], reference.attentions[layer]
        )
        z = inst.cache[hook_name(layer, "hook_z")]
        assert z.shape[:3] == (2, 12, n_heads)  # GQA heads are expanded to query heads
    # W_O split by head reproduces the attention output from hook_z.
    w_o = output_projection_weights(model)[0]
    assert w_o.shape[0] == n_heads
    scale = inst.cache["ln_final.hook_scale"]
    assert scale.shape == (2, 12, 1) and (scale > 0).all()
    assert final_norm(model) is not None


def test_zero_ablation_changes_output_and_restores():
    model = build_model("gpt2-tiny", 50, 24, seed=0).eval()
    tokens = torch.randint(0, 50, (2, 10))
    with torch.no_grad():
        clean = model(tokens).logits
        with instrument(model, ablate={1: [0, 1, 2, 3]}, record_z=True) as inst:
            ablated = model(tokens).logits
        assert inst.cache[hook_name(1, "hook_z")].abs().max() == 0
        assert not torch.allclose(clean, ablated)
        torch.testing.assert_close(model(tokens).logits, clean)


def test_o_proj_reconstruction_attention_only():
    model = build_model("attn-only-2l-d64", 50, 24, seed=0).eval()
    tokens = torch.randint(0, 50, (1, 8))
    captured = {}
    handle = model.blocks[0].attn.o_proj.register_forward_hook(
        lambda m, a, o: captured.__setitem__("out", o)
    )
    with torch.no_grad(), instrument(model, record_z=True) as inst:
        model(tokens)
    handle.remove()
    z = inst.cache[hook_name(0, "hook_z")]  # (B, T, H, dh)
    per_head = torch.einsum("bthe,hed->btd", z, output_projection_weights(model)[0])
    torch.testing.assert_close(per_head, captured["out"], atol=1e-5, rtol=1e-5)


def _projection(module):
    for name in ("o_proj", "c_proj", "dense"):
        if hasattr(module, name):
            return getattr(module, name)
    raise AssertionError(type(module).__name__)


@pytest.mark.parametrize("preset", ["gpt2-tiny", "pythia-tiny", "llama-tiny"])
def test_per_head_w_o_and_w_v_splits_reconstruct_the_attention(preset):
    """GPT-2 (Conv1D), GPT-NeoX (fused per-head qkv) and Llama (GQA: 4 query, 2 kv heads)."""
    model = build_model(preset, 50, 24, seed=0).eval()
    tokens = torch.randint(0, 50, (2, 9), generator=torch.Generator().manual_seed(1))
    module = attention_modules(model)[1]
    captured = {}
    handles = [
        _projection(module).register_forward_hook(lambda m, a, o: captured.__setitem__("out", o)),
        module.register_forward_pre_hook(
            lambda m, a, k: captured.__setitem__("x", a[0] if a else k["hidden_states"]),
            with_kwargs=True,
        ),
    ]
    # Identity patterns: every query attends to itself, so z_h = v_h at each position.
    n_heads = model.config.num_attention_heads
    identity = torch.eye(9).expand(2, n_heads, 9, 9).clone()  # (B, H, T, S)
    with torch.no_grad():
        for name, param in module.named_parameters():
            if name.endswith("bias"):
                param.zero_()
        with instrument(model, record_z=True, frozen_patterns={1: identity}) as inst:
            model(tokens)
    for handle in handles:
        handle.remove()
    z = inst.cache[hook_name(1, "hook_z")]  # (B, T, H, dh)
    per_head = torch.einsum("bthe,hed->btd", z, output_projection_weights(model)[1])
    torch.testing.assert_close(per_head, captured["out"], atol=1e-5, rtol=1e-5)
    v = torch.einsum("btd,hde->bthe", captured["x"], value_weights(model)[1])  # (B, T, H, dh)
    torch.testing.assert_close(z, v, atol=1e-5, rtol=1e-5)


def test_ablating_one_gqa_query_head_changes_only_that_head():
    model = build_model("llama-tiny", 50, 24, seed=0).eval()  # 4 query heads share 2 kv heads
    tokens = torch.randint(0, 50, (2, 10), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        with instrument(model, record_z=True, layers={0}) as clean:
            model(tokens)
        with instrument(model, record_z=True, layers={0}, ablate={0: [1]}) as ablated:
            model(tokens)
    z_clean = clean.cache[hook_name(0, "hook_z")]  # (B, T, H, dh)
    z_ablated = ablated.cache[hook_name(0, "hook_z")]
    assert z_ablated[:, :, 1].abs().max() == 0 and z_clean[:, :, 1].abs().max() > 0
    # Head 0 shares head 1's key/value head and is untouched, as are heads 2 and 3.
    torch.testing.assert_close(z_ablated[:, :, [0, 2, 3]], z_clean[:, :, [0, 2, 3]])


@pytest.mark.parametrize(
    "options",
    [{"scale_attn_by_inverse_layer_idx": True}, {"scale_attn_weights": False},
     {"scale_attn_by_inverse_layer_idx": True, "scale_attn_weights": False}],
)  # fmt: skip
def test_gpt2_attention_scale_options_are_honoured(options):
    preset = {"family": "gpt2", "n_layer": 2, "n_head": 4, "n_embd": 64}
    model = build_model({**preset, **options}, 50, 24, seed=0, attn_implementation="eager")
    default = build_model(preset, 50, 24, seed=0, attn_implementation="eager").eval()
    model.eval()
    tokens = torch.randint(0, 50, (2, 12), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        reference = model(tokens, output_attentions=True)
        with instrument(model, record_pattern=True) as inst:
            out = model(tokens)
        assert not torch.allclose(default(tokens).logits, reference.logits, atol=1e-4)
    torch.testing.assert_close(out.logits, reference.logits, atol=1e-5, rtol=1e-5)
    for layer in range(2):
        torch.testing.assert_close(
            inst.cache[hook_name(layer, "hook_pattern")], reference.attentions[layer]
        )
