"""Nodes of the ``law_mechanisms`` experiment: repetition curves, the corpus's growth with C,
one emergence law per mechanism arm (``law_mechanisms.csv``), the size term, the figures.

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

from ih_kedro.pipelines.statistics.nodes import select_emergence_rows
from ih_kedro.science.data.batches import sample_batch
from ih_kedro.science.data.packed import PackedTokens
from ih_kedro.science.data.repetition_curve import (
    growth_exponent,
    log_spaced_lengths,
    repetition_curve,
)
from ih_kedro.science.statistics.law_mechanisms import (
    mechanism_contrasts,
    mechanism_fit_table,
    size_term_fit,
    warmup_share_table,
)
from ih_kedro.science.statistics.paired_seeds import json_safe
from ih_kedro.science.statistics.plots.law import (
    plot_mechanism_exponents,
    plot_repetition_curves,
)
from ih_kedro.science.training.grid import expand_grid

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
    ``n_windows`` windows per length (the batch of step 0 of seed ``seed``). A source's own
    ``max_context`` stops its curve there (a variant whose copy events grow with C cannot be
    placed at every length)."""
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

        lengths = [c for c in _context_lengths(params) if c <= source.get("max_context", c)]
        if not lengths:
            raise ValueError(
                f"law_mechanisms.repetition_curve.sources[{source.get('label', variant)!r}]"
                f".max_context: {source['max_context']} is below every context length"
            )
        curve = repetition_curve(windows_at, lengths, level=level)
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


# --------------------------------------------------------------------------------------------
# The mechanism arms: one law per arm, the size term, the corpus growth the variant (a) copies
# --------------------------------------------------------------------------------------------
def _rows(table: pd.DataFrame, params: Mapping[str, Any]) -> pd.DataFrame:
    """The emergence rows of ``params.metric``/``method``/``threshold`` (the statistics
    stage's selection, so every arm is read the way ``law_fit`` reads its table)."""
    return select_emergence_rows(table, dict(params))


def mechanism_fits(params: dict[str, Any], **emergence_tables: pd.DataFrame) -> pd.DataFrame:
    """``law_mechanisms.csv``: the law fitted once per arm (keyword = arm name), with Wald tests
    against both published forms (``statistics.law_mechanisms.mechanism_fit_table``)."""
    tables = {arm: _rows(table, params) for arm, table in emergence_tables.items()}
    table = mechanism_fit_table(tables, params.get("fit"))
    for row in table.itertuples(index=False):
        logger.info("law_mechanisms %s: a = %.3f [%.3f, %.3f], b = %.3f [%.3f, %.3f] %s",
                    row.arm, row.a, row.a_ci_low, row.a_ci_high, row.b, row.b_ci_low,
                    row.b_ci_high, row.note)  # fmt: skip
    return table


def mechanism_contrast_table(
    params: dict[str, Any], **emergence_tables: pd.DataFrame
) -> pd.DataFrame:
    """``law_mechanisms_contrasts.csv``: each arm's exponents minus the reference arm's
    (``params.contrast``: ``reference``, ``margin``), with CIs, the share of the gap to the
    published b each switch closes and the verdicts
    (``statistics.law_mechanisms.mechanism_contrasts``)."""
    contrast = dict(params.get("contrast") or {})
    tables = {arm: _rows(table, params) for arm, table in emergence_tables.items()}
    table = mechanism_contrasts(tables, str(contrast.get("reference", "today")),
                                margin=float(contrast.get("margin", 0.2)),
                                level=float(params.get("level", 0.95)))  # fmt: skip
    for row in table.itertuples(index=False):
        logger.info("law_mechanisms %s - %s: delta b = %.3f [%.3f, %.3f] (%s), delta a = %.3f "
                    "[%.3f, %.3f] (%s) %s", row.arm, row.reference, row.delta_b,
                    row.delta_b_ci_low, row.delta_b_ci_high, row.verdict_b, row.delta_a,
                    row.delta_a_ci_low, row.delta_a_ci_high, row.verdict_a, row.note)  # fmt: skip
    return table


def reference_contrast_table(
    params: dict[str, Any], **emergence_tables: pd.DataFrame
) -> pd.DataFrame:
    """``law_mechanisms_reference_contrasts.csv``: every arm against ``params.contrast``'s
    reference (``today``), then the last arm (``reference_schedule``) against each other
    non-reference arm (``setup_check``: the published optimizer shape over a fixed step
    budget, the reference's semantics' nearest neighbour)."""
    contrast = dict(params.get("contrast") or {})
    tables = {arm: _rows(table, params) for arm, table in emergence_tables.items()}
    margin, level = float(contrast.get("margin", 0.2)), float(params.get("level", 0.95))
    reference = str(contrast.get("reference", "today"))
    parts = [mechanism_contrasts(tables, reference, margin=margin, level=level)]
    *others, last = [arm for arm in tables if arm != reference]
    for other in others:
        parts.append(mechanism_contrasts({other: tables[other], last: tables[last]}, other,
                                         margin=margin, level=level))  # fmt: skip
    table = pd.concat(parts, ignore_index=True)
    for row in table.itertuples(index=False):
        logger.info("law_mechanisms %s - %s: delta b = %.3f [%.3f, %.3f] (%s), delta a = %.3f "
                    "[%.3f, %.3f] (%s)", row.arm, row.reference, row.delta_b,
                    row.delta_b_ci_low, row.delta_b_ci_high, row.verdict_b, row.delta_a,
                    row.delta_a_ci_low, row.delta_a_ci_high, row.verdict_a)  # fmt: skip
    return table


def reference_warmup_table(
    emergence_table: pd.DataFrame, params: dict[str, Any], training: dict[str, Any]
) -> pd.DataFrame:
    """``law_mechanisms_reference_warmup.csv``: per (B, C) of the reference arm, its warm-up
    and horizon steps (from its training parameters, as the runs computed them) and the warm-up
    over the measured median emergence step (``statistics.law_mechanisms.warmup_share_table``)."""
    schedule = {(c.batch_size, c.context_length): c.lr_schedule_steps()
                for c in expand_grid(training)}  # fmt: skip
    table = warmup_share_table(_rows(emergence_table, params), schedule)
    for row in table.itertuples(index=False):
        logger.info("reference_schedule B%d C%d: warm-up %d steps, median emergence %.0f "
                    "steps, share %.3f", row.batch_size, row.context_length, row.warmup_steps,
                    row.emergence_step_median, row.warmup_share)  # fmt: skip
    return table


def mechanism_exponents_figure(table: pd.DataFrame) -> Figure:
    """Each arm's b (and a) with its CI beside the published values."""
    return plot_mechanism_exponents(table)


def _with_size(
    table: pd.DataFrame, manifest: pd.DataFrame, params: Mapping[str, Any]
) -> pd.DataFrame:
    """An arm's emergence rows with the model size (``n_parameters``) from its manifest: each
    preset's fewest parameters over the arm's runs (learned positions grow with C, so a run's
    own count would let C leak into the size term)."""
    rows = _rows(table, params)
    per_preset = manifest.groupby("preset")["n_parameters"].transform("min")
    sizes = pd.Series(per_preset.to_numpy(), index=manifest["run_name"])
    return rows.assign(n_parameters=rows["run_name"].map(sizes).astype(float))


def size_term(
    emergence_table: pd.DataFrame,
    sweep_manifest: pd.DataFrame,
    params: dict[str, Any],
    reference_table: pd.DataFrame | None = None,
    reference_manifest: pd.DataFrame | None = None,
) -> dict[str, Any]:
    """The size exponent of ``log S* ~ log B + log C + log size`` on the size arm (model size
    ``n_parameters`` from the manifest), with its CI and whether it lies inside ``margin``.

    ``reference_table`` / ``reference_manifest`` (the ``today`` arm: the same recipe at
    another size) add their runs at the size arm's cells and seeds, so that size is not
    trained twice; their sizes must differ from the size arm's."""
    rows = _with_size(emergence_table, sweep_manifest, params)
    if reference_table is not None and reference_manifest is not None:
        reference = _with_size(reference_table, reference_manifest, params)
        keys = ["batch_size", "context_length", "seed"]
        cells = rows[keys].drop_duplicates()
        reference = reference.merge(cells, on=keys, how="inner")
        shared = set(reference["n_parameters"]) & set(rows["n_parameters"])
        if shared:
            raise ValueError(
                f"law_mechanisms size term: the reference arm's model size(s) {sorted(shared)} "
                "are also trained by the size arm; give the size arm only the other sizes"
            )
        rows = pd.concat([rows, reference], ignore_index=True)
    try:
        fit = size_term_fit(rows, "n_parameters", float(params.get("size_margin", 0.1)),
                            float(params.get("level", 0.95)))  # fmt: skip
    except ValueError as error:  # too few emerged runs or levels: reported, not a crash
        logger.warning("law_mechanisms size term not fitted: %s", error)
        return {"status": "not fitted", "reason": str(error), "n_runs": len(rows)}
    fit["status"] = "fitted"
    fit["sizes"] = sorted(float(n) for n in rows["n_parameters"].dropna().unique())
    logger.info("law_mechanisms size term: c = %.3f [%.3f, %.3f], inside +/-%g: %s", fit["c"],
                fit["c_ci"][0], fit["c_ci"][1], fit["margin"], fit["inside_margin"])  # fmt: skip
    return json_safe(fit)


def corpus_growth(curves: pd.DataFrame, params: dict[str, Any]) -> dict[str, Any]:
    """How fast the corpus's repetition share grows with C over the arms' range
    (``growth_exponent`` of the first source, the corpus), beside the ``density_exponent`` arm
    (a) is configured with and the share of the corpus's growth that arm reproduces."""
    corpus = curves[curves["source"] == curves["source"].iloc[0]]
    growth = growth_exponent(corpus, int(params["min_context"]), int(params["max_context"]),
                             float(params.get("level", 0.95)))  # fmt: skip
    configured = params.get("configured_exponent")
    growth["configured_exponent"] = None if configured is None else float(configured)
    growth["share_of_corpus_growth"] = (
        None if configured is None or not growth["exponent"] else
        float(configured) / growth["exponent"]
    )  # fmt: skip
    logger.info("law_mechanisms: the corpus's repetition share grows as C^%.2f over C %d-%d; "
                "arm (a) is configured with %s", growth["exponent"], growth["min_context"],
                growth["max_context"], configured)  # fmt: skip
    return json_safe(growth)
