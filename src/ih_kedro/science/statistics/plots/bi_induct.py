"""Figures of the ``bi_induct`` experiment: induction signatures, ablation and perplexity gap
over training, one line per data variant (mean over seeds), a row of panels per preset."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402


def _empty(message: str) -> plt.Figure:
    """A blank 6 x 2 inch figure saying ``message`` (nothing to plot)."""
    fig, ax = plt.subplots(figsize=(6, 2))
    ax.axis("off")
    ax.text(0.5, 0.5, message, ha="center", va="center")
    return fig


def plot_signatures(head_scores: pd.DataFrame, runs: pd.DataFrame) -> plt.Figure:
    """Best head's induction and anti-induction score over training, one line per variant.

    From telemetry's ``head_scores`` (max over heads of layers >= 1, mean over seeds):
    induction on repeated random-token probes (``prefix_matching``), on ``S ‖ SEP ‖ S``
    snippets, and anti-induction on ``S ‖ SEP ‖ reverse(S)`` snippets. ``runs``: one row per
    run with its ``run_name``, ``preset`` and ``variant`` label. Returns a grid of a row per
    preset and a column per signature, or a blank figure saying there are no head scores.
    """
    panels = {
        "prefix_matching": "induction (repeated probes)",
        "induction_induction_snippet": "induction (S SEP S)",
        "anti_induction_anti_induction_snippet": "anti-induction (S SEP rev S)",
    }
    data = head_scores[head_scores["metric"].isin(list(panels)) & (head_scores["layer"] >= 1)]
    if data.empty:
        return _empty("no head scores")
    labels = runs.set_index("run_name")[["variant", "preset"]]
    best = data.groupby(["run_name", "step", "tokens_seen", "metric"], as_index=False)[
        "value"
    ].max()
    best = best.join(labels, on="run_name")
    presets = sorted(best["preset"].unique())
    fig, axes = plt.subplots(len(presets), len(panels), figsize=(4.2 * len(panels),
                             3.2 * len(presets)), squeeze=False)  # fmt: skip
    for row, preset in enumerate(presets):
        for col, (metric, title) in enumerate(panels.items()):
            ax = axes[row, col]
            part = best[(best["preset"] == preset) & (best["metric"] == metric)]
            for variant, group in part.groupby("variant"):
                curve = group.groupby("tokens_seen")["value"].mean()
                ax.plot(curve.index, curve.to_numpy(), marker=".", label=variant)
            ax.set_title(f"{preset}: {title}", fontsize=9)
            ax.set_xlabel("tokens seen")
            ax.set_ylabel("best head score (layers >= 1)")
            ax.set_ylim(0, 1)
    axes[0, 0].legend(fontsize=8)
    fig.tight_layout()
    return fig


def _curves(checkpoint_metrics: pd.DataFrame, metrics: list[str], ylabel: str,
            reference: str | None = None) -> plt.Figure:  # fmt: skip
    """Each of ``metrics`` over tokens seen, a line per variant (mean over seeds), a row of
    panels per preset; minus the ``reference`` variant's curve when given."""
    data = checkpoint_metrics[checkpoint_metrics["metric"].isin(metrics)]
    if data.empty:
        return _empty("no checkpoint metrics")
    presets = sorted(data["preset"].unique())
    fig, axes = plt.subplots(len(presets), len(metrics), figsize=(4.2 * len(metrics),
                             3.2 * len(presets)), squeeze=False)  # fmt: skip
    for row, preset in enumerate(presets):
        part = data[data["preset"] == preset]
        mean = part.groupby(["variant", "metric", "tokens_seen"])["value"].mean()
        for col, metric in enumerate(metrics):
            ax = axes[row, col]
            for variant in sorted(part["variant"].unique()):
                if (variant, metric) not in mean.index.droplevel(2):
                    continue
                curve = mean.loc[(variant, metric)]
                if reference is not None:
                    if (reference, metric) not in mean.index.droplevel(2):
                        continue
                    curve = curve - mean.loc[(reference, metric)].reindex(curve.index)
                ax.plot(curve.index, curve.to_numpy(), marker=".", label=variant)
            ax.axhline(0, color="grey", lw=0.5)
            ax.set_title(f"{preset}: {metric}", fontsize=9)
            ax.set_xlabel("tokens seen")
            ax.set_ylabel(ylabel)
    axes[0, 0].legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_ablation_over_training(checkpoint_metrics: pd.DataFrame) -> plt.Figure:
    """Excess relative drop (top heads minus random-head control) over training per variant."""
    metrics = sorted(m for m in checkpoint_metrics["metric"].unique()
                     if m.startswith("ablation_excess_"))  # fmt: skip
    return _curves(checkpoint_metrics, metrics, "relative drop, top heads - control")


def plot_perplexity_gap(checkpoint_metrics: pd.DataFrame, baseline: str) -> plt.Figure:
    """Held-out perplexity minus the ``baseline`` variant's (the natural-only run), over
    training, per variant; a preset without the baseline gets no lines."""
    return _curves(checkpoint_metrics, ["perplexity"], f"perplexity - {baseline}",
                   reference=baseline)  # fmt: skip


def plot_load_bearing(curves: pd.DataFrame, base_arm: str | None = None) -> plt.Figure:
    """When the top heads become load-bearing: the ablation's relative drop of copy accuracy at
    every checkpoint, per arm, mean over seeds with the seeds' range as a band.

    ``curves``: ``variant, seed, step, excess, drop, control`` (one row per run and checkpoint,
    :func:`ih_kedro.science.evaluation.bi_induct_runs.load_bearing_curves`). Left: the excess
    drop (top-2 % heads minus the mean of the random-head controls); right: the top heads' drop
    (solid) and the controls' (dashed). ``base_arm`` is drawn in black.
    """
    if curves.empty or curves["excess"].isna().all():
        return _empty("no ablation over training (no copy-accuracy ablation recorded)")
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8), sharex=True)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    arms = sorted(curves["variant"].unique(), key=lambda a: (a != base_arm, a))
    for i, arm in enumerate(arms):
        colour = "black" if arm == base_arm else colours[i % len(colours)]
        part = curves[curves["variant"] == arm]
        stats = part.groupby("step")[["excess", "drop", "control"]]
        mean, low, high = stats.mean(), stats.min(), stats.max()
        n_seeds = part["seed"].nunique()
        left.plot(mean.index, mean["excess"], color=colour, marker=".",
                  label=f"{arm} ({n_seeds} seeds)")  # fmt: skip
        left.fill_between(mean.index, low["excess"], high["excess"], color=colour, alpha=0.18)
        right.plot(mean.index, mean["drop"], color=colour, marker=".", label=f"{arm}: top heads")
        right.fill_between(mean.index, low["drop"], high["drop"], color=colour, alpha=0.12)
        right.plot(mean.index, mean["control"], color=colour, ls="--", label=f"{arm}: random")
    for ax in (left, right):
        ax.axhline(0, color="grey", lw=0.5)
        ax.set_xlabel("training step")
    left.set_ylabel("excess relative drop of copy accuracy")
    left.set_title("top-2% heads minus random heads (band: seed range)", fontsize=9)
    right.set_ylabel("relative drop of copy accuracy")
    right.set_title("ablated: top-2% heads (solid), random heads (dashed)", fontsize=9)
    left.legend(fontsize=7)
    right.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    return fig
