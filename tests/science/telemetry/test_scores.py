import numpy as np
import pytest
import torch

from ih_kedro.science.models import build_model
from ih_kedro.science.telemetry.instrumentation import output_projection_weights, value_weights
from ih_kedro.science.telemetry.probes import make_probe_set, uniform_token_pool
from ih_kedro.science.telemetry.scores import (
    icl_positions,
    ov_copying_scores,
    prefix_matching_scores,
    prefix_matching_scores_per_sample,
    repeated_probe_scores,
    score_checkpoint,
    top_fraction_share,
    uniform_prefix_matching_baseline,
)


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


def test_handset_bi_induct_scores(handset_model, handset_probes):
    head_rows, model_rows, samples = score_checkpoint(
        handset_model, handset_probes, None, batch_size=8
    )
    value = {(r["metric"], r["layer"], r["head"]): r["value"] for r in head_rows}
    assert value[("induction_induction_snippet", 1, 0)] > 0.99
    assert value[("anti_induction_induction_snippet", 1, 0)] < 0.01
    assert value[("anti_induction_anti_induction_snippet", 1, 0)] < 0.01
    metrics = {r["metric"]: r["value"] for r in model_rows}
    assert metrics["associative_recall"] == 1.0
    assert metrics["prefix_matching_max"] > 0.99
    assert samples["prefix_matching"].shape == (24, 2, 2)


def test_random_model_near_uniform_baseline():
    model = build_model("attn-only-2l-d128", 300, 64, seed=0)
    probes = make_probe_set(uniform_token_pool(300), 16, 32, 0, "uniform").tokens
    ps = prefix_matching_scores(model, probes, batch_size=8)
    assert ps.shape == (2, 4)
    assert torch.allclose(ps, torch.full_like(ps, uniform_prefix_matching_baseline(32)), atol=0.01)


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


def test_score_checkpoint_rows_and_validation():
    model = build_model("gpt2-tiny", 60, 64, seed=0)
    probe_set = make_probe_set(uniform_token_pool(60, exclude=(0,)), 4, 8, 0, "uniform", 0)
    validation = np.random.default_rng(0).integers(0, 60, (3, 65))
    head_rows, model_rows, samples = score_checkpoint(
        model, probe_set, validation, run_name="r", step=10, tokens_seen=640.0
    )
    assert {"run_name", "step", "tokens_seen", "layer", "head", "metric", "value", "sd",
            "probe_source"} <= set(head_rows[0])  # fmt: skip
    metrics = {r["metric"] for r in model_rows}
    assert {"icl_score", "validation_loss", "associative_recall", "repeated_loss_drop",
            "induction_top2pct_share"} <= metrics  # fmt: skip
    assert samples["associative_recall"].shape == (4,)
    assert icl_positions(512) == (49, 499)
    assert icl_positions(64) == (5, 61) and icl_positions(32) == (4, 30)  # floor at index 4
    with pytest.raises(ValueError, match="ICL score needs C >= 32"):
        icl_positions(24)
    short = score_checkpoint(model, probe_set, validation[:, :17], run_name="r")[1]
    (icl,) = [r for r in short if r["metric"] == "icl_score"]
    assert np.isnan(icl["value"]) and icl["probe_source"] == "not_applicable"


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
