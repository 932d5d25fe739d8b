"""Bi-Induct per-run tables: one row per (arm, seed), the span-probe check and load-bearing curves.

The five claims are judged with seeds as the unit of inference
(:mod:`ih_kedro.science.statistics.bi_induct_claims`), so every run is reduced here to the
numbers the claims compare, each with its units:

- :func:`run_table`: one row per run: the emergence step of its induction signature (telemetry's
  emergence table; a censored run carries its last step), the final induction / snippet /
  anti-induction scores (attention, best head in layers >= 1), copy accuracy and its chance level
  (fractions), held-out loss (nats per token) and perplexity, the ablation drops of the top-2 %
  heads and of the random controls per mode and metric (relative drops), and the step from
  which the heads are **load-bearing** (the excess drop of copy accuracy first reaches
  ``load_bearing_threshold``, interpolated between checkpoints like an emergence step).
- :func:`span_probe_scores`: a final model's snippet induction score on ``S ‖ SEP ‖ S`` probes of
  several spans: a model that learned a fixed-offset copy scores at one span only.
- :func:`load_bearing_curves`: the excess drop at every checkpoint, per run (the figure's data).

Plain numpy / pandas / torch; no Kedro imports.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import nn

from ih_kedro.science.evaluation.bi_induct import (
    ablation_excess_interval,
    best_head_samples,
    checkpoint_summary,
)
from ih_kedro.science.telemetry.emergence import threshold_crossing
from ih_kedro.science.telemetry.emergence_table import select_emergence_rows
from ih_kedro.science.telemetry.probes import snippet_probes
from ih_kedro.science.telemetry.scores import head_pattern_scores

RUN_COLUMNS = [
    "run_name", "preset", "variant", "seed", "final_step", "emergence_step",
    "emergence_censored", "induction_score", "snippet_induction_score", "anti_induction_score",
    "copy_accuracy", "copy_chance", "copy_gain", "loss", "perplexity", "heads_formed",
    "load_bearing_step",
]  # fmt: skip
"""The fixed columns of :func:`run_table`; the ablation columns
``ablation_{drop,control,excess}_<metric>_<mode>`` follow them."""

SPAN_COLUMNS = ["run_name", "variant", "seed", "probe", "span", "score"]


@torch.no_grad()
def span_probe_scores(
    model: nn.Module,
    token_pool: np.ndarray,
    spans: Sequence[int],
    sep_token_id: int,
    *,
    n_probes: int = 32,
    seed: int = 0,
    batch_size: int = 32,
    min_layer: int = 1,
) -> dict[int, float]:
    """Best head's induction score on ``S ‖ SEP ‖ S`` probes of each span: ``{span: score}``.

    ``S`` is ``span`` distinct tokens of ``token_pool``, drawn with ``seed`` (the same probes for
    every model). The score is attention from each second-copy token to the token after its
    earlier occurrence (in [0, 1]), averaged over probes, for the head with the best mean in
    layers ``>= min_layer``.

    Raises:
        ValueError: a span longer than the pool, or below 2.
    """
    pool = np.asarray(token_pool)
    out: dict[int, float] = {}
    for value in spans:
        span = int(value)
        if not 2 <= span <= pool.size:
            raise ValueError(f"span_probe_scores: span {span} must be in [2, {pool.size}]")
        rng = np.random.default_rng([seed, span])
        halves = torch.as_tensor(
            np.stack([rng.choice(pool, size=span, replace=False) for _ in range(n_probes)])
        ).long()  # (n, span)
        probes = snippet_probes(halves, int(sep_token_id))  # (n, 2 span + 1)
        scores = head_pattern_scores(model, probes, batch_size, repeated=False)["induction"]
        out[span] = float(np.nanmean(best_head_samples(scores, min_layer)))
    return out


def span_probe_table(finals: Mapping[str, Mapping[str, Any]], runs: pd.DataFrame) -> pd.DataFrame:
    """Long table of every run's final span-probe scores (``finals[run]['span_scores']``) and its
    repeated-random-token induction score (``probe = repeated``, span = the probes' half length)."""
    rows = []
    for run in runs.to_dict("records"):
        final = finals.get(run["run_name"])
        if final is None:
            continue
        base = {"run_name": run["run_name"], "variant": run["variant"], "seed": int(run["seed"])}
        for span, score in sorted((final.get("span_scores") or {}).items()):
            rows.append({**base, "probe": "snippet", "span": int(span), "score": float(score)})
        rows.append({**base, "probe": "repeated", "span": int(final.get("repeated_length", 0)),
                     "score": float(np.mean(final["induction_best"]))})  # fmt: skip
    return pd.DataFrame(rows, columns=SPAN_COLUMNS)


def load_bearing_curves(
    checkpoint_metrics: pd.DataFrame,
    metric: str = "copy",
    mode: str = "zero",
    min_copy_gain: float = 0.1,
) -> pd.DataFrame:
    """``run_name, variant, seed, step, tokens_seen, excess, drop, control``: the ablation of the
    top heads against the random controls at every evaluated checkpoint (relative drops).

    A relative drop of an accuracy near its chance level is noise (at initialisation a copy
    accuracy of 0.01 that falls to 0.005 is a "drop" of 0.5), so for ``metric = "copy"`` the
    drops are NaN at checkpoints whose copy accuracy exceeds its chance level by less than
    ``min_copy_gain`` (when the table has ``copy_accuracy`` and ``copy_chance``).
    """
    names = {f"ablation_{kind}_{metric}_{mode}": kind for kind in ("excess", "drop", "control")}
    gains = {"copy_accuracy": "accuracy", "copy_chance": "chance"} if metric == "copy" else {}
    rows = checkpoint_metrics[checkpoint_metrics["metric"].isin([*names, *gains])]
    index = ["run_name", "variant", "seed", "step", "tokens_seen"]
    wide = rows.pivot_table(index=index, columns="metric", values="value", aggfunc="first")
    wide = wide.rename(columns={**names, **gains}).reset_index()
    for kind in names.values():
        if kind not in wide:
            wide[kind] = math.nan
    if {"accuracy", "chance"} <= set(wide.columns):
        unmeasurable = (wide["accuracy"] - wide["chance"]) < float(min_copy_gain)
        wide.loc[unmeasurable, list(names.values())] = math.nan
    return wide[[*index, "excess", "drop", "control"]].sort_values(["run_name", "step"])


def _emergence(emergence_table: pd.DataFrame, options: Mapping[str, Any]) -> pd.DataFrame:
    """``run_name -> (step, censored)`` of the emergence rows the claims use."""
    where = "bi_induct.evaluation.results.emergence"
    table = select_emergence_rows(
        emergence_table,
        str(options.get("emergence_metric", "prefix_matching")),
        str(options.get("emergence_method", "threshold")),
        options.get("emergence_threshold"),
        metric_parameter=f"{where}_metric/{where}_method",
        threshold_parameter=f"{where}_threshold",
    )
    censored = table["censored"].astype(bool).to_numpy()
    step = np.where(censored, table["last_step"].astype(float), table["step"].astype(float))
    return pd.DataFrame(
        {"emergence_step": step, "emergence_censored": censored},
        index=table["run_name"].to_numpy(),
    )


def run_table(
    finals: Mapping[str, Mapping[str, Any]],
    runs: pd.DataFrame,
    checkpoint_metrics: pd.DataFrame,
    emergence_table: pd.DataFrame,
    options: Mapping[str, Any],
) -> pd.DataFrame:
    """One row per run (:data:`RUN_COLUMNS` + ablation columns), the claims' input.

    Args:
        finals: run_name -> the last checkpoint's :func:`~ih_kedro.science.evaluation.bi_induct.evaluate_checkpoint` result.
        runs: ``run_name, preset, variant, seed`` per run.
        checkpoint_metrics: the tidy per-checkpoint metrics (for the load-bearing step).
        emergence_table: telemetry's emergence table (``run_name, metric, method, step,
            censored, threshold, last_step``).
        options: ``heads_formed_threshold`` (0.4, best layer >= 1 induction score at the end),
            ``load_bearing_threshold`` (0.5, excess relative drop of copy accuracy),
            ``load_bearing_mode`` (``zero``), ``load_bearing_min_copy_gain`` (0.1: checkpoints
            whose copy accuracy is closer to chance are not read), ``emergence_metric`` / ``emergence_method`` /
            ``emergence_threshold``; ``n_bootstrap`` (1000), ``level`` (0.95) and ``seed`` (0)
            of each run's excess-drop CI (``ablation_excess_<metric>_<mode>_ci_low/high``,
            bootstrap over the metric's probe items).
    """
    formed_at = float(options.get("heads_formed_threshold", 0.4))
    bearing_at = float(options.get("load_bearing_threshold", 0.5))
    mode = str(options.get("load_bearing_mode", "zero"))
    emergence = _emergence(emergence_table, options)
    bootstrap = {
        "n_bootstrap": int(options.get("n_bootstrap", 1000)),
        "level": float(options.get("level", 0.95)),
        "seed": int(options.get("seed", 0)),
    }
    curves = load_bearing_curves(checkpoint_metrics, "copy", mode,
                                 float(options.get("load_bearing_min_copy_gain", 0.1)))  # fmt: skip
    rows = []
    for run in runs.sort_values(["variant", "seed"]).to_dict("records"):
        final = finals.get(run["run_name"])
        if final is None:
            continue
        summary = checkpoint_summary(final)
        loss = float(np.mean(final["items"]["loss"]))
        curve = curves[curves["run_name"] == run["run_name"]]
        crossing = threshold_crossing(curve["step"].to_numpy(float),
                                      curve["excess"].to_numpy(float), bearing_at)  # fmt: skip
        found = run["run_name"] in emergence.index
        row = {
            "run_name": run["run_name"], "preset": run["preset"], "variant": run["variant"],
            "seed": int(run["seed"]), "final_step": int(final.get("step", -1)),
            "emergence_step": emergence.at[run["run_name"], "emergence_step"] if found else math.nan,
            "emergence_censored": bool(emergence.at[run["run_name"], "emergence_censored"])
            if found else None,
            "loss": loss, "perplexity": math.exp(loss),
            "heads_formed": summary["induction_score"] >= formed_at,
            "load_bearing_step": math.nan if crossing is None else float(crossing),
        }  # fmt: skip
        for key in ("induction_score", "snippet_induction_score", "anti_induction_score",
                    "copy_accuracy", "copy_chance"):  # fmt: skip
            row[key] = summary.get(key, math.nan)
        row["copy_gain"] = row["copy_accuracy"] - row["copy_chance"]
        row.update({k: v for k, v in summary.items() if k.startswith("ablation_")})
        for mode in final.get("ablation", {}):
            for metric in final.get("ablation_base", {}):
                _, low, high = ablation_excess_interval(final, mode, metric, **bootstrap)
                row[f"ablation_excess_{metric}_{mode}_ci_low"] = low
                row[f"ablation_excess_{metric}_{mode}_ci_high"] = high
        rows.append(row)
    table = pd.DataFrame(rows)
    ablation = sorted(c for c in table.columns if c.startswith("ablation_"))
    return table.reindex(columns=[*RUN_COLUMNS, *ablation])


__all__ = [
    "RUN_COLUMNS",
    "SPAN_COLUMNS",
    "load_bearing_curves",
    "run_table",
    "span_probe_scores",
    "span_probe_table",
]
