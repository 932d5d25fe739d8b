"""``pareto``: the frequency x reliability frontier of induction-head formation."""

from .pipeline import create_pipeline

__all__ = ["create_pipeline"]
