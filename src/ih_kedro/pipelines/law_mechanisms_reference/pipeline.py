"""``law_mechanisms_reference``: every ``law_mechanisms`` arm plus ``reference_schedule``.

The reference code's schedule is fixed in *tokens*: warm-up 1 % and a cosine to 0 over a token
budget, so both last ∝ 1/(B·C) steps, a schedule that by itself ties the emergence step to B
and C. The arm trains today's data with those semantics at our scale
(``params:law_mechanisms.reference_schedule``: AdamW (0.9, 0.999), weight decay 0,
``warmup_fraction`` 0.01 of ``horizon_tokens``) over C ∈ {32, 64, 128} × B ∈ {32, 128} × 3
seeds. Over an hour on 2 CPU cores, so it is its own pipeline rather than part of the
``law_mechanisms`` default: the same datasets (``law_mechanisms.csv`` gains the arm's row, the
contrasts its row against ``today``), and the arms already trained are skipped by the sweep.
"""

from __future__ import annotations

from kedro.pipeline import Pipeline

from ih_kedro.pipelines.law_mechanisms.pipeline import ARMS, REFERENCE_ARM
from ih_kedro.pipelines.law_mechanisms.pipeline import create_pipeline as law_mechanisms


def create_pipeline(**kwargs) -> Pipeline:  # noqa: ANN003 - Kedro's signature
    return law_mechanisms(arms=(*ARMS, REFERENCE_ARM))
