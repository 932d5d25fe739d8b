"""``model_choice``: which affordable model has a load-bearing top head in the Bi-Induct base?"""

from .pipeline import create_pipeline

__all__ = ["create_pipeline"]
