import pytest
import torch

from ih_kedro.science.telemetry.instrumentation import (
    instrument,
    output_projection_weights,
    value_weights,
)
from ih_kedro.science.telemetry.probes import make_probe_set, uniform_token_pool
from ih_kedro.science.telemetry.scores import (
    head_pattern_scores,
    ov_copying_scores,
    prefix_matching_scores,
    prefix_matching_scores_per_sample,
    repeated_probe_scores,
    top_fraction_share,
    uniform_prefix_matching_baseline,
)
from ih_kedro.science.training.models import build_model


def test_handset_model_scores(handset_model, handset_probes):
    scores = repeated_probe_scores(handset_model, handset_probes.tokens, batch_size=8)
    ps = scores["prefix_matching"].mean(0)
    assert ps[1, 0] > 0.99
    assert ps[0].max() < 0.01 and ps[1, 1] < 0.01
    prev = scores["previous_token"].mean(0)
    assert prev[0, 0] > 0.99 and prev[1].max() < 0.01
    assert scores["associative_recall"].mean() == 1.0
    assert scores["associative_recall_mean_rank"].mean() == 0.0
    assert scores["logit_attribution"].mean(0)[1, 0] > 0.99
    assert scores["attended_logit_share"].mean(0)[1, 0] > 0.99
    # Olsson's OV copying score: the induction head's OV circuit is a positive diagonal.
    copying = ov_copying_scores(handset_model)
    assert copying[1, 0] > 0.99
    assert copying[0, 1] == 0.0 and copying[1, 1] == 0.0  # heads that write nothing
    assert abs(copying[0, 0]) < 0.5  # the previous-token head writes PREV, which W_U ignores
    assert scores["direct_logit_attribution"].mean(0)[1, 0] > 10
    assert scores["repeated_loss_drop"].mean() > 5


def test_random_model_near_uniform_baseline():
    model = build_model("attn-only-2l-d128", 300, 64, seed=0)
    probes = make_probe_set(uniform_token_pool(300), 16, 32, 0, "uniform").tokens
    ps = prefix_matching_scores(model, probes, batch_size=8)
    assert ps.shape == (2, 4)
    # Every head of a random-init model sits at the uniform baseline, to 10% relative.
    baseline = uniform_prefix_matching_baseline(32)
    assert baseline == pytest.approx(0.02142, abs=1e-5)  # mean of 1/(i+1), i in [32, 64)
    torch.testing.assert_close(ps, torch.full_like(ps, baseline), rtol=0.10, atol=0.0)


def _loop_prefix_matching(model, probes):
    """Direct per-head loop on eager ``output_attentions`` (the reference's definition)."""
    length = probes.shape[1] // 2
    with torch.no_grad():
        attentions = model(probes, output_attentions=True).attentions
    n_layers, n_heads = len(attentions), attentions[0].shape[1]
    out = torch.zeros(probes.shape[0], n_layers, n_heads)
    for layer in range(n_layers):
        for head in range(n_heads):
            for b in range(probes.shape[0]):
                values = [
                    attentions[layer][b, head, i, i - (length - 1)]
                    for i in range(length, 2 * length)
                ]
                out[b, layer, head] = torch.stack(values).mean()
    return out


def test_batched_matches_per_head_loop_on_gpt2():
    model = build_model("gpt2-tiny", 100, 32, seed=1, attn_implementation="eager").eval()
    with torch.no_grad():  # make attention non-uniform
        for p in model.parameters():
            p.mul_(10.0)
    probes = make_probe_set(uniform_token_pool(100), 6, 10, 0, "uniform").tokens
    batched = prefix_matching_scores_per_sample(model, probes, batch_size=4)
    torch.testing.assert_close(batched, _loop_prefix_matching(model, probes), atol=1e-5, rtol=1e-4)
    assert batched.std() > 1e-3


def test_top_fraction_share():
    scores = torch.tensor([[1.0, 0.0], [0.0, 3.0]])
    assert top_fraction_share(scores, 0.02) == pytest.approx(0.75)


def test_repeated_scores_reject_odd_probes(handset_model, handset_probes):
    odd = handset_probes.tokens[:, :-1]  # (n, 2L - 1)
    with pytest.raises(ValueError, match="even length"):
        prefix_matching_scores(handset_model, odd, batch_size=8)
    with pytest.raises(ValueError, match="even length"):
        repeated_probe_scores(handset_model, odd, batch_size=8)


def _full_ov_copying(model, layer: int, head: int) -> float:
    """The copying score from the full (V, V) OV circuit's eigenvalues (no cyclic shortcut)."""
    w_e = model.get_input_embeddings().weight.double()  # (V, d)
    w_u = model.get_output_embeddings().weight.double()  # (V, d)
    w_v = value_weights(model)[layer][head].double()  # (d, dh)
    w_o = output_projection_weights(model)[layer][head].double()  # (dh, d)
    with torch.no_grad():
        eigenvalues = torch.linalg.eigvals(w_e @ w_v @ w_o @ w_u.T)  # (V,)
    return float(eigenvalues.real.sum() / eigenvalues.abs().sum())


@pytest.mark.parametrize("preset", ["attn-only-2l-d64", "gpt2-tiny", "pythia-tiny", "llama-tiny"])
def test_ov_copying_matches_the_full_vocabulary_circuit(preset):
    model = build_model(preset, 40, 16, seed=1).eval()
    scores = ov_copying_scores(model)  # (layers, heads)
    assert scores.shape == (2, model.config.num_attention_heads)
    for layer, head in [(0, 0), (1, model.config.num_attention_heads - 1)]:
        assert float(scores[layer, head]) == pytest.approx(
            _full_ov_copying(model, layer, head), abs=1e-6
        )
    assert torch.all(scores.abs() <= 1.0 + 1e-6)


def test_anti_induction_head_scores_one():
    """A head whose pattern attends to the token before the previous occurrence scores ~1."""
    model = build_model("attn-only-2l-d64", 50, 40, seed=0).eval()
    generator = torch.Generator().manual_seed(4)
    first = torch.stack([torch.randperm(49, generator=generator)[:12] + 1 for _ in range(6)])
    tokens = torch.cat([first, first.flip(1)], dim=1)  # (6, 24): S ‖ reverse(S)
    batch, seq = tokens.shape
    pattern = torch.zeros(batch, 4, seq, seq)  # (B, H, T, S)
    pattern[..., 0] = 1.0  # default: attend to the first token
    for b in range(batch):
        for i in range(seq):
            earlier = [j for j in range(i) if tokens[b, j] == tokens[b, i]]
            if earlier and earlier[-1] >= 1:
                pattern[b, 2, i] = 0.0
                pattern[b, 2, i, earlier[-1] - 1] = 1.0  # head 1.2: before the previous occurrence
    with instrument(model, frozen_patterns={1: pattern}):
        scores = head_pattern_scores(model, tokens, batch_size=batch, repeated=False)
    anti = scores["anti_induction"].mean(0)  # (layers, heads)
    assert anti[1, 2] == pytest.approx(1.0, abs=1e-6)
    assert anti[1, 0] < 0.2 and scores["induction"].mean(0)[1, 2] < 0.2


def test_direct_logit_attribution_exact_with_layernorm_scale_and_shift():
    """Heads' DLA plus the embeddings' and the final norm's bias reconstruct the target logit.

    The final LayerNorm has a non-trivial gain and bias, and the residual stream a non-zero
    mean; with the clean run's scale frozen the norm is linear, so the decomposition is exact.
    """
    model = build_model("attn-only-2l-d64", 40, 24, seed=2).eval()
    generator = torch.Generator().manual_seed(5)
    with torch.no_grad():
        model.ln_f.weight.copy_(torch.rand(64, generator=generator) * 2 + 0.5)
        model.ln_f.bias.copy_(torch.randn(64, generator=generator))
        model.wte.weight.add_(0.7)  # residuals with a non-zero mean
        for block in model.blocks:
            block.attn.o_proj.weight.mul_(5.0)  # heads that move the logits
    probes = make_probe_set(uniform_token_pool(40), 4, 8, 0, "uniform").tokens  # (4, 16)
    dla = repeated_probe_scores(model, probes, batch_size=4)["direct_logit_attribution"]
    length = 8
    second = slice(length, 2 * length)
    targets = probes[:, 1 : length + 1]  # (4, L)
    cache: dict[str, torch.Tensor] = {}
    with torch.no_grad(), instrument(model, record_final_norm=True) as inst:
        logits = model(probes).logits[:, second]  # (4, L, V)
        cache = inst.cache
    scale = cache["ln_final.hook_scale"][:, second]  # (4, L, 1)
    positions = torch.arange(2 * length)
    with torch.no_grad():
        embed = (model.wte(probes) + model.wpe(positions))[:, second]  # (4, L, d)
        u = model.lm_head.weight[targets] * model.ln_f.weight  # (4, L, d)
        u_centred = u - u.mean(-1, keepdim=True)
        embed_part = (embed * u_centred).sum(-1) / scale[..., 0]  # (4, L)
        bias_part = (model.ln_f.bias * model.lm_head.weight[targets]).sum(-1)  # (4, L)
    target_logit = logits.gather(-1, targets[..., None])[..., 0]  # (4, L)
    expected = (target_logit - embed_part - bias_part).mean(1)  # (4,) mean over queries
    torch.testing.assert_close(dla.sum((1, 2)), expected, atol=1e-4, rtol=1e-4)
    # Non-trivial per query (the mean over queries partly cancels).
    assert (target_logit - embed_part - bias_part).abs().mean() > 0.1
