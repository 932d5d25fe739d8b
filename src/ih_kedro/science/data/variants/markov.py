"""Training data from designed Markov processes with the repetition knobs (Experiment 3).

Every training batch of the ``markov`` data variant is ``B`` sequences drawn from one designed
process (:mod:`ih_kedro.science.data.variants.markov_process`, saved as a ``.npz`` file) by the generic
frequency x reliability repetition generator of :mod:`ih_kedro.science.data.variants.repetition`: first
halves never repeat a token; in second halves a slot re-uses the first token ``A`` of an earlier
bigram with probability ``frequency`` and continues with its ``B`` with probability
``reliability``. The batch is a pure function of (seed, step): the generator draws from the
NumPy generator the training loop seeds with them.

Options of a grid cell (small and serialisable: configs travel to worker processes):

- ``process``: the process' name, ``level``: the repetition level's name;
- ``process_paths`` / ``process_checksums``: name -> file / checksum, and ``levels``: name ->
  ``{frequency, reliability}``. The experiment's ``variant_data`` node fills these three for every
  cell, so the process files reach training as a real edge of the pipeline graph.

States map to token ids of the project tokenizer: state ``i`` emits the ``i``-th most frequent
training token (EOS excluded), so the online emergence probes, drawn from the ``V`` most frequent
training tokens, use exactly the tokens the model sees in this data.
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ih_kedro.science.data.variants.markov_process import MarkovProcess
from ih_kedro.science.data.variants.registry import register_variant
from ih_kedro.science.data.variants.repetition import generate_repetition_sequences
from ih_kedro.science.data.variants.repetition_stats import check_sample_repetition
from ih_kedro.science.data.vocabulary import frequent_token_pool

logger = logging.getLogger(__name__)

VARIANT = "markov"


def state_token_ids(
    tokens: np.ndarray,
    vocab_size: int,
    n_states: int,
    eos_token_id: int | None = None,
    *,
    exclude: Iterable[int] = (),
) -> np.ndarray:
    """Token id of each of ``n_states`` states: the most frequent training tokens, in order.

    State 0 (the most probable state of a Zipf marginal) emits the most frequent token. Ids in
    ``exclude`` (e.g. a compact vocabulary's other id) are never states. Raises when the stream
    has fewer than ``n_states`` distinct tokens (EOS and ``exclude`` left out).
    """

    exclude = tuple(int(e) for e in exclude) + (
        () if eos_token_id is None else (int(eos_token_id),)
    )
    pool = frequent_token_pool(np.asarray(tokens), int(vocab_size), int(n_states), exclude)
    if pool.shape[0] < n_states:
        raise ValueError(
            f"markov.design.vocab_size: {n_states} states need {n_states} distinct training "
            f"tokens, the corpus has {pool.shape[0]}"
        )
    return pool.astype(np.int64)  # (V,)


def frontier_reliability(
    frontier_table: pd.DataFrame | None, frequency: float
) -> tuple[float, str] | None:
    """Reliability of the pareto frontier (the 50% contour) at ``frequency``, or ``None``.

    ``frontier_table`` is the ``pareto`` experiment's ``frontier_table.csv`` (rows ``kind ==
    "contour"`` with ``frequency`` and ``reliability``). The contour is interpolated linearly in
    (log f, log r); a frequency outside the contour's range or a table without a finite contour
    gives ``None``. Returns ``(reliability, description)``.
    """
    if frontier_table is None or frontier_table.empty or "kind" not in frontier_table:
        return None
    contour = frontier_table[frontier_table["kind"] == "contour"][["frequency", "reliability"]]
    contour = contour.apply(pd.to_numeric, errors="coerce").dropna()
    contour = contour[(contour["frequency"] > 0) & (contour["reliability"] > 0)]
    if contour.empty:
        return None
    contour = contour.sort_values("frequency")
    log_f = np.log(contour["frequency"].to_numpy())
    target = math.log(frequency)
    if not log_f[0] - 1e-9 <= target <= log_f[-1] + 1e-9:
        return None
    log_r = float(np.interp(target, log_f, np.log(contour["reliability"].to_numpy())))
    return math.exp(log_r), f"pareto frontier at frequency {frequency:g}"


def resolve_levels(
    levels: Mapping[str, Mapping[str, Any]],
    frontier_table: pd.DataFrame | None = None,
    calibrated: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, dict[str, Any]]:
    """The repetition levels as ``name -> {frequency, reliability, source}``.

    A level is ``{frequency, reliability}``; a level with ``reliability: calibrated`` takes the
    reliability and source that ``calibrated[name]`` measured (the calibration sweep on the
    processes themselves, :mod:`ih_kedro.science.statistics.markov_calibration`); a level with
    ``reliability: frontier`` takes the pareto frontier's reliability at its frequency times
    ``margin`` (default 1.0, > 1 is on the forming side), clipped to 1, and falls back to its
    ``fallback_reliability`` when there is no usable frontier table.
    """
    if not levels:
        raise ValueError("markov.repetition.levels: no repetition level given")
    resolved: dict[str, dict[str, Any]] = {}
    for name, level in levels.items():
        where = f"markov.repetition.levels.{name}"
        if "frequency" not in level or "reliability" not in level:
            raise ValueError(f"{where}: needs frequency and reliability")
        frequency = float(level["frequency"])
        if not 0 < frequency <= 1:
            raise ValueError(f"{where}.frequency: must be in (0, 1], got {frequency}")
        if level["reliability"] == "calibrated":
            if not calibrated or name not in calibrated:
                raise ValueError(f"{where}: reliability 'calibrated' but no calibration for it")
            reliability = float(calibrated[name]["reliability"])
            source = str(calibrated[name]["source"])
            if abs(float(calibrated[name]["frequency"]) - frequency) > 1e-12:
                raise ValueError(
                    f"{where}.frequency: {frequency:g}, but the calibration swept frequency "
                    f"{float(calibrated[name]['frequency']):g}"
                )
        elif level["reliability"] == "frontier":
            found = frontier_reliability(frontier_table, frequency)
            if found is None:
                if level.get("fallback_reliability") is None:
                    raise ValueError(
                        f"{where}: no pareto frontier table to read and no fallback_reliability"
                    )
                reliability = float(level["fallback_reliability"])
                source = "fallback_reliability (no pareto frontier table)"
            else:
                margin = float(level.get("margin", 1.0))
                reliability = min(1.0, found[0] * margin)
                source = f"{found[1]} x margin {margin:g}"
                if found[0] * margin > 1.0:
                    # e.g. a pareto run in which only r = 1 cells formed: its 50% contour lies
                    # above r = 1, and the level becomes the grid's edge, r = 1.
                    source += f" = {found[0] * margin:.3g}, clipped to 1 (frontier above r = 1)"
                    logger.warning("%s: %s", where, source)
        else:
            reliability = float(level["reliability"])
            source = "parameter"
        if not 0 < reliability <= 1:
            raise ValueError(f"{where}.reliability: must be in (0, 1], got {reliability}")
        resolved[str(name)] = {
            "frequency": frequency,
            "reliability": reliability,
            "source": source,
        }
    return resolved


@functools.lru_cache(maxsize=32)
def _cached_process(path: str) -> MarkovProcess:
    return MarkovProcess.load(path)


def _cell(options: Mapping[str, Any]) -> tuple[MarkovProcess, float, float]:
    """The process and the (frequency, reliability) of a cell's options."""
    for key in ("process", "level", "process_paths", "levels"):
        if key not in options:
            raise ValueError(
                f"training.data_variants: the markov variant needs options.{key} (the markov "
                "pipeline's variant_data node fills process_paths and levels)"
            )
    name, level = str(options["process"]), str(options["level"])
    paths, levels = options["process_paths"], options["levels"]
    if name not in paths:
        raise ValueError(
            f"training.data_variants: unknown markov process {name!r}; designed: {sorted(paths)}"
        )
    if level not in levels:
        raise ValueError(
            f"training.data_variants: unknown repetition level {level!r}; known: {sorted(levels)}"
        )
    process = _cached_process(str(Path(paths[name]).resolve()))
    expected = (options.get("process_checksums") or {}).get(name)
    if expected and process.checksum() != expected:
        raise ValueError(
            f"training.data_variants: markov process {name!r} at {paths[name]} has checksum "
            f"{process.checksum()}, the sweep expected {expected} (the file changed)"
        )
    return process, float(levels[level]["frequency"]), float(levels[level]["reliability"])


def markov_sequences(
    process: MarkovProcess,
    n_sequences: int,
    length: int,
    frequency: float,
    reliability: float,
    rng: np.random.Generator,
    *,
    return_copied: bool = False,
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """``n`` token sequences (n, length) of ``process`` with the two repetition knobs."""
    token_ids = (
        process.token_ids if process.token_ids is not None else np.arange(process.vocab_size)
    )
    return generate_repetition_sequences(
        process.transition,
        process.stationary,
        token_ids,
        n_sequences,
        length,
        frequency,
        reliability,
        rng,
        return_copied=return_copied,
    )


def markov_variant(
    windows: np.ndarray, rng: np.random.Generator, options: Mapping[str, Any], step: int = 0
) -> np.ndarray:
    """Replace every window (B, C+1) with sequences of the cell's process; return the mask of
    copied ``B`` tokens."""
    process, frequency, reliability = _cell(options)
    batch, width = windows.shape
    tokens, copied = markov_sequences(
        process, batch, width, frequency, reliability, rng, return_copied=True
    )  # (B, C+1), (B, C+1)
    windows[:] = tokens
    return copied


def check_markov_options(options: Mapping[str, Any], context_length: int) -> None:
    """Before training: the process loads, fits the context, and a sample meets the knobs."""
    process, frequency, reliability = _cell(options)
    width = context_length + 1
    if process.vocab_size < width:
        raise ValueError(
            f"markov.design.vocab_size: {process.vocab_size} states cannot fill a sequence of "
            f"{width} tokens without repeats (context_length {context_length}); use >= {width}"
        )
    sample = markov_sequences(
        process,
        int(options.get("check_sequences", 256)),
        width,
        frequency,
        reliability,
        np.random.default_rng(0),
    )  # (n, C+1)
    check_sample_repetition(
        sample,
        frequency,
        reliability,
        options,
        where=f" (markov process {options['process']!r}, level {options['level']!r})",
    )


register_variant(VARIANT, markov_variant, check_markov_options)

__all__ = [
    "VARIANT",
    "check_markov_options",
    "frontier_reliability",
    "markov_sequences",
    "markov_variant",
    "resolve_levels",
    "state_token_ids",
]
