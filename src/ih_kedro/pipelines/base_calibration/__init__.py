"""``base_calibration``: the natural-most Bi-Induct base, the least enrichment that forms heads."""

from .pipeline import create_pipeline

__all__ = ["create_pipeline"]
