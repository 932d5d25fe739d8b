"""``law_mechanisms``: why the context size does (not) act in the emergence law.

- **Repetition curves**: the share of each window that an induction rule predicts, for C from 16
  to 1,024, for the corpus the data stage prepared and for the data variants the arms train on
  (``params:law_mechanisms.repetition_curve.sources``), with a t CI over windows; the corpus's
  growth exponent over the arms' C range (``law_mechanisms.corpus_growth``), against the value
  the growing-repetition arm is configured with.
- **Mechanism arms** (:data:`ARMS`), each a training sweep + telemetry reused through the
  namespace ``law_mechanisms.<arm>`` (parameters ``params:law_mechanisms.<arm>.training`` /
  ``.telemetry``): today's recipe, repetition growing with C (a), a fixed source-distance
  window (b), both (c), and today's recipe with the published optimizer shape (the set-up
  check). One law per arm with Wald tests against both published forms:
  ``law_mechanisms.mechanism_fits`` (``law_mechanisms.csv``) and its figure; each arm against
  ``today`` (the differences of the exponents, the share of the gap to the published b each
  switch closes, verdicts): ``law_mechanisms.mechanism_contrasts``.
- **Size term** (arm :data:`SIZE_ARM`: another model size over a 2 x 2 subset of the grid, fitted
  with the :data:`SIZE_REFERENCE` arm's runs at the same cells and seeds): the size exponent
  with its CI and whether it lies inside a stated margin of 0.
"""

from __future__ import annotations

from collections.abc import Callable

from kedro.pipeline import Node, Pipeline

from ih_kedro.pipelines.law_fit.pipeline import corpus_stage, trained_stages

from .nodes import (
    corpus_growth,
    mechanism_contrast_table,
    mechanism_exponents_figure,
    mechanism_fits,
    reference_contrast_table,
    reference_warmup_table,
    repetition_curves,
    repetition_curves_figure,
    size_term,
)

EXPERIMENT = "law_mechanisms"
ARMS = ("today", "growing_repetition", "distance_window", "both", "setup_check")
"""The arms whose laws are compared (each has its own parameter block)."""
REFERENCE_ARM = "reference_schedule"
"""The reference's schedule semantics (warm-up and cosine horizon fixed in tokens, so ∝ 1/(B·C)
steps) over its own grid: over an hour on 2 CPU cores, so not in ``law_mechanisms`` but in
``law_mechanisms_reference``, with the two arms it is contrasted with (:data:`REFERENCE_ARMS`)."""
REFERENCE_ARMS = ("today", "setup_check", REFERENCE_ARM)
"""``law_mechanisms_reference``'s arms: today's recipe, the published optimizer over a fixed step
budget, and the reference's token-fixed schedule (their runs are shared with ``law_mechanisms``:
the sweep skips the runs either pipeline already trained)."""
SIZE_ARM = "size"
SIZE_REFERENCE = "today"
"""The arm whose runs at the size arm's cells give the size term its other model size."""


def curves_pipeline() -> Pipeline:
    """The repetition curves, their figure and the corpus's growth exponent."""
    return Pipeline(
        [
            Node(repetition_curves, ["train_tokens", f"params:{EXPERIMENT}.repetition_curve"],
                 f"{EXPERIMENT}.repetition_curve", name="repetition_curves"),
            Node(repetition_curves_figure, f"{EXPERIMENT}.repetition_curve",
                 f"{EXPERIMENT}.repetition_curve_plot", name="plot_repetition_curves"),
            Node(corpus_growth, [f"{EXPERIMENT}.repetition_curve", f"params:{EXPERIMENT}.growth"],
                 f"{EXPERIMENT}.corpus_growth", name="corpus_growth"),
        ],
        namespace=EXPERIMENT,
        inputs={"train_tokens"},
        parameters={f"params:{EXPERIMENT}.repetition_curve", f"params:{EXPERIMENT}.growth"},
        outputs={f"{EXPERIMENT}.repetition_curve", f"{EXPERIMENT}.repetition_curve_plot",
                 f"{EXPERIMENT}.corpus_growth"},
    )  # fmt: skip


def arm_pipeline(arm: str) -> Pipeline:
    """One arm's training sweep and telemetry in the namespace ``law_mechanisms.<arm>``."""
    return trained_stages(f"{EXPERIMENT}.{arm}")


def laws_pipeline(arms: tuple[str, ...], prefix: str, contrasts: Callable) -> Pipeline:
    """One law per arm of ``arms`` (``law_mechanisms.<prefix>_fits``), their contrasts
    (``<prefix>_contrasts``, by the node function ``contrasts``) and the exponents figure
    (``<prefix>_exponents_plot``)."""
    tables = {arm: f"{EXPERIMENT}.{arm}.emergence_table" for arm in arms}
    fits, table = f"{EXPERIMENT}.{prefix}_fits", f"{EXPERIMENT}.{prefix}_contrasts"
    plot = f"{EXPERIMENT}.{prefix}_exponents_plot"
    return Pipeline(
        [
            Node(mechanism_fits, {"params": f"params:{EXPERIMENT}.fits", **tables}, fits,
                 name=f"{prefix}_fits"),
            Node(contrasts, {"params": f"params:{EXPERIMENT}.fits", **tables}, table,
                 name=f"{prefix}_contrasts"),
            Node(mechanism_exponents_figure, fits, plot, name=f"plot_{prefix}_exponents"),
        ],
        namespace=EXPERIMENT,
        inputs=set(tables.values()),
        parameters={f"params:{EXPERIMENT}.fits"},
        outputs={fits, table, plot},
    )  # fmt: skip


def size_pipeline() -> Pipeline:
    """The size term: the size arm's runs with the :data:`SIZE_REFERENCE` arm's at its cells."""
    return Pipeline(
        [
            Node(size_term, [f"{EXPERIMENT}.{SIZE_ARM}.emergence_table",
                             f"{EXPERIMENT}.{SIZE_ARM}.sweep_manifest", f"params:{EXPERIMENT}.fits",
                             f"{EXPERIMENT}.{SIZE_REFERENCE}.emergence_table",
                             f"{EXPERIMENT}.{SIZE_REFERENCE}.sweep_manifest"],
                 f"{EXPERIMENT}.size_term", name="size_term"),
        ],
        namespace=EXPERIMENT,
        inputs={f"{EXPERIMENT}.{SIZE_ARM}.emergence_table",
                f"{EXPERIMENT}.{SIZE_ARM}.sweep_manifest",
                f"{EXPERIMENT}.{SIZE_REFERENCE}.emergence_table",
                f"{EXPERIMENT}.{SIZE_REFERENCE}.sweep_manifest"},
        parameters={f"params:{EXPERIMENT}.fits"},
        outputs={f"{EXPERIMENT}.size_term"},
    )  # fmt: skip


def fits_pipeline(arms: tuple[str, ...] = ARMS) -> Pipeline:
    """One law per arm of ``arms`` (``mechanism_*``: each against ``today``), the size term."""
    return laws_pipeline(arms, "mechanism", mechanism_contrast_table) + size_pipeline()


def create_pipeline(arms: tuple[str, ...] = ARMS, **kwargs) -> Pipeline:  # noqa: ANN003
    """The experiment over ``arms`` (default :data:`ARMS`) and the size arm."""
    trained = Pipeline([])
    for arm in (*arms, SIZE_ARM):
        trained += arm_pipeline(arm)
    return corpus_stage() + curves_pipeline() + trained + fits_pipeline(tuple(arms))


def reference_fits_pipeline() -> Pipeline:
    """The laws of :data:`REFERENCE_ARMS`, their contrasts (each against ``today``, and the
    reference arm against ``setup_check``), the exponents figure and the reference arm's warm-up
    against its measured emergence, in their own datasets (``law_mechanisms.reference_*``:
    ``law_mechanisms.csv`` stays ``law_mechanisms``' own)."""
    table = f"{EXPERIMENT}.{REFERENCE_ARM}.emergence_table"
    training = f"params:{EXPERIMENT}.{REFERENCE_ARM}.training"
    warmup = Pipeline(
        [
            Node(reference_warmup_table, [table, f"params:{EXPERIMENT}.fits", training],
                 f"{EXPERIMENT}.reference_warmup", name="reference_warmup"),
        ],
        namespace=EXPERIMENT,
        inputs={table},
        parameters={f"params:{EXPERIMENT}.fits", training},
        outputs={f"{EXPERIMENT}.reference_warmup"},
    )  # fmt: skip
    return laws_pipeline(REFERENCE_ARMS, "reference", reference_contrast_table) + warmup


def reference_pipeline() -> Pipeline:
    """``law_mechanisms_reference``: :data:`REFERENCE_ARMS` trained and fitted."""
    trained = Pipeline([])
    for arm in REFERENCE_ARMS:
        trained += arm_pipeline(arm)
    return corpus_stage() + trained + reference_fits_pipeline()
