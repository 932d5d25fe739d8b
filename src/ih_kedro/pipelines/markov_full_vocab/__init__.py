"""``markov_full_vocab``: the ``markov`` experiment over the full vocabulary, beside markov."""

from .pipeline import EXPERIMENT, create_pipeline

__all__ = ["EXPERIMENT", "create_pipeline"]
