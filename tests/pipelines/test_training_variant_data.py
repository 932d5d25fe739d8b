"""``train_sweep``'s optional ``variant_data`` input: options produced upstream reach every run."""

from __future__ import annotations

import pytest

from ih_kedro.pipelines.training import create_pipeline
from ih_kedro.pipelines.training.nodes import expand_grid, with_variant_data

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


def test_training_pipeline_reads_variant_data_only_when_asked():
    plain = create_pipeline().nodes[0]
    extended = create_pipeline(variant_data=True).nodes[0]
    assert plain.inputs == ["train_tokens", "checkpoint_store", "params:training"]
    assert extended.inputs == plain.inputs + ["variant_data"]
