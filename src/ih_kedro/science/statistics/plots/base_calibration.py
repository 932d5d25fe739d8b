"""The natural-most base's dose-response figure: emergence step and the top head's ablation
excess drop against the dose (one copy event per N tokens, log axis), the chosen dose marked."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402


def plot_dose_response(outcomes: pd.DataFrame, table: pd.DataFrame) -> plt.Figure:
    """Left: each seed's emergence step (steps) per dose, censored seeds as open markers at the
    budget, the budget and the margin line; right: the excess drop (fraction) mean over seeds with
    its t CI, each seed's value as a dot. The chosen dose is a dashed vertical line."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    censored = outcomes["censored"].astype(bool)
    formed = outcomes[~censored]
    left.scatter(formed["tokens_per_event"], formed["emergence_step"], s=18, label="seed (formed)")
    lost = outcomes[censored]
    left.scatter(lost["tokens_per_event"], lost["budget_steps"], s=24, facecolors="none",
                 edgecolors="tab:red", label="seed (censored at the budget)")  # fmt: skip
    left.plot(table["tokens_per_event"], table["budget_steps"], "k-", lw=1, label="budget")
    left.plot(table["tokens_per_event"], table["within_steps"], "k:", lw=1, label="margin")
    left.set(xscale="log", xlabel="one copy event per N tokens", ylabel="emergence step",
             title="Do heads form? (lighter to the right)")  # fmt: skip
    if "excess_drop" in outcomes:
        right.scatter(outcomes["tokens_per_event"], outcomes["excess_drop"], s=12, alpha=0.5)
        err = np.vstack([table["excess_drop"] - table["excess_drop_ci_low"],
                         table["excess_drop_ci_high"] - table["excess_drop"]])  # fmt: skip
        right.errorbar(table["tokens_per_event"], table["excess_drop"], yerr=np.nan_to_num(err),
                       fmt="o-", capsize=3, label="mean, t CI over seeds")  # fmt: skip
    right.axhline(0, color="k", lw=0.8)
    right.set(xscale="log", xlabel="one copy event per N tokens",
              ylabel="excess drop of copy accuracy", title="Is the top head load-bearing?")  # fmt: skip
    doses = sorted(table["tokens_per_event"].astype(float))
    for ax in (left, right):
        # The doses themselves as ticks (log-axis minor labels overlap at these values).
        ax.set_xticks(doses, [f"{d:g}" for d in doses])
        ax.minorticks_off()
        for dose in table.loc[table["chosen"], "tokens_per_event"]:
            ax.axvline(dose, color="tab:green", ls="--", lw=1, label=f"chosen: 1 per {dose:g}")
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig
