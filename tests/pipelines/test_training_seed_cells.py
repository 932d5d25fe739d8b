"""``training.seed_cells``: later seeds train only in the cells an adaptive look names, and
markov's run list (``run_cells``) reads the same grid."""

from __future__ import annotations

import pytest

from ih_kedro.pipelines.markov.nodes import run_cells
from ih_kedro.pipelines.training.nodes import grid_configs

BI_INDUCT = {
    "presets": ["attn-only-2l-d128"], "batch_sizes": [4], "context_lengths": [32],
    "seeds": [0, 1, 2, 3], "max_steps": 4,
    "data_variants": [
        {"variant": "fixed_rate_copies", "label": "minimally_enriched"},
        {"variant": "bi_induct_snippets", "label": "induction", "options": {"direction": "induction"}},
        {"variant": "bi_induct_snippets", "label": "anti_induction",
         "options": {"direction": "anti_induction"}},
    ],
}  # fmt: skip


def _names(configs):
    return sorted(c.run_name.removeprefix("attn-only-2l-d128_B4_C32_") for c in configs)


def test_later_seeds_train_only_in_the_named_arms():
    assert len(grid_configs(BI_INDUCT)) == 12  # no seed_cells: every seed, every arm
    params = {**BI_INDUCT, "seed_cells": [
        {"seeds": [2, 3], "labels": ["minimally_enriched", "induction"]}]}  # fmt: skip
    names = _names(grid_configs(params))
    assert "anti_induction_s2" not in names and "anti_induction_s3" not in names
    # "induction" is a suffix of "anti_induction": the match is on the whole run name.
    assert {"induction_s2", "induction_s3", "minimally_enriched_s3", "anti_induction_s1"} <= set(
        names
    )
    assert len(names) == 10


def test_entries_add_up_and_unknown_labels_are_named():
    params = {**BI_INDUCT, "seed_cells": [
        {"seeds": [2], "labels": ["minimally_enriched", "induction", "anti_induction"]},
        {"seeds": [3], "labels": ["minimally_enriched"]}]}  # fmt: skip
    names = _names(grid_configs(params))
    assert [n for n in names if n.endswith("_s3")] == ["minimally_enriched_s3"]
    with pytest.raises(ValueError, match="induction_typo"):
        grid_configs({**BI_INDUCT, "seed_cells": [{"seeds": [3], "labels": ["induction_typo"]}]})


def test_markov_run_cells_follow_the_seed_cells():
    cells = [{"variant": "markov", "label": f"{p}.{lv}", "options": {"process": p, "level": lv}}
             for p in ("noLD_zipf", "LD_CAT_zipf") for lv in ("high", "near_frontier")]  # fmt: skip
    training = {**BI_INDUCT, "data_variants": cells, "seeds": [0, 1, 2],
                "seed_cells": [{"seeds": [2], "labels": ["LD_CAT_zipf.high"]}]}  # fmt: skip
    table = run_cells(training)
    assert len(table) == 4 * 2 + 1
    assert table.loc[table["seed"] == 2, ["process", "level"]].values.tolist() == [
        ["LD_CAT_zipf", "high"]]  # fmt: skip
