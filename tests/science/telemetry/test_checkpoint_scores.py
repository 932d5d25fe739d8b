import numpy as np
import pytest
import torch

from ih_kedro.science.telemetry.checkpoint_scores import score_checkpoint
from ih_kedro.science.telemetry.instrumentation import instrument
from ih_kedro.science.telemetry.probes import make_probe_set, uniform_token_pool
from ih_kedro.science.telemetry.scores import icl_positions
from ih_kedro.science.training.models import build_model


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


def test_a_head_gated_to_every_other_position_scores_one_on_its_parity():
    """Data whose second halves alternate A B A B teach induction at the A positions only: such
    a head has PS ~0.5 (never the 0.4 threshold's sure side), 1 on its parity, 0 on the other,
    and the by-parity samples give emergence detection the best (head, parity)."""

    model = build_model("attn-only-2l-d64", 50, 32, seed=0).eval()
    probes = make_probe_set(uniform_token_pool(50, exclude=(0,)), 8, 12, 0, "uniform")
    tokens = probes.tokens  # (8, 24), L = 12
    batch, seq = tokens.shape
    pattern = torch.zeros(batch, 4, seq, seq)  # (B, H, T, S)
    pattern[..., 0] = 1.0
    for i in range(12, seq):
        if (i - 12) % 2 == 0:  # head 1.1: induction at even offsets into the second half
            pattern[:, 1, i] = 0.0
            pattern[:, 1, i, i - 11] = 1.0
    with instrument(model, frozen_patterns={1: pattern}):
        head_rows, model_rows, samples = score_checkpoint(model, probes, None, batch_size=8)
    value = {(r["metric"], r["layer"], r["head"]): r["value"] for r in head_rows}
    assert value[("prefix_matching", 1, 1)] == pytest.approx(0.5, abs=1e-6)
    assert value[("prefix_matching_even", 1, 1)] == pytest.approx(1.0, abs=1e-6)
    assert value[("prefix_matching_odd", 1, 1)] == pytest.approx(0.0, abs=1e-6)
    metrics = {r["metric"]: r["value"] for r in model_rows}
    assert metrics["prefix_matching_max"] == pytest.approx(0.5, abs=1e-6)
    assert metrics["prefix_matching_by_parity_max"] == pytest.approx(1.0, abs=1e-6)
    by_parity = samples["prefix_matching_by_parity"]  # (n, layers, 2 heads): even, then odd
    assert by_parity.shape == (8, 2, 8)
    np.testing.assert_allclose(by_parity[:, 1, 1], 1.0, atol=1e-6)  # head 1 even
    np.testing.assert_allclose(by_parity[:, 1, 4 + 1], 0.0, atol=1e-6)  # head 1 odd
