"""The sweep design: run names, grid cells, excluded cells, online metric, probe length,
and options produced upstream (``variant_data``) merged into every run."""

from __future__ import annotations

import pytest

from ih_kedro.science.training.grid import (
    expand_grid,
    run_name,
    sweep_probe_length,
    with_variant_data,
)


def tiny_params(**overrides) -> dict:
    params = {
        "presets": ["attn-only-2l-d64"],
        "batch_sizes": [4, 8],
        "context_lengths": [16],
        "data_variants": ["copy_spans"],
        "seeds": [0],
        "copy_rate": 1.0,
        "learning_rate": 3e-3,
        "warmup_steps": 2,
        "max_steps": 6,
        "checkpoint_every": 3,
        "checkpoint_dense_until": 0,
        "log_every": 2,
        "online_emergence": {"enabled": False},
        "deepspeed": {"zero_optimization": {"stage": 0}},
        "executor": {"kind": "sequential"},
    }
    params.update(overrides)
    return params


def test_run_names_are_deterministic():
    assert run_name("attn-only-2l-d128", 64, 32, "copy_spans", 0) == (
        "attn-only-2l-d128_B64_C32_copy_spans_s0"
    )
    assert run_name("p", 8, 16, "copy_spans", 1, copy_rate=0.5) == "p_B8_C16_copy_spans_r0.5_s1"
    configs = expand_grid(tiny_params(seeds=[0, 1], data_variants=["natural", "copy_spans"]))
    assert len(configs) == 2 * 2 * 2
    natural = [c for c in configs if c.data_variant == "natural"]
    assert all(c.variant_options == {} and c.copy_rate == 0.0 for c in natural)


def test_exclude_cells_makes_a_fractional_design():
    params = tiny_params(batch_sizes=[4, 8, 16], context_lengths=[16, 32], seeds=[0, 1])
    exclude = [{"batch_size": 4, "context_length": 32}, {"batch_size": 16, "seed": 1}]
    cells = {(c.batch_size, c.context_length, c.seed) for c in expand_grid(
        {**params, "exclude_cells": exclude})}  # fmt: skip
    full = {(b, c, s) for b in (4, 8, 16) for c in (16, 32) for s in (0, 1)}
    dropped = {(4, 32, 0), (4, 32, 1), (16, 16, 1), (16, 32, 1)}
    assert cells == full - dropped
    for bad, message in [
        ({"batch_size": 5}, "matches no run"),
        ({"batch": 4}, "must name grid axes"),
        ({}, "must name grid axes"),
    ]:
        with pytest.raises(ValueError, match=f"training.exclude_cells: .*{message}"):
            expand_grid({**params, "exclude_cells": [bad]})
    with pytest.raises(ValueError, match="every run of the grid is excluded"):
        expand_grid({**params, "exclude_cells": [{"preset": "attn-only-2l-d64"}]})


def test_sweep_probe_length_is_fixed_by_the_smallest_context():
    params = {"context_lengths": [16, 32, 64], "online_emergence": {}}
    assert sweep_probe_length(params) == 8
    assert sweep_probe_length({**params, "context_lengths": [200, 400]}) == 50
    assert sweep_probe_length({**params, "online_emergence": {"probe_length": 6}}) == 6
    with pytest.raises(ValueError, match="online_emergence.probe_length"):
        sweep_probe_length({**params, "online_emergence": {"probe_length": 9}})


def test_variant_entries_with_options_become_labelled_cells():
    params = {
        "presets": ["p"],
        "batch_sizes": [8],
        "context_lengths": [16],
        "seeds": [0],
        "max_steps": 10,
        "data_variants": [
            "natural",
            {"variant": "copy_spans", "label": "cs_half", "options": {"copy_rate": 0.5}},
        ],
        "variant_options": {"copy_spans": {"span_max_fraction": 0.25}},
    }
    natural, half = expand_grid(params)
    assert natural.run_name == "p_B8_C16_natural_s0" and natural.variant_options == {}
    assert half.run_name == "p_B8_C16_cs_half_s0"
    assert half.data_variant == "copy_spans"
    assert half.variant_options == {
        "copy_rate": 0.5,
        "span_min_fraction": 0.125,
        "span_max_fraction": 0.25,
    }
    with pytest.raises(ValueError, match="training.data_variants"):
        expand_grid({**params, "data_variants": [{"label": "x"}]})


@pytest.mark.parametrize(
    ("metric", "key"),
    [
        (None, "prefix_matching_best_layer1"),
        ("prefix_matching", "prefix_matching_best_layer1"),
        ("prefix_matching_by_parity", "prefix_matching_by_parity_best_layer1"),
    ],
)
def test_the_online_metric_picks_what_the_early_stop_watches(metric, key):
    online = {"enabled": True, **({"metric": metric} if metric else {})}
    configs = expand_grid(tiny_params(online_emergence=online))
    assert [c.early_stop_metric for c in configs] == [key, key]


def test_an_unknown_online_metric_fails_before_any_run():
    with pytest.raises(ValueError, match=r"training\.online_emergence\.metric: 'induction'"):
        expand_grid(tiny_params(online_emergence={"metric": "induction"}))


PARAMS = {
    "presets": ["attn-only-2l-d128"],
    "batch_sizes": [4],
    "context_lengths": [16],
    "seeds": [0, 1],
    "max_steps": 4,
    "data_variants": [
        {"variant": "semi_natural", "label": "a", "options": {"frequency": 0.5, "reliability": 1}},
        {
            "variant": "semi_natural",
            "label": "b",
            "options": {"frequency": 0.25, "reliability": 1, "model_path": "/own.npz"},
        },
    ],  # fmt: skip
}


def test_variant_data_is_merged_under_each_cells_options():
    configs = with_variant_data(
        expand_grid(PARAMS), {"model_path": "/m.npz", "model_checksum": "c"}
    )
    assert [c.run_name for c in configs] == [
        "attn-only-2l-d128_B4_C16_a_s0",
        "attn-only-2l-d128_B4_C16_a_s1",
        "attn-only-2l-d128_B4_C16_b_s0",
        "attn-only-2l-d128_B4_C16_b_s1",
    ]
    assert configs[0].variant_options == {
        "model_path": "/m.npz", "model_checksum": "c", "frequency": 0.5, "reliability": 1,
    }  # fmt: skip
    # A cell's own option wins over the upstream default.
    assert configs[2].variant_options["model_path"] == "/own.npz"
    assert with_variant_data(expand_grid(PARAMS), None)[0].variant_options == {
        "frequency": 0.5, "reliability": 1,
    }  # fmt: skip
    with pytest.raises(ValueError, match="variant_data: expected a mapping"):
        with_variant_data(expand_grid(PARAMS), ["/m.npz"])
