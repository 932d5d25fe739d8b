"""``law_mechanisms_reference``: the ``reference_schedule`` arm beside ``today`` and ``setup_check``.

The reference code's schedule is fixed in *tokens*: warm-up 1 % and a cosine to 0 over a token
budget, so both last ∝ 1/(B·C) steps, a schedule that by itself ties the emergence step to B
and C. The arm trains today's data with those semantics at our scale
(``params:law_mechanisms.reference_schedule``: AdamW (0.9, 0.999), weight decay 0,
``warmup_fraction`` 0.01 of ``horizon_tokens``) over C ∈ {32, 64, 128} × B ∈ {32, 128} × 3
seeds, beside the two arms it is contrasted with: ``today`` (today's recipe) and
``setup_check`` (the published optimizer shape over a fixed step budget). Over an hour on 2 CPU
cores, so it is its own pipeline rather than part of the ``law_mechanisms`` default. Its own
tables (``law_mechanisms_reference.csv``, ``law_mechanisms_reference_contrasts.csv``); the
``today`` and ``setup_check`` runs are shared with ``law_mechanisms`` (the sweep skips the runs
already trained).
"""

from __future__ import annotations

from kedro.pipeline import Pipeline

from ih_kedro.pipelines.law_mechanisms.pipeline import reference_pipeline


def create_pipeline(**kwargs) -> Pipeline:  # noqa: ANN003 - Kedro's signature
    return reference_pipeline()
