"""Bi-Induct evaluation: run names, matched compute, top heads per layer, ablation controls,
results table."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

from ih_kedro.science.evaluation.bi_induct import (
    MatchedComputeError,
    ablation_drops,
    check_matched_compute,
    evaluate_checkpoint,
    item_metrics,
    matched_compute_table,
    relative_drop,
    results_table,
    runs_with_variants,
    top_induction_heads,
    variant_label,
)
from ih_kedro.science.telemetry.ablation import ablate_heads
from ih_kedro.science.training.models import build_model


def test_matched_compute_names_the_runs_that_differ() -> None:
    manifest = pd.DataFrame({
        "preset": ["p", "p", "q"], "seed": [0, 0, 0], "run_name": ["a", "b", "c"],
        "data_variant": ["natural", "x", "natural"], "steps_trained": [10, 10, 5],
        "tokens_seen": [100, 100, 50], "flops": [1e6, 1.1e6, 5e5],
    })  # fmt: skip
    with pytest.raises(MatchedComputeError, match=r"flops differs between variants \(a: 1e\+06"):
        check_matched_compute(manifest, ["preset", "seed"])
    manifest.loc[1, "flops"] = 1e6
    assert len(check_matched_compute(manifest, ["preset", "seed"])) == 3


def _run_row(preset: str, batch: int, context: int, label: str, seed: int, **extra) -> dict:
    return {"run_name": f"{preset}_B{batch}_C{context}_{label}_s{seed}", "preset": preset,
            "batch_size": batch, "context_length": context, "seed": seed, **extra}  # fmt: skip


def test_variant_label_is_the_middle_of_the_run_name() -> None:
    assert variant_label(_run_row("llama-tiny", 4, 48, "rev_s_x", 12)) == "rev_s_x"
    assert variant_label(_run_row("p", 16, 128, "n", 0)) == "n"


@pytest.mark.parametrize(
    "name",
    ["q_B4_C48_lab_s0", "p_B4_C48_lab_s1", "p_B5_C48_lab_s0", "p_B4_C49_lab_s0", "p_B4_C48_lab"],
)
def test_variant_label_rejects_a_name_off_the_pattern(name: str) -> None:
    run = {"run_name": name, "preset": "p", "batch_size": 4, "context_length": 48, "seed": 0}
    with pytest.raises(ValueError) as error:
        variant_label(run)
    assert str(error.value) == (
        f"sweep_manifest: run name {name!r} does not follow p_B4_C48_<label>_s0"
    )


def test_runs_with_variants_adds_the_variant_to_a_copy() -> None:
    manifest = pd.DataFrame([_run_row("p", 2, 8, "natural", 0), _run_row("p", 2, 8, "snip", 1)])
    runs = runs_with_variants(manifest)
    assert list(runs["variant"]) == ["natural", "snip"]
    assert "variant" not in manifest.columns


def test_matched_compute_table_is_the_checked_table_with_the_variant_second() -> None:
    rows = [_run_row("p", 2, 8, label, 0, data_variant=label, steps_trained=3, tokens_seen=48,
                     flops=2.5e6) for label in ("natural", "snip")]  # fmt: skip
    table = matched_compute_table(pd.DataFrame(rows))
    assert list(table.columns) == ["preset", "variant", "batch_size", "context_length", "seed",
                                   "run_name", "data_variant", "steps_trained", "tokens_seen",
                                   "flops"]  # fmt: skip
    assert table["variant"].tolist() == ["natural", "snip"]
    rows[1]["flops"] = 3e6
    with pytest.raises(MatchedComputeError, match="flops differs between variants"):
        matched_compute_table(pd.DataFrame(rows))


def test_top_two_percent_per_layer_is_one_head_per_layer() -> None:
    scores = torch.tensor([[0.1, 0.9, 0.2, 0.0], [0.3, 0.1, 0.0, 0.5]])
    assert top_induction_heads(scores, 0.02) == [(0, 1), (1, 3)]
    wide = torch.rand(2, 60)  # ceil(0.02 * 60) = 2 heads per layer
    assert len(top_induction_heads(wide, 0.02)) == 4


class _EvalSet:
    """A minimal eval set: validation text, repeated/anti probes, one prompt set."""

    def __init__(self, vocab: int, context: int) -> None:
        from ih_kedro.science.evaluation.function_vectors import EncodedPrompts

        gen = torch.Generator().manual_seed(0)
        self.validation = torch.randint(2, vocab, (6, context + 1), generator=gen).numpy()
        half = torch.stack([torch.randperm(vocab - 2, generator=gen)[:8] + 2 for _ in range(4)])
        self.repeated = torch.cat([half, half], 1)  # (4, 16)
        self.anti = torch.cat([half, torch.ones(4, 1, dtype=torch.long), half.flip(1)], 1)
        self.snippet = torch.cat([half, torch.ones(4, 1, dtype=torch.long), half], 1)
        tokens = torch.randint(2, vocab, (5, 12), generator=gen)  # (5, 12)
        mask = torch.zeros(5, 12, dtype=torch.bool)
        mask[:, -1] = True
        self.prompts = {10: EncodedPrompts(["t"] * 5, 10, tokens, mask, np.full(5, 10))}


def test_ablation_controls_are_disjoint_layer_matched_and_recomputable() -> None:
    model = build_model("llama-tiny", 50, 32, seed=0).eval()
    eval_set = _EvalSet(50, 32)
    options = {"n_controls": 3, "control_seed": 4, "ablation_modes": ["zero"], "batch_size": 4}
    result = evaluate_checkpoint(model, eval_set, options)
    heads = result["ablated_heads"]
    assert sorted(layer for layer, _ in heads) == [0, 1]  # one head per layer
    entry = result["ablation"]["zero"]
    assert len(entry["controls"]) == 3 and len(entry["control_heads"]) == 3
    for control in entry["control_heads"]:
        assert sorted(layer for layer, _ in control) == [0, 1]
        assert not set(control) & set(heads)
    assert len({tuple(c) for c in entry["control_heads"]}) > 1  # several distinct draws
    # The stored ablated items are the model's metrics under that very ablation.
    with torch.no_grad(), ablate_heads(model, heads, mode="zero"):
        direct = item_metrics(model, eval_set, shots=[10], batch_size=4)
    np.testing.assert_allclose(entry["target"]["icl"], -direct["icl"], rtol=1e-5)
    drops = ablation_drops(result, "zero", "icl")
    base = result["ablation_base"]["icl"]
    control = np.mean([relative_drop(base, c["icl"]) for c in entry["controls"]])
    assert drops["drop"] == pytest.approx(relative_drop(base, entry["target"]["icl"]))
    assert drops["excess"] == pytest.approx(drops["drop"] - control)
    assert relative_drop(np.array([2.0, 2.0]), np.array([1.0, 0.0])) == 0.75
    assert math.isnan(relative_drop(np.zeros(3), np.ones(3)))


def _final(loss: float, induction: float, target: float, control: float, n: int = 40) -> dict:
    """A hand-made checkpoint result with constant per-item values."""
    ones = np.ones(n)
    ablation_base = {"icl": ones * 1.0, "probe": ones * 0.5}
    entry = {"target": {"icl": ones * target, "probe": ones * 0.5},
             "controls": [{"icl": ones * control, "probe": ones * 0.5}] * 2}  # fmt: skip
    return {
        "items": {"loss": ones * loss, "icl": ones * -1.0, "probe_1shot": ones * 0.25,
                  "probe_10shot": ones * 0.5},
        "induction_best": ones * induction, "anti_induction_best": ones * 0.01,
        "ablation_base": ablation_base, "ablation": {"zero": entry},
    }  # fmt: skip


def _runs(*variants: str) -> pd.DataFrame:
    return pd.DataFrame({"run_name": list(variants), "preset": "p", "variant": list(variants),
                         "seed": 0, "tokens_seen": 100, "flops": 1e6})  # fmt: skip


OPTIONS = {"shots": [1, 10], "ablation_modes": ["zero"], "n_bootstrap": 50}


def test_results_table_values_diffs_and_not_estimable_flags() -> None:
    finals = {
        "natural": _final(math.log(10), induction=0.1, target=0.9, control=0.9),
        "induction": _final(math.log(12), induction=0.8, target=0.5, control=0.9),
    }
    table = results_table(finals, _runs("natural", "induction"), OPTIONS).set_index(
        ["variant", "metric"]
    )
    ppl = table.loc[("induction", "perplexity")]
    assert ppl["value"] == pytest.approx(12) and ppl["diff_vs_natural"] == pytest.approx(2)
    assert ppl["ci_low"] == pytest.approx(12) and ppl["estimable"]
    excess = table.loc[("induction", "ablation_excess_icl_zero")]
    # drop (1 - 0.5)/1 = 0.5, control (1 - 0.9)/1 = 0.1 -> excess 0.4
    assert excess["value"] == pytest.approx(0.4) and excess["estimable"]
    # ... but the natural-only model formed no heads: no difference is reported.
    assert math.isnan(excess["diff_vs_natural"])
    assert "natural model formed no induction heads" in excess["note"]
    natural = table.loc[("natural", "ablation_excess_icl_zero")]
    assert not natural["estimable"] and "not estimable" in natural["note"]
    assert table.loc[("induction", "probe_accuracy_10shot"), "value"] == 0.5
    assert table.loc[("induction", "induction_score"), "value"] == pytest.approx(0.8)


def test_results_table_reports_the_ablation_difference_when_both_formed_heads() -> None:
    finals = {
        "natural": _final(math.log(10), induction=0.7, target=0.8, control=0.9),
        "induction": _final(math.log(10), induction=0.8, target=0.5, control=0.9),
    }
    table = results_table(finals, _runs("natural", "induction"), OPTIONS).set_index(
        ["variant", "metric"]
    )
    # natural: 0.2 - 0.1 = 0.1; induction: 0.4 -> paired difference 0.3
    row = table.loc[("induction", "ablation_excess_icl_zero")]
    assert row["diff_vs_natural"] == pytest.approx(0.3) and row["note"] == ""


def _offset_head_model(offset: int) -> torch.nn.Module:
    """The hand-set telemetry model with head 1.0 turned into a *positional* copy head: the
    query at position p attends to the key at p - offset, whatever the tokens."""
    from tests.science.telemetry.conftest import POSITIONS, VOCAB, _dims, build_handset_model

    model = build_handset_model()
    pos = _dims()["pos"]
    attn = model.blocks[1].attn
    with torch.no_grad():
        attn.q_proj.weight[:VOCAB].zero_()  # the induction head's token-matching rows
        attn.k_proj.weight[:VOCAB].zero_()
        for p in range(offset, POSITIONS):
            attn.q_proj.weight[p, pos + p] = 5.0
            attn.k_proj.weight[p, pos + p - offset] = 5.0
    return model.eval()


def test_a_fixed_offset_copy_head_scores_on_snippets_of_its_span_only() -> None:
    """What the default run found (docs/bi_induct.md): a model trained on 20-token snippets
    copied by attending 20 tokens back. Such a head is a perfect induction head on
    ``S ‖ SEP ‖ S`` probes of that span and invisible on repeated probes and other spans, so the
    snippet probes must use the training span (``snippet_length``)."""
    from ih_kedro.science.evaluation.bi_induct import head_scores, make_eval_set

    model = _offset_head_model(6)
    pool = np.arange(1, 40)  # VOCAB 40; token 0 is the separator
    validation = np.zeros((2, 25), dtype=np.int64)
    options = {"shots": [], "n_probes": 16, "probe_length": 12, "seed": 0}
    at_span = make_eval_set(None, validation, pool, 24, 0, {**options, "snippet_length": 6})
    assert at_span.snippet.shape == (16, 13) and at_span.anti.shape == (16, 13)
    np.testing.assert_array_equal(at_span.snippet[:, :6], at_span.repeated[:, :6])
    np.testing.assert_array_equal(at_span.snippet[:, 7:], at_span.repeated[:, :6])
    np.testing.assert_array_equal(at_span.anti[:, 7:], at_span.repeated[:, :6].flip(1))
    assert (at_span.snippet[:, 6] == 0).all()
    scores = {k: v.mean(0) for k, v in head_scores(model, at_span, batch_size=8).items()}
    assert scores["snippet_induction"][1, 0] == pytest.approx(1.0, abs=1e-3)
    assert scores["induction"][1, 0] < 0.05  # repeated probes of L = 12: offset 11, not 6
    other_span = make_eval_set(None, validation, pool, 24, 0, {**options, "snippet_length": 10})
    assert head_scores(model, other_span, batch_size=8)["snippet_induction"].mean(0)[1, 0] < 0.05
    # The default snippet span is the probe length, and a span longer than it is refused.
    assert make_eval_set(None, validation, pool, 24, 0, options).snippet.shape == (16, 25)
    with pytest.raises(ValueError, match=r"snippet_length: must be in \[1, 12\]"):
        make_eval_set(None, validation, pool, 24, 0, {**options, "snippet_length": 13})
