"""``markov`` nodes: design the processes, plan the variant data, judge the conditions.

Thin wrappers around :mod:`ih_kedro.science.data.variants.markov_process`, :mod:`ih_kedro.science.data.variants.markov`
and :mod:`ih_kedro.science.statistics.markov_verdicts`; the catalog does all file I/O except the
optional read of the pareto experiment's frontier table (a path parameter: a fresh clone has
none, and then the near-frontier level falls back to its parameter).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd
from matplotlib.figure import Figure
from tqdm.auto import tqdm

from ih_kedro.science.data.packed import PackedTokens
from ih_kedro.science.data.variants.markov import (
    VARIANT,
    resolve_levels,
    state_token_ids,
)
from ih_kedro.science.data.variants.markov_process import MarkovProcess, MarkovSpec, design_process
from ih_kedro.science.statistics.plots.markov import plot_processes

logger = logging.getLogger(__name__)

_SPEC_DEFAULT_KEYS = (
    "zipf_exponent",
    "n_groups",
    "steps",
    "learning_rate",
    "kl_tolerance",
    "entropy_tolerance",
    "similarity_tolerance",
    "seed",
)


def process_specs(design: Mapping[str, Any]) -> list[MarkovSpec]:
    """One :class:`MarkovSpec` per entry of ``design.processes`` (``design.defaults`` and
    ``design.vocab_size`` fill what an entry leaves out)."""
    processes = design.get("processes") or {}
    if not processes:
        raise ValueError("markov.design.processes: no process to design")
    defaults = dict(design.get("defaults") or {})
    unknown = sorted(set(defaults) - set(_SPEC_DEFAULT_KEYS))
    if unknown:
        raise ValueError(f"markov.design.defaults: unknown option(s) {unknown}")
    specs = []
    for name, options in processes.items():
        merged = {"vocab_size": int(design["vocab_size"]), **defaults, **dict(options or {})}
        spec = MarkovSpec.from_dict(str(name), merged)
        spec.validate()
        specs.append(spec)
    return specs


def _check_probe_pools(vocab_size: int, training: Mapping[str, Any], telemetry: Mapping) -> None:
    """Probes must use tokens the model sees: pools no larger than the processes' states."""
    online = dict(training.get("online_emergence") or {})
    pool = int(online.get("token_pool_size", 500))
    if online.get("enabled", True) and pool > vocab_size:
        raise ValueError(
            f"markov.training.online_emergence.token_pool_size: {pool} probe tokens but the "
            f"processes emit only {vocab_size} (markov.design.vocab_size); set it <= {vocab_size}"
        )
    probe = dict(telemetry.get("probe") or {})
    if probe.get("source", "frequent") != "frequent" or int(probe.get("top_k", 0)) > vocab_size:
        raise ValueError(
            f"markov.telemetry.probe: probes must come from the {vocab_size} tokens the "
            f"processes emit (source: frequent, top_k <= {vocab_size}); got source "
            f"{probe.get('source')!r}, top_k {probe.get('top_k')}"
        )


def design_processes(
    train_tokens: PackedTokens,
    design: dict[str, Any],
    training: dict[str, Any],
    telemetry: dict[str, Any],
) -> tuple[dict[str, MarkovProcess], pd.DataFrame]:
    """Design every process (a missed target fails here, before any training) and map its
    states to the most frequent training tokens.

    Returns ``processes`` (name -> process) and ``process_table`` (one row per process: its
    targets and achieved properties).
    """
    specs = process_specs(design)
    vocab = int(design["vocab_size"])
    size = train_tokens.compact_vocabulary_size
    if size is not None and size < vocab:
        raise ValueError(
            f"markov.vocabulary.size: {size} tokens cannot hold the processes' {vocab} "
            f"states (markov.design.vocab_size); set it >= {vocab}"
        )
    _check_probe_pools(vocab, training, telemetry)
    token_ids = state_token_ids(
        train_tokens.tokens,
        train_tokens.vocab_size,
        vocab,
        train_tokens.eos_token_id,
        exclude=train_tokens.non_content_token_ids,
    )  # (V,)
    processes: dict[str, MarkovProcess] = {}
    rows = []
    for spec in tqdm(specs, desc="designing markov processes"):
        process = design_process(spec)
        process.token_ids = token_ids
        processes[spec.name] = process
        rows.append(
            {
                "process": spec.name,
                "marginal": spec.marginal,
                "local_dependency": spec.local_dependency,
                "categorical": spec.categorical,
                "target_entropy_ratio": spec.entropy_ratio if spec.local_dependency else 1.0,
                "target_within_similarity": spec.within_similarity,
                "target_across_similarity": spec.across_similarity,
                **process.properties,
            }
        )
    return processes, pd.DataFrame(rows)


def _read_frontier_table(path: str | None) -> pd.DataFrame | None:
    if not path or not Path(path).is_file():
        return None
    return pd.read_csv(path)


def plan_variant_data(
    processes: dict[str, MarkovProcess],
    repetition: dict[str, Any],
    frontier_level: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The options every training cell shares: process files (and checksums) and the resolved
    repetition levels (a ``reliability: calibrated`` level from ``frontier_level``, the
    calibration sweep's measurement). Reading ``processes`` from the catalog makes the design a
    real upstream of training."""
    frontier = _read_frontier_table(repetition.get("frontier_table"))
    calibrated = {frontier_level["level"]: frontier_level} if frontier_level else None
    levels = resolve_levels(repetition.get("levels") or {}, frontier, calibrated)
    for name, level in levels.items():
        logger.info(
            "markov level %s: frequency %.3g, reliability %.3g (%s)",
            name,
            level["frequency"],
            level["reliability"],
            level["source"],
        )
    return {**process_files(processes), "levels": levels}


def process_files(processes: dict[str, MarkovProcess]) -> dict[str, dict[str, str]]:
    """``process_paths`` and ``process_checksums`` every markov cell reads its process with."""
    missing = [name for name, p in processes.items() if not p.path]
    if missing:
        raise ValueError(f"markov.processes: {missing} have no file path (load them from disk)")
    return {
        "process_paths": {name: p.path for name, p in processes.items()},
        "process_checksums": {name: p.checksum() for name, p in processes.items()},
    }


def run_cells(training: dict[str, Any]) -> pd.DataFrame:
    """``run_name, seed, process, level`` of every markov run of the training grid (less the
    runs ``training.seed_cells`` leaves out)."""
    from ih_kedro.pipelines.training.nodes import grid_configs

    rows = [
        {
            "run_name": config.run_name,
            "seed": int(config.seed),
            "process": str(config.variant_options.get("process")),
            "level": str(config.variant_options.get("level")),
        }
        for config in grid_configs(training)
        if config.data_variant == VARIANT
    ]
    if not rows:
        raise ValueError("markov.training.data_variants: no cell uses the markov variant")
    return pd.DataFrame(rows)


def processes_figure(processes: dict[str, MarkovProcess]) -> Figure:
    return plot_processes(processes)
