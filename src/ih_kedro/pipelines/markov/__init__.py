"""``markov``: which statistical properties of data make induction heads form (Experiment 3)."""

from .pipeline import create_pipeline

__all__ = ["create_pipeline"]
