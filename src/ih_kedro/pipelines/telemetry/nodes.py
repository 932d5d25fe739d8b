"""Thin Kedro nodes around ``ih_kedro.science.telemetry``; no file I/O (the catalog does it)."""

from __future__ import annotations

import logging
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from tqdm.auto import tqdm
from transformers import AutoConfig

from ih_kedro.science.data.packed import PackedTokens
from ih_kedro.science.data.vocabulary import frequent_token_pool
from ih_kedro.science.statistics.plots import telemetry as telemetry_plots
from ih_kedro.science.telemetry.checkpoint_scores import score_checkpoint
from ih_kedro.science.telemetry.checkpoints import list_checkpoints, load_checkpoint
from ih_kedro.science.telemetry.emergence_table import detect_emergence_table, validate_min_layers
from ih_kedro.science.telemetry.probes import (
    REFERENCE_PROBE_LENGTH,
    ProbeSet,
    default_probe_length,
    uniform_token_pool,
)
from ih_kedro.science.telemetry.probes import make_probe_set as build_probe_set

logger = logging.getLogger(__name__)

HEAD_COLUMNS = ["run_name", "step", "tokens_seen", "layer", "head", "metric", "value", "sd",
                "probe_source", "probe_length"]  # fmt: skip
MODEL_COLUMNS = ["run_name", "step", "tokens_seen", "metric", "value", "sd", "probe_source",
                 "probe_length"]  # fmt: skip
SAMPLE_METRICS = (
    "prefix_matching",
    "prefix_matching_by_parity",
    "associative_recall",
    "repeated_loss_drop",
)


def make_probe_set(train_tokens: PackedTokens, params: dict[str, Any]) -> ProbeSet:
    """The fixed probe set: repeated probes plus Bi-Induct variants (SEP = ``sep_token_id``,
    default EOS).

    ``params["probe"]``: ``n_samples``, ``length`` (null: the longest reference length 50;
    every run of a sweep uses the same ``min(50, min(C) // 2)`` of it), ``source``
    (``frequent`` | ``uniform``), ``top_k``, ``seed``, ``snippet_length`` (the snippet probes'
    span; null: the probe length).
    """
    probe = params["probe"]
    eos = int(train_tokens.eos_token_id)
    special = train_tokens.non_content_token_ids  # EOS (+ a compact vocabulary's other id)
    vocab = int(probe.get("vocab_size") or train_tokens.vocab_size)
    if probe["source"] == "frequent":
        pool = frequent_token_pool(train_tokens.tokens, vocab, int(probe["top_k"]), exclude=special)
    elif probe["source"] == "uniform":
        pool = uniform_token_pool(vocab, exclude=special)
    else:
        raise ValueError(
            f"telemetry.probe.source must be 'frequent' or 'uniform', got {probe['source']!r}"
        )
    # The snippet probes' separator: the tokenizer's <|sep|> id when given, else EOS.
    sep = eos if probe.get("sep_token_id") is None else int(probe["sep_token_id"])
    pool = pool[pool != sep]
    length = int(probe.get("length") or min(REFERENCE_PROBE_LENGTH, len(pool)))
    snippet = probe.get("snippet_length")
    return build_probe_set(pool, int(probe["n_samples"]), length, int(probe["seed"]),
                           probe["source"], sep_token=sep,
                           snippet_length=None if snippet is None else int(snippet))  # fmt: skip


def sweep_probe_length(probe_set: ProbeSet, params: dict[str, Any], contexts: list[int]) -> int:
    """One probe half-length ``L`` for every run of a sweep.

    ``telemetry.probe.length`` when set, else ``min(50, min(C) // 2)`` over the sweep's context
    lengths: the prefix-matching baseline, associative recall and the threshold's difficulty
    then do not change with ``C``, the term the law estimates. Raises naming the parameter when
    a run's context cannot hold the probe twice.
    """
    if not contexts:
        return probe_set.length
    fixed = params["probe"].get("length")
    length = int(fixed) if fixed else default_probe_length(min(contexts))
    if 2 * length > min(contexts):
        raise ValueError(
            f"telemetry.probe.length: {length} tokens twice exceed the smallest context length "
            f"{min(contexts)} of the sweep"
        )
    return min(length, probe_set.length)


def _run_probes(probe_set: ProbeSet, length: int, context_length: int) -> ProbeSet:
    """The run's probes of length ``L``; snippets (``2L + 1`` tokens) shortened by one if needed."""
    probes = probe_set.with_length(length)
    if probes.variants and 2 * length + 1 > context_length:
        shorter = probe_set.with_length(max(1, (context_length - 1) // 2))
        probes = replace(probes, variants=shorter.variants)
    return probes


def score_checkpoints(
    sweep_manifest: pd.DataFrame,
    probe_set: ProbeSet,
    validation_tokens: PackedTokens | None,
    params: dict[str, Any],
) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, dict[str, np.ndarray]]]:
    """Score every checkpoint of every run in the manifest.

    Every run is probed with the same half-length ``L`` (:func:`sweep_probe_length`), recorded
    in the ``probe_length`` column of every score and in ``score_samples`` (the Bi-Induct
    ``*_snippet`` metrics: the snippet span, ``telemetry.probe.snippet_length``).

    Returns tidy ``head_scores`` and ``model_scores`` and ``score_samples``:
    ``{run_name: {"steps": (K,), "tokens": (K,), "prefix_matching": (K, n, layers, heads),
    "associative_recall": (K, n), "repeated_loss_drop": (K, n), "probe_length": ()}}``.
    """
    head_rows: list[dict[str, Any]] = []
    model_rows: list[dict[str, Any]] = []
    samples: dict[str, dict[str, np.ndarray]] = {}
    n_validation = int(params.get("n_validation_sequences", 128))
    probe_length = sweep_probe_length(
        probe_set, params, [int(c) for c in sweep_manifest.get("context_length", [])]
    )
    logger.info("telemetry: probe half-length L = %d for every run", probe_length)
    for run in sweep_manifest.itertuples(index=False):
        checkpoints = list_checkpoints(run.run_dir)
        if not checkpoints:
            logger.warning("run %s: no checkpoints under %s", run.run_name, run.run_dir)
            continue
        context_length = int(run.context_length)
        probes = _run_probes(probe_set, probe_length, context_length)
        validation = None
        if validation_tokens is not None and n_validation > 0:
            validation = np.asarray(validation_tokens.sequences(context_length)[:n_validation])
        per_run: dict[str, list] = {"steps": [], "tokens": [], **{m: [] for m in SAMPLE_METRICS}}
        for step, path, tokens_seen in tqdm(checkpoints, desc=f"telemetry {run.run_name}"):
            model = load_checkpoint(path)
            heads, models, per_sample = score_checkpoint(
                model, probes, validation, batch_size=int(params["batch_size"]),
                top_fraction=float(params.get("top_fraction", 0.02)),
                min_layer=int(params.get("min_layer", 1)), run_name=run.run_name, step=step,
                tokens_seen=tokens_seen,
            )  # fmt: skip
            snippet = probes.snippet_length or probes.length  # Bi-Induct variants' span
            for row in heads:
                is_snippet = row["metric"].endswith("_snippet")
                head_rows.append({**row, "probe_length": snippet if is_snippet else probes.length})
            model_rows.extend({**row, "probe_length": probes.length} for row in models)
            per_run["steps"].append(step)
            per_run["tokens"].append(tokens_seen)
            for metric in SAMPLE_METRICS:
                per_run[metric].append(per_sample[metric])
        samples[run.run_name] = {key: np.stack(values) for key, values in per_run.items()}
        samples[run.run_name]["probe_length"] = np.asarray(probes.length)
    head_scores = pd.DataFrame(head_rows, columns=HEAD_COLUMNS)
    model_scores = pd.DataFrame(model_rows, columns=MODEL_COLUMNS)
    return head_scores, model_scores, samples


def emergence_specs(params: dict[str, Any]) -> list[dict[str, Any]]:
    """Expand ``telemetry.emergence`` into one spec per (metric, method)."""
    config = params["emergence"]
    specs = []
    for metric_spec in config["metrics"]:
        for method in config["methods"]:
            specs.append({**metric_spec, "method": method,
                          "n_bootstrap": int(config.get("n_bootstrap", 200)),
                          "seed": int(config.get("seed", 0)), "ci": float(config.get("ci", 0.95))})  # fmt: skip
    return specs


def detect_emergence(
    score_samples: dict[str, dict[str, np.ndarray]],
    sweep_manifest: pd.DataFrame,
    params: dict[str, Any],
) -> pd.DataFrame:
    """The emergence table (``science.telemetry.emergence_table.detect_emergence_table``)."""
    return detect_emergence_table(score_samples, sweep_manifest, emergence_specs(params))


def _mlflow_metric_frames(head_scores: pd.DataFrame, model_scores: pd.DataFrame) -> pd.DataFrame:
    model = model_scores[~model_scores["metric"].str.startswith("loss_pos_")]
    model = model[["run_name", "step", "metric", "value"]].copy()
    model["metric"] = "telemetry/" + model["metric"]
    best = head_scores.groupby(["run_name", "step", "metric"], as_index=False)["value"].max()
    best["metric"] = "telemetry/max_head/" + best["metric"]
    return pd.concat([model, best], ignore_index=True)


def log_telemetry_to_mlflow(
    head_scores: pd.DataFrame, model_scores: pd.DataFrame, sweep_manifest: pd.DataFrame
) -> None:
    """Log step-indexed telemetry into each run's MLflow run (by ``mlflow_run_id``).

    Model metrics and, per head metric, the best head's value; runs without an id (or whose
    id is unknown to the tracking store) are skipped with a log line.
    """
    import mlflow

    metrics = _mlflow_metric_frames(head_scores, model_scores)
    for run in sweep_manifest.itertuples(index=False):
        run_id = getattr(run, "mlflow_run_id", None)
        if not isinstance(run_id, str) or not run_id:
            logger.info("run %s has no mlflow_run_id: telemetry not logged", run.run_name)
            continue
        rows = metrics[metrics["run_name"] == run.run_name]
        try:
            with mlflow.start_run(run_id=run_id, nested=True):
                for step, group in rows.groupby("step"):
                    values = {m: float(v) for m, v in zip(group["metric"], group["value"], strict=True)
                              if math.isfinite(float(v))}  # fmt: skip
                    mlflow.log_metrics(values, step=int(step))
        except Exception as error:  # noqa: BLE001 - a missing run must not fail the pipeline
            logger.warning("run %s: MLflow logging skipped (%s)", run.run_name, error)


def plot_prefix_matching_over_training(head_scores: pd.DataFrame) -> Figure:
    """Per-head prefix-matching score over tokens seen (``statistics.plots.telemetry``)."""
    return telemetry_plots.plot_prefix_matching_over_training(head_scores)


def plot_head_heatmaps(head_scores: pd.DataFrame, params: dict[str, Any]) -> Figure:
    """Layer x head prefix-matching heatmaps per run at ``params["heatmap_steps"]`` (null: each
    run's first, middle and last step; ``statistics.plots.telemetry``)."""
    return telemetry_plots.plot_head_heatmaps(head_scores, params.get("heatmap_steps"))


def discover_external_checkpoints(params: dict[str, Any]) -> pd.DataFrame:
    """A ``sweep_manifest``-like frame for a local folder of HF checkpoint folders.

    ``telemetry.external_checkpoints`` is a folder of ``step*`` checkpoint folders (one run),
    or a folder of such folders (one run each). ``context_length`` comes from
    ``telemetry.external_context_length`` or the first checkpoint's config.
    """
    root = params.get("external_checkpoints")
    if not root:
        raise ValueError("telemetry.external_checkpoints: set it to a folder of HF checkpoints")
    root = Path(root)
    if not root.is_dir():
        raise ValueError(f"telemetry.external_checkpoints: {root} is not a folder")
    # {run folder: its checkpoints}; the checkpoints module registers our model with Auto*.
    runs = {root: list_checkpoints_safe(root)}
    if not runs[root]:
        runs = {p: list_checkpoints_safe(p) for p in sorted(root.iterdir()) if p.is_dir()}
    runs = {run_dir: found for run_dir, found in runs.items() if found}
    if not runs:
        raise ValueError(f"telemetry.external_checkpoints: no HF checkpoint folders in {root}")
    rows = []
    for run_dir, found in runs.items():
        config = AutoConfig.from_pretrained(str(found[0][1]))
        n_layers = getattr(config, "n_layer", None) or getattr(config, "num_hidden_layers", None)
        if n_layers:  # min_layer beyond the model fails here, before any scoring
            validate_min_layers(int(n_layers), params)
        context = params.get("external_context_length") or getattr(
            config, "max_position_embeddings", getattr(config, "n_positions", 512)
        )
        rows.append({"run_name": run_dir.name, "run_dir": str(run_dir.resolve()),
                     "mlflow_run_id": None, "context_length": int(context),
                     "preset": config.model_type})  # fmt: skip
    return pd.DataFrame(rows)


def list_checkpoints_safe(folder: Path) -> list:
    """``list_checkpoints`` that returns [] for folders without checkpoints."""
    try:
        return list_checkpoints(folder)
    except ValueError:
        return []
