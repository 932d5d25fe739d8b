"""``law_mechanisms``: why the context size does (not) act in the emergence law."""

from .pipeline import create_pipeline

__all__ = ["create_pipeline"]
