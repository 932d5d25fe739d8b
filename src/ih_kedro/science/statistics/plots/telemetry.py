"""Figures of the telemetry stage: prefix matching of every head over training, per run."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402


def plot_prefix_matching_over_training(head_scores: pd.DataFrame) -> plt.Figure:
    """Per-head prefix-matching score over tokens seen, one line per head, a panel per run."""
    data = head_scores[head_scores["metric"] == "prefix_matching"].copy()
    data["head_id"] = "L" + data["layer"].astype(str) + "H" + data["head"].astype(str)
    x = "tokens_seen" if data["tokens_seen"].notna().all() and len(data) else "step"
    grid = sns.relplot(data=data, x=x, y="value", hue="head_id", col="run_name", col_wrap=3,
                       kind="line", height=3, facet_kws={"sharex": False})  # fmt: skip
    grid.set_axis_labels(x, "prefix-matching score")
    return grid.figure


def plot_head_heatmaps(
    head_scores: pd.DataFrame, heatmap_steps: Sequence[int] | None
) -> plt.Figure:
    """Layer x head prefix-matching heatmaps per run at chosen steps.

    ``heatmap_steps``: the steps to show (those a run has), or None / empty for each run's
    first, middle and last. Returns one row of panels per run, blank where a run has fewer.
    """
    data = head_scores[head_scores["metric"] == "prefix_matching"]
    runs = sorted(data["run_name"].unique())
    chosen = {}
    for run in runs:
        steps = sorted(data.loc[data["run_name"] == run, "step"].unique())
        chosen[run] = (
            [s for s in steps if s in heatmap_steps]
            if heatmap_steps
            else sorted({steps[0], steps[len(steps) // 2], steps[-1]})
        )
    n_cols = max((len(v) for v in chosen.values()), default=1) or 1
    fig, axes = plt.subplots(max(1, len(runs)), n_cols, squeeze=False,
                             figsize=(3 * n_cols, 2.5 * max(1, len(runs))))  # fmt: skip
    image = None
    for row, run in enumerate(runs):
        for col in range(n_cols):
            ax = axes[row][col]
            if col >= len(chosen[run]):
                ax.set_axis_off()
                continue
            step = chosen[run][col]
            cell = data[(data["run_name"] == run) & (data["step"] == step)]
            # (layers, heads)
            grid = cell.pivot_table(index="layer", columns="head", values="value")
            # imshow, not seaborn's heatmap: that one draws the whole figure on every call to
            # place its tick labels, quadratic in the number of panels (minutes for 54 panels).
            image = ax.imshow(grid.to_numpy(), vmin=0, vmax=1, cmap="viridis", aspect="auto",
                              interpolation="nearest")  # fmt: skip
            ax.set_xticks(range(grid.shape[1]), [str(h) for h in grid.columns], fontsize=6)
            ax.set_yticks(range(grid.shape[0]), [str(layer) for layer in grid.index], fontsize=6)
            ax.set_xlabel("head", fontsize=7)
            ax.set_ylabel("layer", fontsize=7)
            ax.set_title(f"{run}\nstep {step}", fontsize=7)
    fig.tight_layout()
    if image is not None:
        fig.colorbar(image, ax=axes.ravel().tolist(), label="prefix-matching score", shrink=0.6)
    return fig
