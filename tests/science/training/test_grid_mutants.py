"""The sweep design's pure helpers checked through exact values (mutation-testing kills).

Grid expansion, run names, variant cells, excluded cells, the sweep's probe length and the
``variant_data`` merge; nothing here trains or starts Ray. Expected configs are written out by
hand from the documented rules.
"""

from __future__ import annotations

import re

import pytest

from ih_kedro.science.training.config import TrainingRunConfig
from ih_kedro.science.training.grid import (
    _as_list,
    _variant_cells,
    _without_excluded_cells,
    expand_grid,
    online_metric_key,
    run_name,
    sweep_probe_length,
    with_variant_data,
)


def grid(**overrides) -> dict:
    params = {
        "presets": ["p"],
        "batch_sizes": [8],
        "context_lengths": [16],
        "data_variants": ["natural"],
        "seeds": [0],
        "max_steps": 10,
    }
    params.update(overrides)
    return params


# ------------------------------------------------------------------ online_metric_key


def test_online_metric_key_values_and_message():
    assert online_metric_key({}) == "prefix_matching_best_layer1"
    assert online_metric_key({"metric": None}) == "prefix_matching_best_layer1"
    assert online_metric_key({"metric": "prefix_matching"}) == "prefix_matching_best_layer1"
    assert (
        online_metric_key({"metric": "prefix_matching_by_parity"})
        == "prefix_matching_by_parity_best_layer1"
    )
    expected = (
        "training.online_emergence.metric: 'x' is not one of "
        "['prefix_matching', 'prefix_matching_by_parity']"
    )
    with pytest.raises(ValueError, match=f"^{re.escape(expected)}$"):
        online_metric_key({"metric": "x"})


# ------------------------------------------------------------------ run_name


def test_run_name_formats_and_copy_rate():
    assert run_name("p", 8, 16, "natural", 3) == "p_B8_C16_natural_s3"
    assert run_name("p", 8, 16, "copy_spans", 3) == "p_B8_C16_copy_spans_s3"
    assert run_name("p", 8, 16, "copy_spans", 3, copy_rate=1.0) == "p_B8_C16_copy_spans_s3"
    assert run_name("p", 8, 16, "copy_spans", 3, copy_rate=0.5) == "p_B8_C16_copy_spans_r0.5_s3"
    assert run_name("p", 8, 16, "copy_spans", 3, copy_rate=0.25) == "p_B8_C16_copy_spans_r0.25_s3"
    # Only copy_spans carries the rate.
    assert run_name("p", 8, 16, "natural", 3, copy_rate=0.5) == "p_B8_C16_natural_s3"


# ------------------------------------------------------------------ _as_list


def test_as_list_values_and_messages():
    assert _as_list({"k": [1, 2]}, "k") == [1, 2]
    assert _as_list({"k": (3, 4)}, "k") == [3, 4]
    assert _as_list({"k": 5}, "k") == [5]
    assert _as_list({"k": "ab"}, "k") == ["ab"]
    assert _as_list({"k": 0}, "k") == [0]
    with pytest.raises(ValueError, match=r"^training\.k: missing from parameters$"):
        _as_list({}, "k")
    with pytest.raises(ValueError, match=r"^training\.k: missing from parameters$"):
        _as_list({"k": None}, "k")
    with pytest.raises(ValueError, match=r"^training\.k: the grid axis is empty$"):
        _as_list({"k": []}, "k")
    with pytest.raises(ValueError, match=r"^training\.k: the grid axis is empty$"):
        _as_list({"k": ()}, "k")


# ------------------------------------------------------------------ _variant_cells


def test_variant_cells_copy_spans_defaults_and_top_level_options():
    assert _variant_cells(grid(data_variants=["copy_spans"])) == [
        (
            "copy_spans",
            "copy_spans",
            {"copy_rate": 1.0, "span_min_fraction": 0.125, "span_max_fraction": 0.375},
        )
    ]
    cells = _variant_cells(
        grid(
            data_variants=["copy_spans", "natural"],
            copy_rate="0.5",
            span_min_fraction="0.1",
            span_max_fraction="0.2",
            variant_options={"natural": {"x": 1}},
        )
    )
    assert cells == [
        (
            "copy_spans",
            "copy_spans_r0.5",
            {"copy_rate": 0.5, "span_min_fraction": 0.1, "span_max_fraction": 0.2},
        ),
        ("natural", "natural", {"x": 1}),
    ]
    assert all(type(v) is float for v in cells[0][2].values())


def test_variant_cells_per_variant_options_override_top_level_copy_rate():
    cells = _variant_cells(
        grid(
            data_variants=["copy_spans"],
            copy_rate=0.5,
            variant_options={"copy_spans": {"copy_rate": 0.25, "span_max_fraction": 0.5}},
        )
    )
    assert cells == [
        (
            "copy_spans",
            "copy_spans_r0.25",
            {"copy_rate": 0.25, "span_min_fraction": 0.125, "span_max_fraction": 0.5},
        )
    ]
    # A copy rate of exactly 1 keeps the plain label.
    cells = _variant_cells(
        grid(data_variants=["copy_spans"], variant_options={"copy_spans": {"copy_rate": 1}})
    )
    assert cells[0][1] == "copy_spans"


def test_variant_cells_mapping_entries():
    cells = _variant_cells(
        grid(
            data_variants=[
                {"variant": "markov", "options": {"order": 2}},
                {"variant": "markov", "label": "m3", "options": {"order": 3, "q": 1}},
                {"variant": "copy_spans", "label": "half", "options": {"copy_rate": 0.5}},
                {"variant": "copy_spans", "options": {"copy_rate": 0.5}},
                {"variant": "natural", "label": None, "options": None},
            ],
            variant_options={"markov": {"order": 1, "q": 0}},
        )
    )
    assert cells == [
        ("markov", "markov", {"order": 2, "q": 0}),
        ("markov", "m3", {"order": 3, "q": 1}),
        (
            "copy_spans",
            "half",
            {"copy_rate": 0.5, "span_min_fraction": 0.125, "span_max_fraction": 0.375},
        ),
        # A mapping entry keeps its label (here the variant name), the rate is not appended.
        (
            "copy_spans",
            "copy_spans",
            {"copy_rate": 0.5, "span_min_fraction": 0.125, "span_max_fraction": 0.375},
        ),
        ("natural", "natural", {}),
    ]
    with pytest.raises(
        ValueError, match=r"^training\.data_variants: \{'label': 'x'\} has no 'variant' key$"
    ):
        _variant_cells(grid(data_variants=[{"label": "x"}]))


def test_variant_cells_do_not_share_option_dicts():
    shared = {"natural": {"x": 1}}
    cells = _variant_cells(grid(data_variants=["natural", "natural"], variant_options=shared))
    cells[0][2]["x"] = 2
    assert cells[1][2] == {"x": 1} and shared == {"natural": {"x": 1}}


# ------------------------------------------------------------------ expand_grid


def test_expand_grid_defaults_are_the_config_defaults():
    (config,) = expand_grid(grid())
    assert config == TrainingRunConfig(
        run_name="p_B8_C16_natural_s0",
        preset="p",
        batch_size=8,
        context_length=16,
        seed=0,
        data_variant="natural",
        variant_options={},
        max_steps=10,
        early_stop=True,
        early_stop_metric="prefix_matching_best_layer1",
        deepspeed={},
    )


def test_expand_grid_casts_every_shared_field():
    (config,) = expand_grid(
        grid(
            n_positions=64,
            attn_implementation="eager",
            learning_rate="0.001",
            warmup_steps="7",
            schedule="cosine",
            min_lr_ratio="0.2",
            decay_steps=99,
            weight_decay="0.05",
            betas=[0.8, 0.95],
            eps="1e-6",
            max_steps=11,
            max_tokens=5000,
            checkpoint_every="4",
            checkpoint_dense_until="8",
            checkpoint_unit="tokens",
            log_every="3",
            deepspeed={"zero_optimization": {"stage": 1}},
            online_emergence={
                "eval_every": "5",
                "threshold": "0.3",
                "margin_factor": "2",
                "min_extra_steps": "20",
                "metric": "prefix_matching_by_parity",
            },
        )
    )
    expected = {
        "n_positions": 64,
        "attn_implementation": "eager",
        "learning_rate": 0.001,
        "warmup_steps": 7,
        "schedule": "cosine",
        "min_lr_ratio": 0.2,
        "decay_steps": 99,
        "weight_decay": 0.05,
        "betas": (0.8, 0.95),
        "eps": 1e-6,
        "max_steps": 11,
        "max_tokens": 5000,
        "checkpoint_every": 4,
        "checkpoint_dense_until": 8,
        "checkpoint_unit": "tokens",
        "log_every": 3,
        "eval_every": 5,
        "early_stop_threshold": 0.3,
        "early_stop_margin_factor": 2.0,
        "early_stop_min_extra_steps": 20,
        "early_stop": True,
        "early_stop_metric": "prefix_matching_by_parity_best_layer1",
        "deepspeed": {"zero_optimization": {"stage": 1}},
    }
    got = {name: getattr(config, name) for name in expected}
    assert got == expected
    assert {name: type(value) for name, value in got.items()} == {
        name: type(value) for name, value in expected.items()
    }


@pytest.mark.parametrize(
    ("online", "early_stop"),
    [
        (None, True),
        ({}, True),
        ({"enabled": True, "early_stop": True}, True),
        ({"enabled": False}, False),
        ({"early_stop": False}, False),
        ({"enabled": True, "early_stop": False}, False),
        ({"enabled": False, "early_stop": True}, False),
    ],
)
def test_expand_grid_early_stop_needs_both_switches(online, early_stop):
    (config,) = expand_grid(grid(online_emergence=online))
    assert config.early_stop is early_stop


def test_expand_grid_product_order_names_and_options():
    configs = expand_grid(
        grid(
            presets=["a", "b"],
            batch_sizes=[4, 8],
            context_lengths=(16,),
            data_variants=["natural", {"variant": "copy_spans", "label": "cs"}],
            seeds=[0, 1],
        )
    )
    assert [c.run_name for c in configs] == [
        f"{p}_B{b}_C16_{v}_s{s}"
        for p in "ab"
        for b in (4, 8)
        for v in ("natural", "cs")
        for s in (0, 1)
    ]
    assert [(c.preset, c.batch_size, c.context_length, c.data_variant, c.seed) for c in configs][
        :4
    ] == [
        ("a", 4, 16, "natural", 0),
        ("a", 4, 16, "natural", 1),
        ("a", 4, 16, "copy_spans", 0),
        ("a", 4, 16, "copy_spans", 1),
    ]
    assert configs[2].variant_options == {
        "copy_rate": 1.0,
        "span_min_fraction": 0.125,
        "span_max_fraction": 0.375,
    }
    # Every run gets its own options dict.
    configs[2].variant_options["copy_rate"] = 0.0
    assert configs[3].variant_options["copy_rate"] == 1.0


def test_expand_grid_rejects_duplicates_and_missing_axes():
    with pytest.raises(
        ValueError, match=r"^training: the grid has duplicate cells \(repeated axis values\)$"
    ):
        expand_grid(grid(seeds=[0, 0]))
    for axis in ("presets", "batch_sizes", "context_lengths", "data_variants", "seeds"):
        params = grid()
        del params[axis]
        with pytest.raises(ValueError, match=rf"^training\.{axis}: missing from parameters$"):
            expand_grid(params)


def test_expand_grid_applies_exclude_cells():
    params = grid(batch_sizes=[4, 8], seeds=[0, 1])
    kept = expand_grid({**params, "exclude_cells": [{"batch_size": 8, "seed": 1}]})
    assert [c.run_name for c in kept] == ["p_B4_C16_natural_s0", "p_B4_C16_natural_s1",
                                          "p_B8_C16_natural_s0"]  # fmt: skip
    assert len(expand_grid({**params, "exclude_cells": None})) == 4


# ------------------------------------------------------------------ _without_excluded_cells


def configs_of(*cells: tuple[int, int]) -> list[TrainingRunConfig]:
    return [
        TrainingRunConfig(
            run_name=f"B{b}_s{s}", preset="p", batch_size=b, context_length=16, seed=s
        )  # fmt: skip
        for b, s in cells
    ]


def test_without_excluded_cells_keeps_order_and_applies_every_entry():
    configs = configs_of((4, 0), (4, 1), (8, 0), (8, 1))
    kept = _without_excluded_cells(configs, [{"batch_size": 4, "seed": 1}, {"seed": 0}])
    assert [c.run_name for c in kept] == ["B8_s1"]
    assert [c.run_name for c in _without_excluded_cells(configs, [])] == [
        "B4_s0",
        "B4_s1",
        "B8_s0",
        "B8_s1",
    ]
    assert len(configs) == 4  # the input list is not changed


def test_without_excluded_cells_messages():
    configs = configs_of((4, 0), (8, 0))
    axes = "['batch_size', 'context_length', 'data_variant', 'preset', 'seed']"
    unknown = f"training.exclude_cells: {{'batch': 4}} must name grid axes among {axes}"
    with pytest.raises(ValueError, match=f"^{re.escape(unknown)}$"):
        _without_excluded_cells(configs, [{"batch": 4}])
    mixed = f"training.exclude_cells: {{'seed': 0, 'lr': 1}} must name grid axes among {axes}"
    with pytest.raises(ValueError, match=f"^{re.escape(mixed)}$"):
        _without_excluded_cells(configs, [{"seed": 0, "lr": 1}])
    empty = f"training.exclude_cells: {{}} must name grid axes among {axes}"
    with pytest.raises(ValueError, match=f"^{re.escape(empty)}$"):
        _without_excluded_cells(configs, [{}])
    none = "training.exclude_cells: {'batch_size': 16} matches no run of the grid"
    with pytest.raises(ValueError, match=f"^{re.escape(none)}$"):
        _without_excluded_cells(configs, [{"batch_size": 16}])
    # An entry that matched runs already removed by an earlier entry matches nothing.
    again = "training.exclude_cells: {'batch_size': 4} matches no run of the grid"
    with pytest.raises(ValueError, match=f"^{re.escape(again)}$"):
        _without_excluded_cells(configs, [{"batch_size": 4}, {"batch_size": 4}])
    with pytest.raises(
        ValueError, match=r"^training\.exclude_cells: every run of the grid is excluded$"
    ):
        _without_excluded_cells(configs, [{"seed": 0}])


# ------------------------------------------------------------------ sweep_probe_length


def test_sweep_probe_length_default_is_half_the_smallest_context_capped_at_50():
    assert sweep_probe_length({"context_lengths": [17, 64]}) == 8
    assert type(sweep_probe_length({"context_lengths": [17]})) is int
    assert sweep_probe_length({"context_lengths": ["98"]}) == 49
    assert sweep_probe_length({"context_lengths": [100]}) == 50
    assert sweep_probe_length({"context_lengths": [102]}) == 50
    assert sweep_probe_length({"context_lengths": 40, "online_emergence": None}) == 20
    assert sweep_probe_length({"context_lengths": [2]}) == 1
    assert sweep_probe_length({"context_lengths": [40], "online_emergence": {}}) == 20
    # 0 / None mean "not set".
    assert (
        sweep_probe_length({"context_lengths": [40], "online_emergence": {"probe_length": 0}}) == 20
    )


def test_sweep_probe_length_explicit_bounds_and_message():
    def probe(length, contexts=(16, 32)):
        return sweep_probe_length(
            {"context_lengths": list(contexts), "online_emergence": {"probe_length": length}}
        )

    assert probe(8) == 8  # 2 * L == the smallest context is allowed
    assert probe("1") == 1
    message = (
        "training.online_emergence.probe_length: 9 needs 1 <= 2 * L <= the smallest "
        "context length 16"
    )
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        probe(9)
    with pytest.raises(ValueError, match=r"probe_length: -1 needs 1 <= 2 \* L"):
        probe(-1)
    with pytest.raises(ValueError, match=r"probe_length: 0 needs .* context length 1$"):
        sweep_probe_length({"context_lengths": [1]})
    with pytest.raises(ValueError, match=r"^training\.context_lengths: missing from parameters$"):
        sweep_probe_length({})


# ------------------------------------------------------------------ with_variant_data


def test_with_variant_data_merges_under_cell_options():
    configs = configs_of((4, 0), (8, 0))
    configs[0].variant_options = {"path": "own", "a": 1}
    out = with_variant_data(configs, {"path": "upstream", "checksum": "c"})
    assert out is configs
    assert [c.variant_options for c in out] == [
        {"path": "own", "checksum": "c", "a": 1},
        {"path": "upstream", "checksum": "c"},
    ]
    untouched = configs_of((4, 0))
    assert with_variant_data(untouched, None) is untouched
    assert with_variant_data(untouched, {}) is untouched
    assert untouched[0].variant_options == {}


def test_with_variant_data_rejects_a_non_mapping():
    message = "variant_data: expected a mapping of variant options, got list"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        with_variant_data(configs_of((4, 0)), ["path"])
