"""``law_mechanisms``: why the context size does (not) act in the emergence law.

Built so far: the **repetition curves** — the share of each window that an induction rule
predicts, for C from 16 to 1,024, for the corpus the data stage prepared (the embedded KJV, or
the Pile shards it is pointed at) and for the data variants the law is trained on
(``params:law_mechanisms.repetition_curve.sources``), with a t CI over windows:
``law_mechanisms.repetition_curve`` (csv) and its figure. Not built yet: the variants that
switch one mechanism at a time, the set-up check and the size term of the issue that asks for
this pipeline (README, "Not built yet").
"""

from __future__ import annotations

from kedro.pipeline import Node, Pipeline

from ih_kedro.pipelines.law_fit.pipeline import corpus_stage

from .nodes import repetition_curves, repetition_curves_figure

EXPERIMENT = "law_mechanisms"


def create_pipeline(**kwargs) -> Pipeline:  # noqa: ANN003 - Kedro's signature
    curves = Pipeline(
        [
            Node(repetition_curves, ["train_tokens", f"params:{EXPERIMENT}.repetition_curve"],
                 f"{EXPERIMENT}.repetition_curve", name="repetition_curves"),
            Node(repetition_curves_figure, f"{EXPERIMENT}.repetition_curve",
                 f"{EXPERIMENT}.repetition_curve_plot", name="plot_repetition_curves"),
        ],
        namespace=EXPERIMENT,
        inputs={"train_tokens"},
        parameters={f"params:{EXPERIMENT}.repetition_curve"},
        outputs={f"{EXPERIMENT}.repetition_curve", f"{EXPERIMENT}.repetition_curve_plot"},
    )  # fmt: skip
    return corpus_stage() + curves
