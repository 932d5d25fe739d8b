"""Training stage: a sweep of DeepSpeed training runs writing checkpoints and a manifest."""

from .pipeline import create_pipeline

__all__ = ["create_pipeline"]
