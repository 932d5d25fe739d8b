"""Semi-natural sequences with two repetition knobs: **frequency** and **reliability**.

Experiment 2 (the ``pareto`` pipeline) asks how often, and how reliably, an in-context
repetition ``A B … A → B`` must occur for induction heads to form. The data:

1. :func:`~ih_kedro.science.data.variants.bigram_model.estimate_bigram_model`: a first-order
   (bigram) process estimated from a token stream (the deduplicated training corpus): the
   ``n_types`` most frequent token types plus one **other** bucket for every remaining type,
   additive smoothing ``smoothing`` on the counts.
2. :func:`~ih_kedro.science.data.variants.repetition.generate_repetition_sequences`: a
   **generic** repetition-knob generator. It works with *any* first-order process given as
   ``(transition (V, V), initial (V,), token_ids (V,))`` (the bigram model here, a synthetic
   Markov chain elsewhere) and returns token ids.
3. :func:`~ih_kedro.science.data.variants.repetition_stats.measure_repetition`: the realised
   frequency and reliability of a batch of sequences, computed from the token ids alone, and
   :func:`~ih_kedro.science.data.variants.repetition_stats.check_repetition`, which fails
   loudly when the realised values miss the targets.
4. :func:`~ih_kedro.science.data.variants.repetition_stats.select_chunks_by_repetition`: the
   natural-data variant: chunks of the natural stream chosen so that a set share of them
   contains a repeated bigram.

This module is the training data variant ``semi_natural``: every batch drawn from a saved
bigram model with the two knobs (the generative process is described in
:mod:`ih_kedro.science.data.variants.repetition`, its measurement in
:mod:`ih_kedro.science.data.variants.repetition_stats`).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ih_kedro.science.data.variants.bigram_model import BigramModel
from ih_kedro.science.data.variants.registry import register_variant
from ih_kedro.science.data.variants.repetition import (
    check_knobs,
    generate_repetition_sequences,
    transition_cdf,
)
from ih_kedro.science.data.variants.repetition_stats import check_sample_repetition

logger = logging.getLogger(__name__)

VARIANT = "semi_natural"
"""Training data variant name: every batch drawn from a saved bigram model with the two knobs."""


@functools.lru_cache(maxsize=8)
def _cached_model(path: str) -> BigramModel:
    return BigramModel.load(path)


@functools.lru_cache(maxsize=8)
def _cached_cdf(path: str) -> np.ndarray:
    return transition_cdf(_cached_model(path).transition)


def load_model(options: Mapping[str, Any]) -> BigramModel:
    """The bigram model named by a variant's ``model_path`` option (cached per process)."""
    path = options.get("model_path")
    if not path:
        raise ValueError(
            "training.data_variants: the semi_natural variant needs options.model_path "
            "(the pareto pipeline fills it from its bigram_model dataset)"
        )
    model = _cached_model(str(Path(path).resolve()))
    expected = options.get("model_checksum")
    if expected and model.checksum() != expected:
        raise ValueError(
            f"training.data_variants: bigram model at {path} has checksum {model.checksum()}, "
            f"the sweep expected {expected} (the file changed after the sweep was planned)"
        )
    return model


def _knobs(options: Mapping[str, Any]) -> tuple[float, float]:
    try:
        return float(options["frequency"]), float(options["reliability"])
    except KeyError as missing:
        raise ValueError(
            f"training.data_variants: the semi_natural variant needs options.{missing.args[0]}"
        ) from None


def semi_natural_variant(
    windows: np.ndarray, rng: np.random.Generator, options: Mapping[str, Any], step: int = 0
) -> np.ndarray:
    """Replace every window (B, C+1) with sequences of the bigram model and the two knobs.

    Options: ``model_path`` (the saved :class:`BigramModel`), ``frequency``, ``reliability``,
    optionally ``model_checksum``. Returns the mask of copied ``B`` tokens.
    """
    model = load_model(options)
    frequency, reliability = _knobs(options)
    batch, width = windows.shape
    tokens, copied = generate_repetition_sequences(
        model.transition,
        model.initial,
        model.token_ids,
        batch,
        width,
        frequency,
        reliability,
        rng,
        return_copied=True,
        row_cdf=_cached_cdf(str(Path(model.path).resolve())) if model.path else None,
    )  # (B, C+1), (B, C+1)
    windows[:] = tokens
    return copied


def check_semi_natural_options(options: Mapping[str, Any], context_length: int) -> None:
    """Before training: the model loads, fits the context, and a sample meets the targets."""
    model = load_model(options)
    frequency, reliability = _knobs(options)
    width = context_length + 1
    check_knobs(frequency, reliability, width, model.n_states)
    sample = generate_repetition_sequences(
        model.transition,
        model.initial,
        model.token_ids,
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
        where=f" (frequency={frequency:g}, reliability={reliability:g})",
    )


register_variant(VARIANT, semi_natural_variant, check_semi_natural_options)

__all__ = ["VARIANT", "load_model"]
