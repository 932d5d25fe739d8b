"""Figures of the ``markov`` experiment: the designed processes and the condition outcomes."""

from __future__ import annotations

from collections.abc import Mapping

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from ih_kedro.science.data.variants.markov_process import MarkovProcess  # noqa: E402
from ih_kedro.science.statistics.plots.pareto import VERDICT_COLOURS  # noqa: E402

_FORMED_CODE = {"no": 0.0, "mixed": 0.5, "unknown": 0.5, "yes": 1.0}


def plot_processes(processes: Mapping[str, MarkovProcess]) -> Figure:
    """One column per process: its transition matrix (states grouped) and its stationary
    distribution against the target marginal, titled with the achieved properties."""
    names = sorted(processes)
    fig, axes = plt.subplots(2, len(names), figsize=(3.2 * len(names), 6.4), squeeze=False)
    for column, name in enumerate(names):
        process = processes[name]
        order = np.argsort(process.groups, kind="stable")  # states grouped for the heatmap
        axes[0, column].imshow(
            process.transition[np.ix_(order, order)], cmap="viridis", aspect="auto"
        )
        p = process.properties
        axes[0, column].set_title(
            f"{name}\nH ratio {p['entropy_ratio']:.2f}, within {p['within_similarity']:.2f}, "
            f"across {p['across_similarity']:.2f}",
            fontsize=8,
        )
        axes[0, column].set_xlabel("next state (by group)")
        axes[0, column].set_ylabel("state (by group)")
        states = np.arange(process.vocab_size)
        axes[1, column].plot(states, process.target, "k--", label="target")
        axes[1, column].plot(states, process.stationary, label="stationary")
        axes[1, column].set_title(f"KL {p['kl_to_target']:.4f} nats", fontsize=8)
        axes[1, column].set_xlabel("state")
        axes[1, column].legend(fontsize=7)
    fig.suptitle("Designed Markov processes")
    fig.tight_layout()
    return fig


def plot_conditions(table: pd.DataFrame) -> Figure:
    """Left: formed? per process x repetition level (colour), annotated with S* and its CI.
    Right: S* per condition (emerged ones) with CI error bars."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 0.6 * max(len(table), 4) + 1.5))
    if table.empty:
        left.text(0.5, 0.5, "no conditions", ha="center")
        return fig
    processes = list(dict.fromkeys(table["process"]))
    levels = list(dict.fromkeys(table["level"]))
    grid = np.full((len(processes), len(levels)), np.nan)
    for row in table.itertuples(index=False):
        i, j = processes.index(row.process), levels.index(row.level)
        grid[i, j] = _FORMED_CODE.get(str(row.formed), np.nan)
        label = str(row.formed)
        if pd.notna(row.s_star):
            label += f"\nS* {row.s_star:.0f} [{row.ci_low:.0f}, {row.ci_high:.0f}]"
        left.text(j, i, label, ha="center", va="center", fontsize=8)
    left.imshow(grid, cmap="RdYlGn", vmin=0, vmax=1, aspect="auto")
    left.set_xticks(range(len(levels)), levels)
    left.set_yticks(range(len(processes)), processes)
    left.set_title("Induction heads formed within the budget?")
    emerged = table[table["s_star"].notna()].reset_index(drop=True)
    if emerged.empty:
        right.text(0.5, 0.5, "no condition formed", ha="center", transform=right.transAxes)
    else:
        low = emerged["s_star"] - emerged["ci_low"].fillna(emerged["s_star"])
        high = emerged["ci_high"].fillna(emerged["s_star"]) - emerged["s_star"]
        right.errorbar(
            emerged["s_star"],
            np.arange(len(emerged)),
            xerr=[low.clip(lower=0), high.clip(lower=0)],
            fmt="o",
            capsize=3,
        )
        right.set_yticks(range(len(emerged)), emerged["condition"])
        right.set_xlabel("S* (steps), 95% CI")
    right.set_title("Emergence step of the conditions that formed")
    fig.tight_layout()
    return fig


__all__ = ["plot_conditions", "plot_processes"]


def _comparisons(verdicts: Mapping[str, Mapping]) -> list[tuple[str, Mapping]]:
    """``(row label, comparison)`` of every paired comparison of every claim, in order."""
    rows = []
    for claim, verdict in verdicts.items():
        for comparison in verdict.get("comparisons", []):
            label = f"{claim}\n{comparison['treatment']} − {comparison['control']}"
            rows.append((label, comparison))
    return rows


def plot_paired_comparisons(verdicts: Mapping[str, Mapping]) -> Figure:
    """Every paired comparison behind the verdicts (``verdicts.json: claims``): each seed's
    difference of formation scores (T − K) as a dot, the mean with its paired t CI as a bar,
    coloured by the comparison's verdict, against the no-effect line at 0."""
    rows = _comparisons(verdicts)
    fig, ax = plt.subplots(figsize=(9.0, 1.2 + 0.9 * max(len(rows), 1)))
    if not rows:
        ax.text(0.5, 0.5, "no paired comparison", ha="center", va="center")
        ax.set_axis_off()
        return fig
    for y, (_, comparison) in enumerate(rows):
        colour = VERDICT_COLOURS.get(str(comparison.get("verdict")), "tab:gray")
        diffs = [s["difference"] for s in comparison["seeds"] if s.get("difference") is not None]
        ax.scatter(diffs, [y] * len(diffs), color=colour, s=25, zorder=3)
        mean, low, high = (comparison.get(k) for k in ("mean", "ci_low", "ci_high"))
        if low is not None and high is not None:
            ax.hlines(y, low, high, color=colour, linewidth=3, alpha=0.5)
        if mean is not None:
            ax.plot([mean], [y], marker="|", markersize=14, color=colour)
    ax.axvline(0.0, color="black", linewidth=0.8)
    ax.set_yticks(range(len(rows)), [label for label, _ in rows], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("formation score T − K (dots: seeds, bar: paired t CI)")
    ax.set_title("Paired comparisons: green supported, red contradicted, grey undecided",
                 fontsize=10)  # fmt: skip
    fig.tight_layout()
    return fig
