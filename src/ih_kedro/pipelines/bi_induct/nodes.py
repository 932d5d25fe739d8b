"""Thin Kedro nodes around ``ih_kedro.science.evaluation.bi_induct``; no file I/O (the catalog does it)."""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from functools import partial
from typing import Any

import numpy as np
import pandas as pd
import torch
from matplotlib.figure import Figure
from tqdm.auto import tqdm

from ih_kedro.science.data.packed import PackedTokens
from ih_kedro.science.data.tokenization import eos_token_id
from ih_kedro.science.data.variants.snippets import SEP_TOKEN
from ih_kedro.science.data.vocabulary import frequent_token_pool
from ih_kedro.science.evaluation.bi_induct import (
    checkpoint_summary,
    evaluate_checkpoint,
    make_eval_set,
    matched_compute_table,
    results_table,
    runs_with_variants,
)
from ih_kedro.science.evaluation.bi_induct_runs import span_probe_scores
from ih_kedro.science.evaluation.cache import cached, fingerprint, options_key
from ih_kedro.science.statistics.plots import bi_induct as bi_induct_plots
from ih_kedro.science.telemetry.checkpoints import list_checkpoints, load_checkpoint

logger = logging.getLogger(__name__)

CHECKPOINT_COLUMNS = ["run_name", "preset", "variant", "seed", "step", "tokens_seen", "metric",
                      "value"]  # fmt: skip


def matched_compute(sweep_manifest: pd.DataFrame) -> pd.DataFrame:
    """Fail unless every variant of one size (preset, B, C, seed) trained the same tokens and
    FLOPs; return the compute table (one row per run, with its variant label)."""
    table = matched_compute_table(sweep_manifest)
    logger.info("bi_induct: matched compute holds for %d runs", len(table))
    return table


def _sep_id(tokenizer: Any, training_params: Mapping[str, Any]) -> int:
    """The ``<|sep|>`` id, checked against the id the snippet variants trained with."""
    sep = eos_token_id(tokenizer, SEP_TOKEN)
    configured = (training_params.get("variant_options") or {}).get("bi_induct_snippets", {})
    trained = configured.get("sep_token_id")
    if trained is not None and int(trained) != sep:
        raise ValueError(
            f"bi_induct.training.variant_options.bi_induct_snippets.sep_token_id: {trained} is not "
            f"the tokenizer's {SEP_TOKEN} id {sep}"
        )
    return sep


def _evaluate_checkpoint_at(
    path: Any,
    eval_set: Any,
    params: Mapping[str, Any],
    pool: np.ndarray,
    sep: int,
    spans: list[int],
) -> dict[str, Any]:
    """One checkpoint's evaluation; with ``spans``, also its S SEP S probes of those spans
    (``span_scores``: a fixed-offset copy shows up there)."""
    model = load_checkpoint(path)
    with torch.no_grad():
        result = evaluate_checkpoint(model, eval_set, params)
    if spans:
        result = {**result, "span_scores": span_probe_scores(
            model, pool, spans, sep, n_probes=int(params.get("n_probes", 32)),
            seed=int(params.get("seed", 0)), min_layer=int(params.get("min_layer", 1)))}  # fmt: skip
    return result


def evaluate_runs(
    compute_table: pd.DataFrame,
    sweep_manifest: pd.DataFrame,
    tokenizer: Any,
    train_tokens: PackedTokens,
    validation_tokens: PackedTokens,
    params: dict[str, Any],
    training_params: dict[str, Any],
) -> tuple[pd.DataFrame, dict[str, dict[str, Any]]]:
    """Evaluate every checkpoint of every run (perplexity, ICL, probes, signatures, ablation).

    ``compute_table`` is only read to order this node after the matched-compute check.
    Returns the tidy ``checkpoint_metrics`` and ``final_evaluations`` (run -> the last
    checkpoint's per-item results, for the CIs of the results table).
    """
    if compute_table.empty:
        raise ValueError("bi_induct: the sweep has no runs")
    sep = _sep_id(tokenizer, training_params)
    eos = int(train_tokens.eos_token_id)
    pool = frequent_token_pool(np.asarray(train_tokens.tokens), train_tokens.vocab_size,
                               int(params.get("token_pool_size", 500)), exclude=(eos, sep))  # fmt: skip
    # Snippet probes at the training snippets' span unless set (a fixed-span model may copy by
    # a fixed offset, which probes of another span would not see); a [min, max] range: its mean.
    snippet_options = (training_params.get("variant_options") or {}).get("bi_induct_snippets", {})
    span = snippet_options.get("span_length")
    if isinstance(span, list | tuple):
        span = round(sum(span) / 2)
    params = {**params, "snippet_length": params.get("snippet_length") or span}
    every = int(params.get("every_nth_checkpoint", 1))
    # Each checkpoint's evaluation is kept beside it (science.evaluation.cache), keyed by these
    # options and the evaluation set: an adaptive look evaluates only its new runs.
    use_cache = bool(params.get("cache", False))
    n_validation = int(params.get("n_validation_sequences", 32))
    runs = runs_with_variants(sweep_manifest)
    eval_sets: dict[int, Any] = {}
    rows: list[dict[str, Any]] = []
    finals: dict[str, dict[str, Any]] = {}
    for run in runs.to_dict("records"):
        context = int(run["context_length"])
        if context not in eval_sets:
            validation = validation_tokens.sequences(context)[:n_validation]
            eval_sets[context] = make_eval_set(tokenizer, validation, pool, context, sep, params)
        checkpoints = list_checkpoints(run["run_dir"])
        if not checkpoints:
            raise ValueError(f"run {run['run_name']}: no checkpoints under {run['run_dir']}")
        chosen = checkpoints[::every]
        if chosen[-1] is not checkpoints[-1]:
            chosen.append(checkpoints[-1])
        # The final model on S SEP S probes of several spans (its evaluation's span_scores).
        spans = [int(s) for s in params.get("span_probe_spans") or [] if 2 * int(s) + 1 <= context]
        key = fingerprint(options_key(params), eval_sets[context], pool, sep, spans)
        for index, (step, path, tokens_seen) in enumerate(
            tqdm(chosen, desc=f"bi_induct {run['run_name']}")
        ):
            final = index == len(chosen) - 1
            evaluate = partial(_evaluate_checkpoint_at, path, eval_sets[context], params, pool,
                               sep, spans if final else [])  # fmt: skip
            result = cached(path, f"{key}:{final}", evaluate) if use_cache else evaluate()
            span_scores = result.pop("span_scores", None) if final else None
            base = {"run_name": run["run_name"], "preset": run["preset"],
                    "variant": run["variant"], "seed": int(run["seed"]), "step": int(step),
                    "tokens_seen": float(tokens_seen)}  # fmt: skip
            for metric, value in checkpoint_summary(result).items():
                rows.append({**base, "metric": metric, "value": float(value)})
            finals[run["run_name"]] = {**result, "step": int(step)}
            if span_scores is not None:
                finals[run["run_name"]]["span_scores"] = span_scores
        repeated = getattr(eval_sets[context], "repeated", None)  # (n, 2L) repeated probes
        if repeated is not None:
            finals[run["run_name"]]["repeated_length"] = int(repeated.shape[1]) // 2
    return pd.DataFrame(rows, columns=CHECKPOINT_COLUMNS), finals


def build_results_table(
    final_evaluations: dict[str, dict[str, Any]],
    compute_table: pd.DataFrame,
    params: dict[str, Any],
) -> pd.DataFrame:
    """The paper-form table (science ``results_table``) with matched-compute columns."""
    table = results_table(final_evaluations, compute_table, params.get("results", {}) | {
        "shots": params.get("shots", (1, 10)),
        "ablation_modes": params.get("ablation_modes", ("zero", "pattern_preserving")),
    })  # fmt: skip
    not_estimable = table[~table["estimable"]]
    if len(not_estimable):
        logger.warning(
            "bi_induct: %d ablation rows not estimable (no induction heads formed in %s)",
            len(not_estimable), sorted(set(not_estimable["variant"])),
        )  # fmt: skip
    return table


def plot_signatures(head_scores: pd.DataFrame, sweep_manifest: pd.DataFrame) -> Figure:
    """Best head's induction and anti-induction score over training per variant
    (``statistics.plots.bi_induct``, the variants read from the run names)."""
    return bi_induct_plots.plot_signatures(head_scores, runs_with_variants(sweep_manifest))


def plot_ablation_over_training(checkpoint_metrics: pd.DataFrame) -> Figure:
    """Excess relative drop of the ablated top heads over training per variant."""
    return bi_induct_plots.plot_ablation_over_training(checkpoint_metrics)


def plot_perplexity_gap(checkpoint_metrics: pd.DataFrame, params: dict[str, Any]) -> Figure:
    """Perplexity minus the ``results.baseline_variant``'s (default ``natural``) over training."""
    baseline = str(params.get("results", {}).get("baseline_variant", "natural"))
    return bi_induct_plots.plot_perplexity_gap(checkpoint_metrics, baseline)


def log_bi_induct_to_mlflow(
    results_table: pd.DataFrame, checkpoint_metrics: pd.DataFrame, sweep_manifest: pd.DataFrame
) -> None:
    """Log the results (active run: ``bi_induct/<preset>/<variant>/<metric>``) and each run's
    checkpoint metrics into its own nested run (``bi_induct/<metric>`` by step). The table and
    figures themselves are MLflow artifacts through the catalog (``MlflowArtifactDataset``)."""
    import mlflow

    started = mlflow.active_run() is None
    if started:
        mlflow.start_run(run_name="bi_induct")
    try:
        values = {}
        for row in results_table.itertuples(index=False):
            for column in ("value", "diff_vs_natural"):
                value = float(getattr(row, column))
                if math.isfinite(value):
                    suffix = "" if column == "value" else "/diff_vs_natural"
                    values[f"bi_induct/{row.preset}/{row.variant}/{row.metric}{suffix}"] = value
        if values:
            mlflow.log_metrics(values)
    finally:
        if started:
            mlflow.end_run()
    for run in sweep_manifest.itertuples(index=False):
        run_id = getattr(run, "mlflow_run_id", None)
        if not isinstance(run_id, str) or not run_id:
            continue
        rows = checkpoint_metrics[checkpoint_metrics["run_name"] == run.run_name]
        try:
            with mlflow.start_run(run_id=run_id, nested=True):
                for step, group in rows.groupby("step"):
                    metrics = {f"bi_induct/{m}": float(v) for m, v in zip(group["metric"],
                               group["value"], strict=True) if math.isfinite(float(v))}  # fmt: skip
                    mlflow.log_metrics(metrics, step=int(step))
        except Exception as error:  # noqa: BLE001 - a missing run must not fail the pipeline
            logger.warning("run %s: MLflow logging skipped (%s)", run.run_name, error)
