"""``markov`` report nodes: the runs and conditions tables, the verdicts, figures and MLflow.

Thin wrappers around :mod:`ih_kedro.science.telemetry.formation` (the formation score and the
formed verdict per threshold of every run) and :mod:`ih_kedro.science.statistics.markov_verdicts`
(conditions paired by seed, the verdict rules).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from ih_kedro.adaptive_seeds import look_command
from ih_kedro.science.data.variants.markov import markov_sequences
from ih_kedro.science.data.variants.markov_process import MarkovProcess
from ih_kedro.science.statistics.markov_verdicts import (
    PAIRED_RULE,
    condition_table,
    judge_claims,
    threshold_robustness_table,
    verdict_summary,
)
from ih_kedro.science.statistics.pareto_frontier import emergence_status
from ih_kedro.science.statistics.plots.markov import plot_conditions, plot_paired_comparisons
from ih_kedro.science.statistics.sequential_claims import adopt_sequential, markov_sequential
from ih_kedro.science.telemetry.emergence_table import emergence_min_layer
from ih_kedro.science.telemetry.formation import DEFAULT_THRESHOLDS, formation_table

from .nodes import run_cells

logger = logging.getLogger(__name__)


def _formation(
    score_samples: dict[str, Any],
    cells: pd.DataFrame,
    training: dict[str, Any],
    telemetry: dict[str, Any],
    metric: str,
    thresholds: tuple[float, ...],
) -> pd.DataFrame:
    """The formation score and the formed verdict per threshold of every run of ``cells``."""
    budget = int(training["max_steps"])
    missing = sorted(set(cells["run_name"]) - set(score_samples))
    if missing:
        raise ValueError(f"markov.conditions: runs missing from the score samples: {missing}")
    return formation_table(
        {name: score_samples[name] for name in cells["run_name"]},
        dict.fromkeys(cells["run_name"], budget),
        metric=metric,
        min_layer=emergence_min_layer(telemetry, metric),
        thresholds=thresholds,
    )


def build_conditions(
    emergence_table: pd.DataFrame,
    score_samples: dict[str, Any],
    process_table: pd.DataFrame,
    processes: dict[str, MarkovProcess],
    variant_data: dict[str, Any],
    training: dict[str, Any],
    telemetry: dict[str, Any],
    conditions: dict[str, Any],
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The conditions table (one row per (process, repetition level): formed?, S* and CI,
    status, the formation score with its CI over seeds, formed counts per threshold, the
    achieved process properties and the realised repetition knobs) and the runs table (one row
    per run and seed: what the verdicts pair by seed)."""
    metric = str(conditions.get("metric", "prefix_matching"))
    thresholds = tuple(float(t) for t in conditions.get("thresholds", DEFAULT_THRESHOLDS))
    method = str(conditions.get("method", "threshold"))
    table = emergence_table[
        (emergence_table["metric"] == metric) & (emergence_table["method"] == method)
    ]
    if table.empty:
        raise ValueError(
            f"markov.conditions: no emergence rows for metric {metric!r}, method {method!r}"
        )
    table = table.assign(status=emergence_status(table))
    cells = run_cells(training)
    runs = cells.merge(
        table[["run_name", "status", "step", "ci_low", "ci_high", "last_step"]],
        on="run_name",
        how="left",
    )
    if runs["status"].isna().any():
        missing = sorted(runs.loc[runs["status"].isna(), "run_name"])
        raise ValueError(f"markov.conditions: runs missing from the emergence table: {missing}")
    descriptors = process_table.set_index("process")[
        ["marginal", "local_dependency", "categorical"]
    ]
    runs = runs.join(descriptors, on="process")
    levels = variant_data["levels"]
    runs["frequency"] = [levels[level]["frequency"] for level in runs["level"]]
    runs["reliability"] = [levels[level]["reliability"] for level in runs["level"]]
    formation = _formation(score_samples, cells, training, telemetry, metric, thresholds)
    runs = runs.merge(formation.drop(columns=["metric", "last_step"]), on="run_name", how="left")
    properties = process_table.drop(columns=["local_dependency", "categorical", "marginal"])
    result = condition_table(runs, properties, thresholds=thresholds)
    realised = [
        _realised_repetition(processes[p], levels[lv], int(training["context_lengths"][0]) + 1)
        for p, lv in zip(result["process"], result["level"], strict=True)
    ]
    return pd.concat([result, pd.DataFrame(realised)], axis=1), runs


def _realised_repetition(
    process: MarkovProcess, level: Mapping[str, Any], width: int, n: int = 512
) -> dict[str, float]:
    from ih_kedro.science.data.variants.repetition_stats import measure_repetition

    sample = markov_sequences(
        process,
        n,
        width,
        float(level["frequency"]),
        float(level["reliability"]),
        np.random.default_rng(0),
    )  # (n, C+1)
    stats = measure_repetition(sample)
    return {
        "realised_frequency": stats.frequency,
        "realised_reliability": stats.reliability,
    }


def _judge_kwargs(conditions: Mapping[str, Any]) -> dict[str, Any]:
    """``judge_claims``' keywords from ``markov.conditions``."""
    return {
        "high_level": str(conditions.get("high_level", "high")),
        "frontier_level": str(conditions.get("frontier_level", "near_frontier")),
        "thresholds": tuple(float(t) for t in conditions.get("thresholds", DEFAULT_THRESHOLDS)),
        "decision_threshold": float(conditions.get("decision_threshold", 0.4)),
        "level": float(conditions.get("level", 0.95)),
        "floor": float(conditions.get("floor", 0.2)),
    }


def _sequential(
    runs_table: pd.DataFrame,
    verdicts: dict[str, Any],
    conditions: dict[str, Any],
    training: Mapping[str, Any] | None,
    experiment: str = "markov",
) -> dict[str, Any] | None:
    """``conditions.adaptive_seeds``: every claim look by look (``sequential_claims``), its looks
    under the claim's ``sequential``; ``enabled`` makes the sequential verdict the claim's. The
    plan and the next look (cells, seeds, the command that trains them: ``kedro run
    --pipeline=<experiment>``), or None."""
    adaptive = conditions.get("adaptive_seeds")
    if not adaptive:
        return None
    labels = {
        f"{e['options']['process']}@{e['options']['level']}": str(e["label"])
        for e in (training or {}).get("data_variants") or []
        if isinstance(e, Mapping) and {"process", "level"} <= set(e.get("options") or {})
    }
    sequential = markov_sequential(runs_table, adaptive, labels, **_judge_kwargs(conditions))
    for name, verdict in verdicts.items():
        adopt_sequential(verdict, sequential["claims"][name], bool(adaptive.get("enabled")))
    following = sequential["next_look"]
    if following:
        following["command"] = look_command(experiment, following)
        logger.info("%s: undecided claims need seeds %s on %s (%s)", experiment,
                    following["add_seeds"], following["cells"], following["command"])  # fmt: skip
    return {"plan": sequential["plan"], "next_look": following,
            "replaces_fixed_seed_verdicts": bool(adaptive.get("enabled"))}  # fmt: skip


def judge(
    runs_table: pd.DataFrame,
    frontier_level: dict[str, Any],
    conditions: dict[str, Any],
    training: dict[str, Any] | None = None,
    experiment: str = "markov",
) -> dict[str, Any]:
    """``verdicts.json``: per claim the rule, the verdict at the decision threshold with the
    paired comparisons by seed, the verdict at every threshold and whether they agree, plus the
    budget, seeds and the near-frontier level behind them; with ``conditions.adaptive_seeds``
    the looks (``training``'s cell labels name where the next seeds train; the command runs the
    pipeline ``experiment``, markov or markov_full_vocab)."""
    verdicts = judge_claims(runs_table, **_judge_kwargs(conditions))
    sequential = _sequential(runs_table, verdicts, conditions, training, experiment)
    logger.info("%s verdicts: %s", experiment, verdict_summary(verdicts))
    seeds = runs_table.groupby(["process", "level"])["seed"].nunique()
    return {
        **({"sequential": sequential} if sequential else {}),
        "claims": verdicts,
        "paired_rule": PAIRED_RULE,
        "threshold_robustness": threshold_robustness_table(verdicts).to_dict("records"),
        "budget_steps": int(runs_table["budget_steps"].max()) if len(runs_table) else None,
        "n_seeds": sorted({int(n) for n in seeds}),
        "near_frontier_level": frontier_level,
        "metric": str(conditions.get("metric", "prefix_matching")),
        "method": str(conditions.get("method", "threshold")),
    }


def conditions_figure(conditions_table: pd.DataFrame) -> Figure:
    return plot_conditions(conditions_table)


def comparisons_figure(verdicts: dict[str, Any]) -> Figure:
    """The paired comparisons behind the verdicts: per-seed differences and their t CIs."""
    return plot_paired_comparisons(verdicts["claims"])


def log_markov_to_mlflow(
    verdicts: dict[str, Any], conditions_table: pd.DataFrame, experiment: str = "markov"
) -> None:
    """Verdicts as MLflow tags, per-condition formed share and S* as metrics, each named
    ``<experiment>.<...>`` (markov and markov_full_vocab stay apart, also when searched across
    runs); without an active run, in a run named ``experiment``."""
    import mlflow

    started = mlflow.active_run() is None
    if started:
        mlflow.start_run(run_name=experiment)
    try:
        claims = verdicts["claims"]
        mlflow.set_tags({f"{experiment}.{name}": v["verdict"] for name, v in claims.items()})
        mlflow.set_tags(
            {
                f"{experiment}.{name}.agrees_across_thresholds": str(v["agrees_across_thresholds"])
                for name, v in claims.items()
            }
        )
        metrics = {}
        for row in conditions_table.itertuples(index=False):
            key = f"{experiment}.{str(row.condition).replace('@', '.')}"
            metrics[f"{key}.formed_share"] = float(row.formed_share)
            if not math.isnan(row.formation_score):
                metrics[f"{key}.formation_score"] = float(row.formation_score)
            if not math.isnan(row.s_star):
                metrics[f"{key}.s_star"] = float(row.s_star)
        mlflow.log_metrics(metrics)
    finally:
        if started:
            mlflow.end_run()
