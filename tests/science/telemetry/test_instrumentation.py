import pytest
import torch

from ih_kedro.science.models import build_model
from ih_kedro.science.telemetry.instrumentation import (
    ATTENTION_NAME,
    final_norm,
    hook_name,
    instrument,
    output_projection_weights,
)


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
