"""Bi-Induct per-run tables: hand-made results with hand-computed rows, and the span probes."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from ih_kedro.science.evaluation.bi_induct_runs import (
    RUN_COLUMNS,
    load_bearing_curves,
    run_table,
    span_probe_scores,
    span_probe_table,
)


def _final(loss: float, induction: float, copy: float, chance: float, target: float,
           controls: tuple[float, ...], n: int = 8) -> dict:  # fmt: skip
    """A checkpoint result with constant per-item values (copy metric, zero ablation)."""
    ones = np.ones(n)
    return {
        "step": 300,
        "items": {"loss": ones * loss, "icl": ones * 0.5, "copy": ones * copy,
                  "copy_first": ones * chance},
        "induction_best": ones * induction, "anti_induction_best": ones * 0.02,
        "snippet_induction_best": ones * 0.7,
        "ablation_base": {"copy": ones * copy},
        "ablation": {"zero": {"target": {"copy": ones * target},
                              "controls": [{"copy": ones * c} for c in controls]}},
        "span_scores": {4: 0.5, 8: 0.6},
        "repeated_length": 16,
    }  # fmt: skip


def _checkpoints(run: str, variant: str, excess: list[float]) -> pd.DataFrame:
    steps = [0, 100, 200, 300]
    rows = []
    for step, value in zip(steps, excess, strict=True):
        for kind, v in (("excess", value), ("drop", value + 0.1), ("control", 0.1)):
            rows.append({"run_name": run, "preset": "p", "variant": variant, "seed": 0,
                         "step": step, "tokens_seen": step * 10.0,
                         "metric": f"ablation_{kind}_copy_zero", "value": v})  # fmt: skip
    return pd.DataFrame(rows)


def test_run_table_rows_hold_the_hand_computed_numbers() -> None:
    finals = {
        "base_s0": _final(
            math.log(20.0), 0.8, copy=0.6, chance=0.1, target=0.15, controls=(0.6, 0.54)
        ),  # fmt: skip
        "arm_s0": _final(math.log(25.0), 0.3, copy=0.5, chance=0.1, target=0.5, controls=(0.5,)),
    }
    runs = pd.DataFrame({"run_name": ["base_s0", "arm_s0"], "preset": "p",
                         "variant": ["base", "arm"], "seed": 0})  # fmt: skip
    checkpoints = pd.concat([_checkpoints("base_s0", "base", [0.0, 0.2, 0.8, 0.7]),
                             _checkpoints("arm_s0", "arm", [0.0, 0.1, 0.2, 0.3])])  # fmt: skip
    emergence = pd.DataFrame({
        "run_name": ["base_s0", "arm_s0", "base_s0"], "metric": "prefix_matching",
        "method": ["threshold", "threshold", "logistic"], "step": [150.0, np.nan, 90.0],
        "censored": [False, True, False], "threshold": 0.4, "last_step": [300, 300, 300],
    })  # fmt: skip
    table = run_table(finals, runs, checkpoints, emergence, {"load_bearing_threshold": 0.5})
    assert list(table.columns[: len(RUN_COLUMNS)]) == RUN_COLUMNS
    base = table.set_index("run_name").loc["base_s0"]
    arm = table.set_index("run_name").loc["arm_s0"]
    assert base["emergence_step"] == 150.0 and not base["emergence_censored"]
    assert arm["emergence_step"] == 300.0 and arm["emergence_censored"]  # censored: last step
    assert base["perplexity"] == pytest.approx(20.0) and base["loss"] == pytest.approx(math.log(20))
    assert base["copy_gain"] == pytest.approx(0.5)
    # Drops: top (0.6 - 0.15) / 0.6 = 0.75; controls 0 and 0.1 -> mean 0.05; excess 0.70.
    assert base["ablation_drop_copy_zero"] == pytest.approx(0.75)
    assert base["ablation_control_copy_zero"] == pytest.approx(0.05)
    assert base["ablation_excess_copy_zero"] == pytest.approx(0.70)
    # Constant items: every bootstrap draw gives the same excess, so the CI collapses on it.
    assert base["ablation_excess_copy_zero_ci_low"] == pytest.approx(0.70)
    assert base["ablation_excess_copy_zero_ci_high"] == pytest.approx(0.70)
    # Excess 0.2 at step 100, 0.8 at 200: 0.5 is crossed half way, at step 150.
    assert base["load_bearing_step"] == pytest.approx(150.0)
    assert math.isnan(arm["load_bearing_step"])  # never reaches 0.5
    assert bool(base["heads_formed"]) and not bool(arm["heads_formed"])  # 0.8 / 0.3 vs 0.4
    assert arm["snippet_induction_score"] == pytest.approx(0.7)


def test_several_thresholds_need_one_named() -> None:
    emergence = pd.DataFrame({"run_name": ["r", "r"], "metric": "prefix_matching",
                              "method": "threshold", "step": [100.0, 200.0], "censored": False,
                              "threshold": [0.3, 0.5], "last_step": 300})  # fmt: skip
    finals = {"r": _final(1.0, 0.5, 0.5, 0.1, 0.1, (0.5,))}
    runs = pd.DataFrame({"run_name": ["r"], "preset": "p", "variant": "v", "seed": 0})
    checkpoints = _checkpoints("r", "v", [0, 0, 0, 0])
    with pytest.raises(ValueError, match="emergence_threshold"):
        run_table(finals, runs, checkpoints, emergence, {})
    table = run_table(finals, runs, checkpoints, emergence, {"emergence_threshold": 0.5})
    assert table["emergence_step"].iloc[0] == 200.0


def test_load_bearing_curves_are_one_row_per_checkpoint() -> None:
    curves = load_bearing_curves(_checkpoints("r", "v", [0.0, 0.1, 0.2, 0.3]))
    assert curves["step"].tolist() == [0, 100, 200, 300]
    assert curves["excess"].tolist() == pytest.approx([0.0, 0.1, 0.2, 0.3])
    assert curves["drop"].tolist() == pytest.approx([0.1, 0.2, 0.3, 0.4])


def test_span_probe_table_lists_each_span_and_the_repeated_probe() -> None:
    finals = {"r": _final(1.0, 0.45, 0.5, 0.1, 0.1, (0.5,))}
    runs = pd.DataFrame({"run_name": ["r"], "variant": ["v"], "seed": [2]})
    table = span_probe_table(finals, runs)
    assert table[["probe", "span", "score"]].values.tolist() == [
        ["snippet", 4, 0.5], ["snippet", 8, 0.6], ["repeated", 16, pytest.approx(0.45)]]  # fmt: skip


def test_a_fixed_offset_copy_scores_at_its_span_only() -> None:
    """The hand-set model whose layer-1 head attends 6 tokens back: on S SEP S probes of span 6
    the token after each earlier occurrence sits exactly 6 back, so it scores 1; at spans 4 and
    10 it sits 4 or 10 back and the head scores near nothing (at span 4, queries before
    position 6 have no key 6 back and spread their attention: 0.09)."""
    from tests.science.evaluation.test_bi_induct import _offset_head_model

    scores = span_probe_scores(_offset_head_model(6), np.arange(1, 40), [4, 6, 10], 0,
                               n_probes=16, seed=0)  # fmt: skip
    assert scores[6] == pytest.approx(1.0, abs=1e-3)
    assert scores[4] < 0.15 and scores[10] < 0.05
    with pytest.raises(ValueError, match="span 1 must be in"):
        span_probe_scores(_offset_head_model(6), np.arange(1, 40), [1], 0)


def test_drops_near_chance_are_not_read() -> None:
    """At initialisation copy accuracy sits at chance and its relative drop is noise: those
    checkpoints are NaN, later ones (gain >= 0.1) are kept. The gain counts, not the accuracy:
    0.3 against a chance level of 0.25 is not read."""
    frame = _checkpoints("r", "v", [0.9, 0.1, 0.2, 0.3])
    extra = [{"run_name": "r", "preset": "p", "variant": "v", "seed": 0, "step": step,
              "tokens_seen": step * 10.0, "metric": metric, "value": value}
             for step, accuracy in ((0, 0.3), (100, 0.4), (200, 0.5), (300, 0.7))
             for metric, value in (("copy_accuracy", accuracy), ("copy_chance", 0.25))]  # fmt: skip
    curves = load_bearing_curves(pd.concat([frame, pd.DataFrame(extra)]))
    assert np.isnan(curves["excess"].iloc[0]) and np.isnan(curves["drop"].iloc[0])
    assert curves["excess"].iloc[1:].tolist() == pytest.approx([0.1, 0.2, 0.3])
    everything = load_bearing_curves(pd.concat([frame, pd.DataFrame(extra)]), min_copy_gain=0.0)
    assert everything["excess"].iloc[0] == pytest.approx(0.9)


def test_the_excess_drop_ci_is_a_bootstrap_over_the_copy_probes() -> None:
    """Top heads break every other probe (drop 0.5), the controls none: excess 0.5, and its CI
    over the 64 probes is the binomial one, about 0.5 +/- 0.12."""
    final = _final(1.0, 0.8, copy=1.0, chance=0.1, target=0.0, controls=(1.0,), n=64)
    final["ablation"]["zero"]["target"]["copy"] = np.tile([0.0, 1.0], 32)
    runs = pd.DataFrame({"run_name": ["r"], "preset": "p", "variant": "v", "seed": 0})
    emergence = pd.DataFrame({"run_name": ["r"], "metric": "prefix_matching",
                              "method": "threshold", "step": [100.0], "censored": False,
                              "threshold": 0.4, "last_step": 300})  # fmt: skip
    options = {"n_bootstrap": 2000, "level": 0.95, "seed": 1}
    row = run_table({"r": final}, runs, _checkpoints("r", "v", [0, 0, 0, 0]), emergence,
                    options).iloc[0]  # fmt: skip
    assert row["ablation_excess_copy_zero"] == pytest.approx(0.5)
    low, high = row["ablation_excess_copy_zero_ci_low"], row["ablation_excess_copy_zero_ci_high"]
    assert 0.5 - 0.16 < low < 0.5 - 0.08 and 0.5 + 0.08 < high < 0.5 + 0.16
    narrower = run_table({"r": final}, runs, _checkpoints("r", "v", [0, 0, 0, 0]), emergence,
                         {**options, "level": 0.5}).iloc[0]  # fmt: skip
    assert low < narrower["ablation_excess_copy_zero_ci_low"] < 0.5
