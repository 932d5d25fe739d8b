"""Thin Kedro nodes: the per-run table, the five claims, the span-probe check, load-bearing-ness.

The science is in ``ih_kedro.science.evaluation.bi_induct_runs`` (per-run numbers) and
``ih_kedro.science.statistics.bi_induct_claims`` (the rules); no file I/O here.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from ih_kedro.adaptive_seeds import look_command
from ih_kedro.science.evaluation.bi_induct import runs_with_variants
from ih_kedro.science.evaluation.bi_induct_runs import (
    load_bearing_curves,
    run_table,
    span_probe_table,
)
from ih_kedro.science.statistics.base_calibration import base_label
from ih_kedro.science.statistics.bi_induct_claims import claims_table, decide_claims
from ih_kedro.science.statistics.paired_seeds import json_safe
from ih_kedro.science.statistics.plots import bi_induct as bi_induct_plots
from ih_kedro.science.statistics.sequential_claims import (
    BI_INDUCT_CLAIMS,
    attach_bi_induct_looks,
    bi_induct_sequential,
)

logger = logging.getLogger(__name__)

VERDICT_CODES = {"contradicted": -1.0, "undecided": 0.0, "supported": 1.0}
"""MLflow metrics are numbers: a verdict is logged as -1 / 0 / +1 (and as a tag in words)."""


def build_run_table(
    final_evaluations: dict[str, dict[str, Any]],
    compute_table: pd.DataFrame,
    checkpoint_metrics: pd.DataFrame,
    emergence_table: pd.DataFrame,
    params: dict[str, Any],
) -> pd.DataFrame:
    """One row per (arm, seed): what the claims compare (``bi_induct_runs.run_table``)."""
    table = run_table(final_evaluations, compute_table, checkpoint_metrics, emergence_table,
                      params.get("results", {}))  # fmt: skip
    base = str(params.get("claims", {}).get("base_arm", "minimally_enriched"))
    unformed = table[(table["variant"] == base) & ~table["heads_formed"].astype(bool)]
    if len(unformed):
        logger.warning("bi_induct: the base arm %s formed no induction head in seeds %s",
                       base, sorted(unformed["seed"]))  # fmt: skip
    return table


def base_arm_description(params: Mapping[str, Any], training: Mapping[str, Any]) -> dict:
    """The base arm as the report names it: ``{arm, variant, options, label}``; a
    ``fixed_rate_copies`` base is "natural, minimally enriched (one copy per N tokens)"."""
    arm = str(params.get("claims", {}).get("base_arm", "minimally_enriched"))
    shared = training.get("variant_options") or {}
    for given in training.get("data_variants") or []:
        entry = {"variant": given, "label": given} if isinstance(given, str) else dict(given)
        if str(entry.get("label", entry["variant"])) != arm:
            continue
        variant = str(entry["variant"])
        options = {**dict(shared.get(variant) or {}), **dict(entry.get("options") or {})}
        label = (base_label(float(options["tokens_per_event"]))
                 if variant == "fixed_rate_copies" and "tokens_per_event" in options
                 else variant)  # fmt: skip
        return {"arm": arm, "variant": variant, "options": options, "label": label}
    raise ValueError(
        f"bi_induct.evaluation.claims.base_arm: {arm!r} is not a label of "
        "bi_induct.training.data_variants"
    )


def decide_bi_induct_claims(
    runs_table: pd.DataFrame, params: dict[str, Any], training: dict[str, Any] | None = None
) -> tuple[dict[str, Any], pd.DataFrame]:
    """The five claims (``claims.json``) and their one-row-per-(claim, arm) table.

    ``training`` (the sweep's parameters) names the base arm in ``claims["base"]``
    (:func:`base_arm_description`).

    With ``adaptive_seeds`` set, the claims it lists (default 2 and 4) are also judged look by
    look (``science.statistics.sequential_claims``): their looks go into each claim's
    ``sequential`` entry, the plan and the seeds the next look needs into
    ``claims["sequential"]`` (with the command that trains them); ``adaptive_seeds.enabled``
    makes the sequential verdict the claim's verdict.
    """
    decided = decide_claims(runs_table, params.get("claims"))
    if training is not None:
        decided["base"] = base_arm_description(params, training)
        logger.info("bi_induct: base arm %s", decided["base"]["label"])
    adaptive = params.get("adaptive_seeds")
    if adaptive:
        sequential = bi_induct_sequential(runs_table, params.get("claims"), adaptive,
                                          claims=adaptive.get("claims") or BI_INDUCT_CLAIMS)  # fmt: skip
        attach_bi_induct_looks(decided, sequential, replace=bool(adaptive.get("enabled")))
        following = decided["sequential"]["next_look"]
        if following:
            following["command"] = look_command("bi_induct", following)
            logger.info("bi_induct: undecided claims need seeds %s (%s)",
                        following["add_seeds"], following["command"])  # fmt: skip
    for claim in decided["claims"]:
        logger.info("bi_induct claim %s (%s): %s - %s", claim["id"], claim["arm"],
                    claim["verdict"], claim["reason"])  # fmt: skip
    return json_safe(decided), claims_table(decided)


def build_span_probe_table(
    final_evaluations: dict[str, dict[str, Any]], sweep_manifest: pd.DataFrame
) -> pd.DataFrame:
    """Final models on snippet probes of several spans and on repeated random tokens."""
    return span_probe_table(final_evaluations, runs_with_variants(sweep_manifest))


def plot_load_bearing(checkpoint_metrics: pd.DataFrame, params: dict[str, Any]) -> Figure:
    """The ablation drop of copy accuracy (top-2 % vs random heads) over training per arm."""
    results = params.get("results", {})
    curves = load_bearing_curves(checkpoint_metrics, "copy",
                                 str(results.get("load_bearing_mode", "zero")),
                                 float(results.get("load_bearing_min_copy_gain", 0.1)))  # fmt: skip
    base = str(params.get("claims", {}).get("base_arm", "minimally_enriched"))
    return bi_induct_plots.plot_load_bearing(curves, base)


def log_claims_to_mlflow(claims: dict[str, Any], runs_table: pd.DataFrame) -> None:
    """Each claim's verdict (metric -1/0/+1 and tag), estimate and CI into the active run:
    ``bi_induct/claims/<claim>/<arm>/{verdict,estimate,ci_low,ci_high}``; the load-bearing step
    per run into the same run as ``bi_induct/load_bearing_step/<run>``."""
    import mlflow

    started = mlflow.active_run() is None
    if started:
        mlflow.start_run(run_name="bi_induct")
    try:
        metrics: dict[str, float] = {}
        for claim in claims["claims"]:
            for entry in [claim, *claim.get("other_arms", {}).values()]:
                key = f"bi_induct/claims/{claim['id']}/{entry['arm']}"
                mlflow.set_tag(key, entry["verdict"])
                metrics[f"{key}/verdict"] = VERDICT_CODES[entry["verdict"]]
                numbers = entry.get("difference") or entry
                for name in ("mean", "ci_low", "ci_high"):
                    value = numbers.get(name)
                    if value is not None and math.isfinite(float(value)):
                        metrics[f"{key}/{'estimate' if name == 'mean' else name}"] = float(value)
        for row in runs_table.itertuples(index=False):
            if math.isfinite(float(row.load_bearing_step)):
                metrics[f"bi_induct/load_bearing_step/{row.run_name}"] = float(
                    row.load_bearing_step
                )
        mlflow.log_metrics(metrics)
    finally:
        if started:
            mlflow.end_run()
