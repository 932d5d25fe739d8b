"""Experiment 1: the emergence law ``S* = T / (B^a C^b)``."""

from .pipeline import create_pipeline

__all__ = ["create_pipeline"]
