"""Statistics: the emergence law ``S* = T / (B^a C^b)`` fitted, tested and used to predict."""

from .pipeline import create_pipeline

__all__ = ["create_pipeline"]
