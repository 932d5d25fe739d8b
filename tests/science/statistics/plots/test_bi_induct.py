"""The bi_induct figures checked through the data they plot: signatures, ablation and
perplexity-gap curves per variant and preset, and the blank figure."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from ih_kedro.science.statistics.plots.bi_induct import (
    _empty,
    plot_ablation_over_training,
    plot_load_bearing,
    plot_perplexity_gap,
    plot_signatures,
)


def _lines(ax: plt.Axes) -> dict[str, tuple[list, list]]:
    return {line.get_label(): (list(line.get_xdata()), list(line.get_ydata()))
            for line in ax.get_lines() if not line.get_label().startswith("_")}  # fmt: skip


def _legend(ax: plt.Axes) -> list[str] | None:
    legend = ax.get_legend()
    return None if legend is None else [t.get_text() for t in legend.get_texts()]


def test_empty_figure_shows_the_message() -> None:
    fig = _empty("nothing here")
    (ax,) = fig.axes
    (text,) = ax.texts
    assert text.get_text() == "nothing here" and text.get_position() == (0.5, 0.5)
    assert (text.get_ha(), text.get_va()) == ("center", "center")
    assert not ax.axison
    assert tuple(fig.get_size_inches()) == (6.0, 2.0)
    plt.close(fig)


def _head_scores() -> pd.DataFrame:
    rows = []

    def add(run: str, step: int, metric: str, layer: int, head: int, value: float) -> None:
        rows.append({"run_name": run, "step": step, "tokens_seen": 10.0 * step, "metric": metric,
                     "layer": layer, "head": head, "value": value})  # fmt: skip

    for run, offset in (("pa_B2_C8_nat_s0", 0.0), ("pa_B2_C8_nat_s1", 0.2),
                        ("pa_B2_C8_snip_s0", 0.4)):  # fmt: skip
        for step in (1, 2):
            for metric in ("prefix_matching", "induction_induction_snippet",
                           "anti_induction_anti_induction_snippet"):  # fmt: skip
                add(run, step, metric, 1, 0, offset + 0.1 * step)
                add(run, step, metric, 1, 1, offset + 0.05 * step)
                add(run, step, metric, 2, 0, offset)
                add(run, step, metric, 0, 0, 0.99)  # layer 0: never the best
            add(run, step, "anti_induction", 2, 0, 0.97)  # another metric: not plotted
    add("pb_B2_C8_nat_s0", 3, "prefix_matching", 1, 0, 0.5)
    return pd.DataFrame(rows)


def _signature_runs() -> pd.DataFrame:
    """The runs of ``_head_scores`` with their presets and variant labels."""
    runs = [("pa", "nat", 0), ("pa", "nat", 1), ("pa", "snip", 0), ("pb", "nat", 0)]
    return pd.DataFrame([{"run_name": f"{preset}_B2_C8_{label}_s{seed}", "preset": preset,
                          "variant": label} for preset, label, seed in runs])  # fmt: skip


def test_plot_signatures_best_head_mean_over_seeds() -> None:
    fig = plot_signatures(_head_scores(), _signature_runs())
    axes = np.array(fig.axes).reshape(2, 3)
    assert tuple(fig.get_size_inches()) == pytest.approx((12.6, 6.4))
    titles = ["induction (repeated probes)", "induction (S SEP S)", "anti-induction (S SEP rev S)"]
    for row, preset in enumerate(("pa", "pb")):
        for col, title in enumerate(titles):
            ax = axes[row, col]
            assert ax.get_title() == f"{preset}: {title}"
            assert ax.get_xlabel() == "tokens seen"
            assert ax.get_ylabel() == "best head score (layers >= 1)"
            assert ax.get_ylim() == (0.0, 1.0)
            assert _legend(ax) == (["nat", "snip"] if (row, col) == (0, 0) else None)
    for col in range(3):  # nat: mean of 0.1 step and 0.2 + 0.1 step; snip: 0.4 + 0.1 step
        lines = _lines(axes[0, col])
        assert list(lines) == ["nat", "snip"]
        assert lines["nat"][0] == [10.0, 20.0] and lines["snip"][0] == [10.0, 20.0]
        assert lines["nat"][1] == pytest.approx([0.2, 0.3])
        assert lines["snip"][1] == pytest.approx([0.5, 0.6])
    assert _lines(axes[1, 0]) == {"nat": ([30.0], [0.5])}
    assert _lines(axes[1, 1]) == {} and _lines(axes[1, 2]) == {}
    plt.close(fig)


def test_plot_signatures_one_preset_and_nothing_to_plot() -> None:
    scores = _head_scores()
    fig = plot_signatures(scores[scores["run_name"] == "pb_B2_C8_nat_s0"], _signature_runs())
    assert len(fig.axes) == 3 and _lines(fig.axes[0]) == {"nat": ([30.0], [0.5])}
    plt.close(fig)
    for empty in (scores[scores["layer"] == 0], scores[scores["metric"] == "anti_induction"]):
        fig = plot_signatures(empty, _signature_runs())
        assert [t.get_text() for t in fig.axes[0].texts] == ["no head scores"]
        plt.close(fig)


def _checkpoint_metrics() -> pd.DataFrame:
    rows = []
    for preset, variant, seed, run in (("pa", "natural", 0, "n0"), ("pa", "natural", 1, "n1"),
                                       ("pa", "snip", 0, "s0"), ("pa", "anti", 0, "a0"),
                                       ("pb", "snip", 0, "t0")):  # fmt: skip
        for step in (1, 2):
            values = {"perplexity": 10.0 * step + seed + (variant == "snip") * 2,
                      "ablation_excess_probe_zero": 0.1 * step + seed,
                      "ablation_excess_icl_zero": 0.3 + seed,
                      "ablation_drop_icl_zero": 0.9, "icl_score": -1.0}  # fmt: skip
            if variant == "anti":
                del values["ablation_excess_icl_zero"], values["perplexity"]
            if variant == "snip" and preset == "pa":
                del values["ablation_excess_probe_zero"]
            for metric, value in values.items():
                rows.append({"run_name": run, "preset": preset, "variant": variant,
                             "seed": seed, "step": step, "tokens_seen": 100.0 * step,
                             "metric": metric, "value": value})  # fmt: skip
    return pd.DataFrame(rows)


def _check_axes(ax: plt.Axes, title: str, ylabel: str) -> None:
    assert ax.get_title() == title and ax.get_xlabel() == "tokens seen"
    assert ax.get_ylabel() == ylabel
    zero = ax.get_lines()[-1]  # the reference line at 0, drawn after the curves
    assert list(zero.get_ydata()) == [0, 0] and zero.get_label().startswith("_")


def test_plot_ablation_over_training_excess_per_variant() -> None:
    fig = plot_ablation_over_training(_checkpoint_metrics())
    axes = np.array(fig.axes).reshape(2, 2)
    assert tuple(fig.get_size_inches()) == pytest.approx((8.4, 6.4))
    ylabel = "relative drop, top heads - control"
    for row, preset in enumerate(("pa", "pb")):
        for col, metric in enumerate(("ablation_excess_icl_zero", "ablation_excess_probe_zero")):
            _check_axes(axes[row, col], f"{preset}: {metric}", ylabel)
    # natural: mean over seeds 0 and 1 (+ seed); anti has no icl excess, snip (pa) no probe.
    icl = _lines(axes[0, 0])
    assert list(icl) == ["natural", "snip"]
    assert icl["natural"][0] == [100.0, 200.0] and icl["snip"][0] == [100.0, 200.0]
    assert icl["natural"][1] == pytest.approx([0.8, 0.8])
    assert icl["snip"][1] == pytest.approx([0.3, 0.3])
    probe = _lines(axes[0, 1])
    assert list(probe) == ["anti", "natural"]
    assert probe["anti"][1] == pytest.approx([0.1, 0.2])
    assert probe["natural"][1] == pytest.approx([0.6, 0.7])
    assert _lines(axes[1, 1])["snip"][1] == pytest.approx([0.1, 0.2])
    assert _legend(axes[0, 0]) == ["natural", "snip"] and _legend(axes[0, 1]) is None
    assert _legend(axes[1, 0]) is None
    plt.close(fig)
    fig = plot_ablation_over_training(_checkpoint_metrics().query("metric == 'perplexity'"))
    assert [t.get_text() for t in fig.axes[0].texts] == ["no checkpoint metrics"]
    plt.close(fig)


@pytest.mark.filterwarnings("ignore:No artists with labels found to put in legend")
def test_plot_perplexity_gap_against_the_baseline() -> None:
    metrics = _checkpoint_metrics()
    fig = plot_perplexity_gap(metrics, "natural")
    axes = np.array(fig.axes).reshape(2, 1)
    _check_axes(axes[0, 0], "pa: perplexity", "perplexity - natural")
    _check_axes(axes[1, 0], "pb: perplexity", "perplexity - natural")
    # natural's mean is 10 step + 0.5; snip's 10 step + 2; no natural run in pb: no line.
    assert _lines(axes[0, 0]) == {"natural": ([100.0, 200.0], [0.0, 0.0]),
                                  "snip": ([100.0, 200.0], [1.5, 1.5])}  # fmt: skip
    assert _lines(axes[1, 0]) == {}
    assert _legend(axes[0, 0]) == ["natural", "snip"]
    plt.close(fig)
    # Another baseline; the curve keeps its own checkpoints (the baseline's is reindexed to them).
    metrics = metrics[~((metrics["variant"] == "natural") & (metrics["step"] == 2))]
    fig = plot_perplexity_gap(metrics, "snip")
    (ax,) = fig.axes[:1]
    assert ax.get_ylabel() == "perplexity - snip"
    lines = _lines(ax)
    assert lines["snip"] == ([100.0, 200.0], [0.0, 0.0])
    assert lines["natural"][0] == [100.0] and lines["natural"][1] == [-1.5]
    assert _lines(fig.axes[1]) == {"snip": ([100.0, 200.0], [0.0, 0.0])}
    plt.close(fig)
    # One preset, one metric: still a grid (squeeze=False).
    fig = plot_perplexity_gap(metrics[metrics["preset"] == "pb"], "natural")
    assert len(fig.axes) == 1 and _lines(fig.axes[0]) == {}
    plt.close(fig)


def test_load_bearing_plots_the_seed_mean_with_the_seed_range() -> None:
    rows = []
    for arm, offset in (("minimally_enriched", 0.0), ("induction", 0.2)):
        for seed, shift in ((0, -0.1), (1, 0.1)):
            for step in (0, 100):
                rows.append({"variant": arm, "seed": seed, "step": step,
                             "excess": offset + shift + step / 1000, "drop": 0.5 + shift,
                             "control": 0.1})  # fmt: skip
    fig = plot_load_bearing(pd.DataFrame(rows), base_arm="minimally_enriched")
    left, right = fig.axes
    lines = _lines(left)
    # The base arm first and black; the mean of the two seeds (shifts -0.1 and +0.1 cancel).
    assert list(lines) == ["minimally_enriched (2 seeds)", "induction (2 seeds)"]
    assert lines["minimally_enriched (2 seeds)"][1] == pytest.approx([0.0, 0.1])
    assert lines["induction (2 seeds)"][1] == pytest.approx([0.2, 0.3])
    assert left.get_lines()[0].get_color() == "black"
    # The band spans the seeds: min 0.2 - 0.1, max 0.2 + 0.1 at step 0 for the induction arm.
    band = left.collections[1].get_paths()[0].vertices[:, 1]
    assert band.min() == pytest.approx(0.1) and band.max() == pytest.approx(0.4)
    right_lines = _lines(right)
    assert right_lines["induction: random"][1] == pytest.approx([0.1, 0.1])
    plt.close(fig)
    empty = plot_load_bearing(pd.DataFrame(columns=["variant", "seed", "step", "excess"]))
    assert empty.axes[0].texts[0].get_text().startswith("no ablation over training")
    plt.close(empty)
