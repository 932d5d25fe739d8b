"""``law_mechanisms_reference``: ``law_mechanisms`` with the ``reference_schedule`` arm."""

from .pipeline import create_pipeline

__all__ = ["create_pipeline"]
