"""``markov_full_vocab``: the ``markov`` pipeline in the namespace ``markov_full_vocab``.

The same processes, calibration, sweep, telemetry and verdicts as ``markov``, with the models
over the tokenizer's full vocabulary (``params:markov_full_vocab.vocabulary.compact`` false;
every other parameter is ``markov``'s, by a YAML merge key in conf/base/parameters_markov.yml).
Its datasets are ``markov_full_vocab.<name>`` under ``data/*/markov_full_vocab/`` (the
``markov{variant}.<name>`` factories of conf/base/catalog_markov.yml, the stage factories for
the rest), so both runs sit side by side and ``ih_kedro.report`` reads both verdicts.
"""

from __future__ import annotations

from kedro.pipeline import Pipeline

from ih_kedro.pipelines.markov.pipeline import markov_pipeline

EXPERIMENT = "markov_full_vocab"


def create_pipeline(**kwargs) -> Pipeline:  # noqa: ANN003 - Kedro's signature
    return markov_pipeline(EXPERIMENT)
