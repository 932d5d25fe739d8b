import torch

from ih_kedro.science.telemetry.ablation import (
    ablate_heads,
    ablation_effect,
    all_heads,
    random_head_control,
)
from ih_kedro.science.telemetry.scores import associative_recall

CHANCE = 0.2  # generous bound on chance-level recall over a 40-token vocabulary


def _ar(model, probes):
    return associative_recall(model, probes, batch_size=8)["accuracy"]


def test_ablating_the_induction_head_drops_recall_to_chance(handset_model, handset_probes):
    probes = handset_probes.tokens
    assert _ar(handset_model, probes) == 1.0
    for mode in ("zero", "mean", "pattern_preserving"):
        source = None if mode == "zero" else probes  # zero ablation takes no means
        with ablate_heads(handset_model, [(1, 0)], mode=mode, mean_source=source):
            assert _ar(handset_model, probes) < CHANCE, mode
    assert _ar(handset_model, probes) == 1.0  # restored


def test_pattern_preserving_removes_only_the_direct_path(handset_model, handset_probes):
    probes = handset_probes.tokens
    with ablate_heads(handset_model, [(0, 0)], mode="zero"):
        assert _ar(handset_model, probes) < CHANCE  # the induction head loses its keys
    with ablate_heads(handset_model, [(0, 0)], mode="pattern_preserving"):
        assert _ar(handset_model, probes) == 1.0  # frozen patterns: no direct effect


def test_random_head_control():
    heads = [(layer, h) for layer in range(3) for h in range(4)]
    control = random_head_control(heads, 2, exclude=[(1, 0)], seed=0)
    assert len(control) == 2 and (1, 0) not in control
    assert control == random_head_control(heads, 2, exclude=[(1, 0)], seed=0)
    matched = random_head_control(heads, 2, exclude=[(1, 0), (2, 1)], match_layers=[(1, 0), (2, 1)])
    assert sorted(layer for layer, _ in matched) == [1, 2]


def test_ablation_effect_vs_control(handset_model, handset_probes):
    probes = handset_probes.tokens
    effect = ablation_effect(
        handset_model, [(1, 0)], lambda m: _ar(m, probes), mode="zero", n_controls=2
    )
    assert effect["relative_drop"] > 0.8
    assert abs(effect["control_relative_drop"]) < 1e-6  # the only control head writes nothing
    assert effect["excess_drop"] > 0.8
    assert len(all_heads(handset_model)) == 4
    assert torch.is_tensor(probes)
