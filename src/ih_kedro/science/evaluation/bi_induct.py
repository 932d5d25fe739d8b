"""Bi-Induct (Study 2): evaluation at every checkpoint, matched compute, the results table.

At each checkpoint of each run (:func:`evaluate_checkpoint`):

- held-out **perplexity** and the **ICL score** (loss at a late minus an early token, nats;
  negative means in-context learning) on validation sequences (the MD5 split);
- **function-vector probe accuracy** at 1 and 10 shots (:mod:`ih_kedro.science.evaluation.function_vectors`);
- **in-context copy accuracy** on held-out natural text and its chance level
  (:mod:`ih_kedro.science.evaluation.in_context_copy`), the ICL measure the tiny models can do;
- the **induction score** of every head (prefix matching on repeated random-token probes) and
  the **anti-induction score** (attention to the token before the previous occurrence, on
  ``S ‖ SEP ‖ reverse(S)`` probes);
- **causal ablation** of the top induction heads, ``zero`` and ``pattern_preserving``
  (:mod:`ih_kedro.science.telemetry.ablation`), against ``n_controls`` draws of as many random
  heads per layer: relative drop in copy accuracy, ICL benefit (``-icl_score``) and 10-shot
  probe accuracy (``ablation_metrics``, default all three).

**Top 2% per layer** (the paper does not define it): in every layer, the
``max(1, ceil(0.02 · n_heads))`` heads with the highest induction score; with 4–50 heads per
layer that is exactly one head per layer. The random control draws the same number of heads
in each layer from the remaining heads.

Everything keeps the per-item values (per sequence, prompt or probe), so
:func:`results_table` gives bootstrap CIs over items, pooled over seeds, and paired
differences against the natural-only baseline on the same items.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import nn

from ih_kedro.science.evaluation.function_vectors import (
    EncodedPrompts,
    build_prompts,
    encode_prompts,
    generate_tasks,
    prompt_correct,
)
from ih_kedro.science.evaluation.in_context_copy import copy_accuracy, copy_probes
from ih_kedro.science.telemetry.ablation import ablate_heads, all_heads, random_head_control
from ih_kedro.science.telemetry.probes import snippet_probes
from ih_kedro.science.telemetry.scores import best_head_samples as _best_head_samples
from ih_kedro.science.telemetry.scores import (
    head_pattern_scores,
    icl_score,
    loss_by_position,
    top_heads,
)

logger = logging.getLogger(__name__)

ABLATION_METRICS = ("copy", "icl", "probe")
"""Copy accuracy, ICL benefit (``-icl_score``), 10-shot probe accuracy."""
NOT_ESTIMABLE = "not estimable"
SIZE_COLUMNS = ["preset", "batch_size", "context_length", "seed"]
"""The columns of one model size: its variants must train with the same compute."""


class MatchedComputeError(ValueError):
    """Variants of one model size saw different tokens or FLOPs."""


def check_matched_compute(manifest: pd.DataFrame, size_columns: Sequence[str]) -> pd.DataFrame:
    """Raise :class:`MatchedComputeError` unless every variant of a size saw the same compute.

    A size is a group of ``size_columns`` (preset, batch size, context, seed): within each, all
    runs must have equal ``steps_trained``, ``tokens_seen`` and ``flops``. Returns the
    compute table: one row per run with those columns.
    """
    columns = [*size_columns, "run_name", "data_variant", "steps_trained", "tokens_seen", "flops"]
    missing = [c for c in columns if c not in manifest.columns]
    if missing:
        raise MatchedComputeError(f"sweep_manifest: missing columns {missing}")
    table = manifest[columns].copy()
    for key, group in table.groupby(list(size_columns), dropna=False):
        for column in ("steps_trained", "tokens_seen", "flops"):
            values = group[column].astype(float)
            if not np.allclose(values, values.iloc[0], rtol=1e-9, atol=0):
                detail = ", ".join(
                    f"{r}: {v:g}" for r, v in zip(group["run_name"], values, strict=True)
                )
                raise MatchedComputeError(
                    f"matched compute violated for {dict(zip(size_columns, np.atleast_1d(key), strict=True))}: "
                    f"{column} differs between variants ({detail}). Every variant of one size "
                    "must train the same steps (turn off training.online_emergence.early_stop)"
                )
    return table.reset_index(drop=True)


def variant_label(run: Mapping[str, Any]) -> str:
    """The grid label of a run from its name ``<preset>_B<B>_C<C>_<label>_s<seed>``."""
    prefix = f"{run['preset']}_B{run['batch_size']}_C{run['context_length']}_"
    suffix = f"_s{run['seed']}"
    name = str(run["run_name"])
    if not (name.startswith(prefix) and name.endswith(suffix)):
        raise ValueError(
            f"sweep_manifest: run name {name!r} does not follow {prefix}<label>{suffix}"
        )
    return name[len(prefix) : -len(suffix)]


def runs_with_variants(sweep_manifest: pd.DataFrame) -> pd.DataFrame:
    """A copy of the sweep manifest with each run's ``variant`` label (:func:`variant_label`)."""
    runs = sweep_manifest.copy()
    runs["variant"] = [variant_label(row) for row in runs.to_dict("records")]
    return runs


def matched_compute_table(sweep_manifest: pd.DataFrame) -> pd.DataFrame:
    """The compute table of :func:`check_matched_compute` over :data:`SIZE_COLUMNS` (raises
    :class:`MatchedComputeError` unless every variant of a size trained the same tokens and
    FLOPs), with each run's ``variant`` label as its second column."""
    table = check_matched_compute(sweep_manifest, SIZE_COLUMNS)
    table.insert(1, "variant", runs_with_variants(sweep_manifest)["variant"].to_numpy())
    return table


@dataclass
class EvalSet:
    """The fixed evaluation inputs of one context length.

    ``validation`` (n, C+1) held-out sequences; ``prompts`` shots -> encoded probe prompts;
    ``repeated`` (n, 2L) repeated random-token probes; ``snippet`` (n, 2l+1) ``S ‖ SEP ‖ S``
    and ``anti`` (n, 2l+1) ``S ‖ SEP ‖ reverse(S)`` probes from the first ``l`` tokens of the
    same halves, ``l`` the snippet span (the training snippets' ``span_length``); ``copy``
    (n_val, 2L') copy probes ``x ‖ x`` of the validation sequences' first ``L'`` tokens
    (None: no copy accuracy).
    """

    validation: np.ndarray
    prompts: dict[int, EncodedPrompts]
    repeated: torch.Tensor
    anti: torch.Tensor
    snippet: torch.Tensor | None = None
    copy: torch.Tensor | None = None


def make_eval_set(
    tokenizer: Any,
    validation_sequences: np.ndarray,
    token_pool: np.ndarray,
    context_length: int,
    sep_token_id: int,
    options: Mapping[str, Any],
) -> EvalSet:
    """Build the evaluation inputs (deterministic in ``options['seed']``).

    ``options['copy_length']``: half length ``L'`` of the copy probes (default ``C // 2``;
    ``0`` turns copy accuracy off).
    """
    seed = int(options.get("seed", 0))
    tasks = generate_tasks(int(options.get("n_words", 500)), seed=seed)
    prompts = {
        int(k): encode_prompts(
            build_prompts(tasks, int(k), int(options.get("n_prompts_per_task", 16)), seed),
            tokenizer,
            context_length,
        )
        for k in options.get("shots", (1, 10))
    }
    length = int(options.get("probe_length") or min(50, (context_length - 1) // 2))
    span = int(options.get("snippet_length") or length)
    if not 0 < span <= length:
        raise ValueError(
            f"bi_induct.evaluation.snippet_length: must be in [1, {length}] (the probe length), "
            f"got {span}"
        )
    n_probes = int(options.get("n_probes", 64))
    rng = np.random.default_rng(seed)
    halves = torch.as_tensor(
        np.stack([rng.choice(token_pool, size=length, replace=False) for _ in range(n_probes)])
    ).long()  # (n, L)
    spans = halves[:, :span]  # (n, l)
    copy_length = options.get("copy_length")
    copy_length = context_length // 2 if copy_length is None else int(copy_length)
    if copy_length and 2 * copy_length > context_length:
        raise ValueError(
            f"bi_induct.evaluation.copy_length: 2 x {copy_length} tokens exceed the context "
            f"length {context_length}"
        )
    return EvalSet(
        validation=np.asarray(validation_sequences),
        prompts=prompts,
        repeated=torch.cat([halves, halves], dim=1),  # (n, 2L)
        anti=snippet_probes(spans, int(sep_token_id), reverse=True),  # (n, 2l+1)
        snippet=snippet_probes(spans, int(sep_token_id)),  # (n, 2l+1)
        copy=copy_probes(validation_sequences, copy_length) if copy_length else None,
    )


def item_metrics(
    model: nn.Module, eval_set: EvalSet, shots: Sequence[int] | None = None, batch_size: int = 32
) -> dict[str, np.ndarray]:
    """Per-item values: ``loss`` and ``icl`` (n_val,), ``copy`` and ``copy_first`` (n_val,,
    when the set has copy probes), ``probe_<k>shot`` (n_prompts,)."""
    losses = loss_by_position(model, eval_set.validation, batch_size=batch_size)  # (n, C)
    out = {
        "loss": losses.mean(1).numpy().astype(float),
        "icl": icl_score(losses).numpy().astype(float),
    }
    copy = getattr(eval_set, "copy", None)
    if copy is not None:
        out.update(copy_accuracy(model, copy, batch_size))
    for k in shots if shots is not None else sorted(eval_set.prompts):
        out[f"probe_{k}shot"] = prompt_correct(model, eval_set.prompts[k], batch_size)
    return out


def head_scores(model: nn.Module, eval_set: EvalSet, batch_size: int = 32) -> dict[str, Any]:
    """Per-head scores per probe sample, ``{name: (n, layers, heads)}``: ``induction``
    (prefix matching on repeated probes), ``anti_induction`` (on ``S ‖ SEP ‖ reverse(S)``) and,
    when the set has them, ``snippet_induction`` (induction on ``S ‖ SEP ‖ S`` snippets)."""
    induction = head_pattern_scores(model, eval_set.repeated, batch_size, repeated=True)
    anti = head_pattern_scores(model, eval_set.anti, batch_size, repeated=False)
    out = {
        "induction": induction["prefix_matching"],  # (n, layers, heads)
        "anti_induction": anti["anti_induction"],  # (n, layers, heads)
    }
    if eval_set.snippet is not None:
        snippet = head_pattern_scores(model, eval_set.snippet, batch_size, repeated=False)
        out["snippet_induction"] = snippet["induction"]  # (n, layers, heads)
    return out


def best_head_samples(samples: torch.Tensor, min_layer: int = 1) -> np.ndarray:
    """Per-sample score of the head with the best mean in layers ``>= min_layer``, ``(n,)``."""
    return _best_head_samples(samples, min_layer).numpy().astype(float)


def top_induction_heads(induction_mean: torch.Tensor, fraction: float = 0.02) -> list[tuple]:
    """Top ``max(1, ceil(fraction · heads))`` heads per layer by mean induction score."""
    return top_heads(induction_mean, fraction, per_layer=True)


def relative_drop(base: np.ndarray, ablated: np.ndarray) -> float:
    """``(mean(base) − mean(ablated)) / |mean(base)|``; NaN when the baseline is 0."""
    b = float(np.mean(base))
    return (b - float(np.mean(ablated))) / abs(b) if b != 0 else float("nan")


def _ablation_items(
    values: dict[str, np.ndarray], shots: int, metrics: Sequence[str]
) -> dict[str, np.ndarray]:
    """The per-item values each ablation metric compares (higher = better)."""
    sources = {"copy": "copy", "icl": "icl", "probe": f"probe_{shots}shot"}
    return {m: -values["icl"] if m == "icl" else values[sources[m]] for m in metrics}


def _ablation_metrics(eval_set: EvalSet, options: Mapping[str, Any]) -> list[str]:
    """``ablation_metrics`` (default all of :data:`ABLATION_METRICS`), without ``copy`` when the
    set has no copy probes."""
    metrics = list(options.get("ablation_metrics") or ABLATION_METRICS)
    unknown = sorted(set(metrics) - set(ABLATION_METRICS))
    if unknown:
        raise ValueError(
            f"bi_induct.evaluation.ablation_metrics: {unknown} are not in {ABLATION_METRICS}"
        )
    has_copy = getattr(eval_set, "copy", None) is not None
    return [m for m in metrics if m != "copy" or has_copy]


def evaluate_checkpoint(
    model: nn.Module, eval_set: EvalSet, options: Mapping[str, Any]
) -> dict[str, Any]:
    """Everything measured at one checkpoint (per-item arrays; see the module docstring).

    Options: ``top_fraction`` (0.02), ``ablation_modes`` (zero, pattern_preserving),
    ``ablation_metrics`` (copy, icl, probe), ``ablation_min_layer`` (0: the top heads of every
    layer), ``n_controls`` (3), ``control_seed`` (0), ``ablation_shots`` (10), ``batch_size``
    (32), ``min_layer`` (1).
    """
    batch_size = int(options.get("batch_size", 32))
    shots = int(options.get("ablation_shots", 10))
    metrics = _ablation_metrics(eval_set, options)
    ablated_shots = [shots] if "probe" in metrics else []
    base = item_metrics(model, eval_set, batch_size=batch_size)
    scores = head_scores(model, eval_set, batch_size)
    induction_mean = torch.nanmean(scores["induction"].float(), 0)  # (layers, heads)
    heads = top_induction_heads(induction_mean, float(options.get("top_fraction", 0.02)))
    # Only layers that can hold an induction head (``ablation_min_layer``, default 0): layer 0
    # has no earlier previous-token head to compose with, and a random control drawn there can
    # hit the circuit's previous-token head and mask a real effect (tests: planted model).
    first = int(options.get("ablation_min_layer", 0))
    heads = [h for h in heads if h[0] >= first] or heads
    result: dict[str, Any] = {
        "items": base,
        "induction_best": best_head_samples(scores["induction"], int(options.get("min_layer", 1))),
        "anti_induction_best": best_head_samples(
            scores["anti_induction"], int(options.get("min_layer", 1))
        ),
        **(
            {
                "snippet_induction_best": best_head_samples(
                    scores["snippet_induction"], int(options.get("min_layer", 1))
                )
            }
            if "snippet_induction" in scores
            else {}
        ),  # fmt: skip
        "induction_mean": induction_mean.numpy(),
        "ablated_heads": heads,
        "ablation": {},
    }
    everything = all_heads(model)
    n_controls = int(options.get("n_controls", 3))
    seed = int(options.get("control_seed", 0))
    controls = [
        random_head_control(everything, len(heads), exclude=heads, seed=seed + i,
                            match_layers=heads)
        for i in range(n_controls)
    ]  # fmt: skip
    for mode in options.get("ablation_modes", ("zero", "pattern_preserving")):
        with ablate_heads(model, heads, mode=mode):
            target = item_metrics(model, eval_set, shots=ablated_shots, batch_size=batch_size)
        control_items = []
        for control in controls:
            with ablate_heads(model, control, mode=mode):
                control_items.append(
                    item_metrics(model, eval_set, shots=ablated_shots, batch_size=batch_size)
                )
        result["ablation"][mode] = {
            "target": _ablation_items(target, shots, metrics),
            "controls": [_ablation_items(c, shots, metrics) for c in control_items],
            "control_heads": controls,
        }
    result["ablation_base"] = _ablation_items(base, shots, metrics)
    return result


def ablation_drops(result: Mapping[str, Any], mode: str, metric: str, idx=None) -> dict:
    """Relative drop of the top heads, mean control drop and their difference (excess)."""
    base = result["ablation_base"][metric]
    entry = result["ablation"][mode]
    pick = (lambda a: a) if idx is None else (lambda a: a[idx])
    drop = relative_drop(pick(base), pick(entry["target"][metric]))
    control = [relative_drop(pick(base), pick(c[metric])) for c in entry["controls"]]
    control_mean = float(np.mean(control)) if control else float("nan")
    return {"drop": drop, "control": control_mean, "excess": drop - control_mean}


def ablation_excess_interval(
    result: Mapping[str, Any],
    mode: str,
    metric: str,
    *,
    n_bootstrap: int = 1000,
    level: float = 0.95,
    seed: int = 0,
) -> tuple[float, float, float]:
    """One run's excess drop (top heads minus the mean random control) of ``metric`` under
    ``mode`` with its percentile bootstrap CI over the metric's probe items, ``(excess, low,
    high)`` (fractions; NaN CI when too few finite draws)."""
    n_items = len(result["ablation_base"][metric])

    def excess(idx: np.ndarray | None) -> float:
        return ablation_drops(result, mode, metric, idx)["excess"]

    return _bootstrap(excess, n_items, int(n_bootstrap), float(level), int(seed))


def checkpoint_summary(result: Mapping[str, Any]) -> dict[str, float]:
    """Scalar metrics of one checkpoint (for curves over training)."""
    items = result["items"]
    out = {
        "perplexity": float(np.exp(np.mean(items["loss"]))),
        "icl_score": float(np.mean(items["icl"])),
        "induction_score": float(np.mean(result["induction_best"])),
        "anti_induction_score": float(np.nanmean(result["anti_induction_best"])),
    }
    if "snippet_induction_best" in result:
        out["snippet_induction_score"] = float(np.nanmean(result["snippet_induction_best"]))
    if "copy" in items:
        out["copy_accuracy"] = float(np.mean(items["copy"]))
        out["copy_chance"] = float(np.mean(items["copy_first"]))
    for key, values in items.items():
        if key.startswith("probe_"):
            out[f"probe_accuracy_{key.removeprefix('probe_')}"] = float(np.mean(values))
    for mode in result["ablation"]:
        for metric in result["ablation_base"]:
            drops = ablation_drops(result, mode, metric)
            for kind, value in drops.items():
                out[f"ablation_{kind}_{metric}_{mode}"] = value
    return out


# ------------------------------------------------------------------------------ results table


def _bootstrap(
    stat: Callable[[np.ndarray | None], float], n_items: int, n_boot: int, level: float, seed: int
) -> tuple[float, float, float]:
    point = stat(None)
    rng = np.random.default_rng(seed)
    draws = np.array([stat(rng.integers(0, n_items, n_items)) for _ in range(n_boot)])
    draws = draws[np.isfinite(draws)]
    if not math.isfinite(point) or draws.size < max(10, n_boot // 2):
        return point, float("nan"), float("nan")
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(draws, [tail, 100 - tail])
    return float(point), float(low), float(high)


SIGNATURES = ("induction_best", "anti_induction_best", "snippet_induction_best")


def _metric_stats(
    shots: Sequence[int],
    modes: Sequence[str],
    signatures: Sequence[str] = SIGNATURES[:2],
    ablation_metrics: Sequence[str] = ABLATION_METRICS[1:],
    copy: bool = False,
) -> dict[str, tuple]:
    """metric -> (item-count getter, per-run statistic(result, idx))."""

    def mean_of(key: str) -> Callable:
        def stat(result, idx):
            values = result["items"][key]
            return float(np.mean(values if idx is None else values[idx]))

        return stat

    def n_of(key: str) -> Callable:
        return lambda result: len(result["items"][key])

    stats: dict[str, tuple] = {}
    for k in shots:
        stats[f"probe_accuracy_{k}shot"] = (n_of(f"probe_{k}shot"), mean_of(f"probe_{k}shot"))
    stats["icl_score"] = (n_of("icl"), mean_of("icl"))
    if copy:
        stats["copy_accuracy"] = (n_of("copy"), mean_of("copy"))
        stats["copy_chance"] = (n_of("copy_first"), mean_of("copy_first"))

    def perplexity(result, idx):
        loss = result["items"]["loss"]
        return float(np.exp(np.mean(loss if idx is None else loss[idx])))

    stats["perplexity"] = (n_of("loss"), perplexity)
    for key in signatures:

        def signature(result, idx, key=key):
            values = result[key]
            return float(np.nanmean(values if idx is None else values[idx]))

        stats[key.replace("_best", "_score")] = (lambda r, key=key: len(r[key]), signature)
    for mode in modes:
        for metric in ablation_metrics:
            for kind in ("drop", "control", "excess"):

                def ablation(result, idx, mode=mode, metric=metric, kind=kind):
                    return ablation_drops(result, mode, metric, idx)[kind]

                def count(result, metric=metric):
                    return len(result["ablation_base"][metric])

                stats[f"ablation_{kind}_{metric}_{mode}"] = (count, ablation)
    return stats


RESULT_COLUMNS = [
    "preset", "variant", "metric", "n_seeds", "value", "ci_low", "ci_high",
    "diff_vs_natural", "diff_ci_low", "diff_ci_high", "heads_formed", "estimable", "note",
    "tokens_seen", "flops",
]  # fmt: skip


def results_table(
    finals: Mapping[str, Mapping[str, Any]],
    runs: pd.DataFrame,
    options: Mapping[str, Any],
) -> pd.DataFrame:
    """The paper-form results table: one row per (preset, variant, metric).

    Args:
        finals: run_name -> :func:`evaluate_checkpoint` result at the run's last checkpoint.
        runs: one row per run with ``run_name, preset, variant, seed, tokens_seen, flops``.
        options: ``baseline_variant`` (``natural``), ``heads_formed_threshold`` (0.4: best
            layer >= 1 induction score at the end), ``n_bootstrap``, ``level``, ``seed``,
            ``shots``, ``ablation_modes``.

    Values are means over seeds of per-run statistics; CIs are percentile bootstraps over
    items (prompts, sequences or probes; the same items for every run, so differences vs the
    baseline are paired by item and seed). Ablation rows are flagged not estimable when the
    top heads are not induction heads (best score below the threshold in some seed) or the
    baseline metric is 0; their differences vs the baseline need both sides estimable.
    """
    baseline = str(options.get("baseline_variant", "natural"))
    threshold = float(options.get("heads_formed_threshold", 0.4))
    n_boot = int(options.get("n_bootstrap", 1000))
    level = float(options.get("level", 0.95))
    seed = int(options.get("seed", 0))
    shots = [int(k) for k in options.get("shots", (1, 10))]
    modes = list(options.get("ablation_modes", ("zero", "pattern_preserving")))
    signatures = [key for key in SIGNATURES if all(key in f for f in finals.values())]
    ablation_metrics = [m for m in ABLATION_METRICS
                        if all(m in f["ablation_base"] for f in finals.values())]  # fmt: skip
    copy = bool(finals) and all("copy" in f["items"] for f in finals.values())
    stats = _metric_stats(shots, modes, signatures, ablation_metrics, copy)
    runs = runs[runs["run_name"].isin(list(finals))]
    rows = []
    groups = {key: g for key, g in runs.groupby(["preset", "variant"], sort=True)}

    def formed(group: pd.DataFrame) -> bool:
        return all(float(np.mean(finals[r]["induction_best"])) >= threshold
                   for r in group["run_name"])  # fmt: skip

    for (preset, variant), unsorted in groups.items():
        group = unsorted.sort_values("seed")
        results = [finals[r] for r in group["run_name"]]
        base_group = groups.get((preset, baseline))
        base_by_seed = (
            {int(s): finals[r] for s, r in zip(base_group["seed"], base_group["run_name"],
                                                 strict=True)}
            if base_group is not None else {}
        )  # fmt: skip
        paired = [(res, base_by_seed.get(int(s))) for res, s in zip(results, group["seed"],
                                                                     strict=True)]  # fmt: skip
        paired = [(a, b) for a, b in paired if b is not None]
        heads_ok = formed(group)
        base_ok = base_group is not None and formed(base_group)
        for metric, (count, stat) in stats.items():
            n_items = count(results[0])

            def mean_stat(idx, results=results, stat=stat):
                return float(np.mean([stat(r, idx) for r in results]))

            value, low, high = _bootstrap(mean_stat, n_items, n_boot, level, seed)
            diff = (float("nan"),) * 3
            if paired and variant != baseline:

                def diff_stat(idx, paired=paired, stat=stat):
                    return float(np.mean([stat(a, idx) - stat(b, idx) for a, b in paired]))

                diff = _bootstrap(diff_stat, n_items, n_boot, level, seed)
            ablation = metric.startswith("ablation_")
            estimable, note = True, ""
            if ablation and not heads_ok:
                estimable = False
                note = (f"{NOT_ESTIMABLE}: no induction heads formed (best layer>=1 induction "
                        f"score < {threshold}); the ablated heads are not induction heads")  # fmt: skip
            elif ablation and not math.isfinite(value):
                estimable, note = False, f"{NOT_ESTIMABLE}: the unablated metric is 0"
            if ablation and variant != baseline and not base_ok:
                diff = (float("nan"),) * 3
                note = (note + "; " if note else "") + (
                    f"difference vs {baseline} {NOT_ESTIMABLE}: the {baseline} model formed "
                    "no induction heads at this scale"
                )
            rows.append({
                "preset": preset, "variant": variant, "metric": metric, "n_seeds": len(group),
                "value": value, "ci_low": low, "ci_high": high, "diff_vs_natural": diff[0],
                "diff_ci_low": diff[1], "diff_ci_high": diff[2], "heads_formed": heads_ok,
                "estimable": estimable, "note": note,
                "tokens_seen": float(group["tokens_seen"].iloc[0]),
                "flops": float(group["flops"].iloc[0]),
            })  # fmt: skip
    return pd.DataFrame(rows, columns=RESULT_COLUMNS)


__all__ = [
    "ABLATION_METRICS",
    "EvalSet",
    "MatchedComputeError",
    "ablation_drops",
    "best_head_samples",
    "check_matched_compute",
    "checkpoint_summary",
    "evaluate_checkpoint",
    "head_scores",
    "item_metrics",
    "make_eval_set",
    "relative_drop",
    "results_table",
    "top_induction_heads",
]
