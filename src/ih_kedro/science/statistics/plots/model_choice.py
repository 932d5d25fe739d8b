"""The model choice's figure: per candidate, each seed's top-head excess drop with its bootstrap
CI (is the top head load-bearing?) and each seed's emergence step (do heads form in time?)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402


def plot_model_choice(outcomes: pd.DataFrame, table: pd.DataFrame) -> plt.Figure:
    """Left: excess drop of copy accuracy (fraction) per seed with its CI, candidates cheapest
    first, 0 as a line; right: emergence step per seed (censored: open red marker at the
    budget), with the budget and the margin. The chosen candidate's label is bold."""
    presets = list(table["preset"])
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 0.5 * len(presets) + 2.2), sharey=True)
    for y, preset in enumerate(presets):
        runs = outcomes[outcomes["preset"] == preset].sort_values("seed")
        offsets = np.linspace(-0.2, 0.2, max(len(runs), 1))
        for dy, run in zip(offsets, runs.itertuples(), strict=True):
            err = [[run.excess_drop - run.excess_drop_ci_low],
                   [run.excess_drop_ci_high - run.excess_drop]]  # fmt: skip
            color = "tab:green" if run.excess_drop_ci_low > 0 else "tab:gray"
            left.errorbar(run.excess_drop, y + dy, xerr=np.nan_to_num(err), fmt="o", ms=4,
                          color=color, capsize=2)  # fmt: skip
            if run.censored:
                right.scatter(run.budget_steps, y + dy, s=24, facecolors="none",
                              edgecolors="tab:red")  # fmt: skip
            else:
                right.scatter(run.emergence_step, y + dy, s=18, color="tab:blue")
    left.axvline(0, color="k", lw=0.8)
    left.set(yticks=range(len(presets)), yticklabels=presets,
             xlabel="excess drop of copy accuracy (top heads - random heads)",
             title="Is the top head load-bearing? (green: CI above 0)")  # fmt: skip
    for label, chosen in zip(left.get_yticklabels(), table["chosen"], strict=True):
        label.set_fontweight("bold" if chosen else "normal")
    if len(table):
        right.axvline(float(table["budget_steps"].min()), color="k", lw=1, label="budget")
        right.axvline(float(table["within_steps"].min()), color="k", ls=":", lw=1, label="margin")
        right.legend(fontsize=7)
    right.set(xlabel="emergence step (open red: censored)", title="Do heads form in time?")
    left.invert_yaxis()
    fig.tight_layout()
    return fig
