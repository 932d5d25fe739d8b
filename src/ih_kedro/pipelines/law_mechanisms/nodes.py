"""Nodes of the ``law_mechanisms`` experiment: the repetition curves and their figure.

Thin adapters: the curve is :func:`ih_kedro.science.data.repetition_curve.repetition_curve` on
windows drawn by :func:`ih_kedro.science.data.batches.sample_batch` (the training stage's own
sampler, so a data variant's curve is measured on the sequences a run would train on), the
figure :func:`ih_kedro.science.statistics.plots.law.plot_repetition_curves`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from ih_kedro.science.data.batches import sample_batch
from ih_kedro.science.data.packed import PackedTokens
from ih_kedro.science.data.repetition_curve import log_spaced_lengths, repetition_curve
from ih_kedro.science.statistics.plots.law import plot_repetition_curves

logger = logging.getLogger(__name__)


def _context_lengths(params: Mapping[str, Any]) -> list[int]:
    given = params.get("context_lengths")
    if given:
        return sorted({int(c) for c in given})
    return log_spaced_lengths(int(params.get("min_context", 16)),
                              int(params.get("max_context", 1024)),
                              int(params.get("n_lengths", 7)))  # fmt: skip


def repetition_curves(train_tokens: PackedTokens, params: dict[str, Any]) -> pd.DataFrame:
    """One curve per ``params.sources`` entry (``{label, variant, options}``; ``natural`` is
    the corpus itself): ``source, variant, context_length, share, ci_low, ci_high, n_windows``,
    ``n_windows`` windows per length (the batch of step 0 of seed ``seed``)."""
    sources = params.get("sources") or [{"label": "corpus", "variant": "natural"}]
    n_windows = int(params.get("n_windows", 200))
    seed = int(params.get("seed", 0))
    level = float(params.get("level", 0.95))
    tokens = np.asarray(train_tokens.tokens)
    curves = []
    for source in sources:
        variant = str(source.get("variant", "natural"))
        options = dict(source.get("options") or {})

        def windows_at(c: int, variant: str = variant, options: dict = options) -> np.ndarray:
            batch = sample_batch(tokens, n_windows, c, seed, 0, data_variant=variant,
                                 variant_options=options)  # fmt: skip
            return batch.tokens.numpy()[:, 1:]  # (n, C): the C positions a model predicts

        curve = repetition_curve(windows_at, _context_lengths(params), level=level)
        curve.insert(0, "variant", variant)
        curve.insert(0, "source", str(source.get("label", variant)))
        logger.info(
            "repetition curve %s: share %.3f at C=%d -> %.3f at C=%d",
            curve["source"].iloc[0],
            curve["share"].iloc[0],
            curve["context_length"].iloc[0],
            curve["share"].iloc[-1],
            curve["context_length"].iloc[-1],
        )
        curves.append(curve)
    return pd.concat(curves, ignore_index=True)


def repetition_curves_figure(curves: pd.DataFrame) -> Figure:
    """The curves on one log-C axis with their CI bands."""
    return plot_repetition_curves(curves)
