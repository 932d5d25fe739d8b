"""Study 2 (Bi-Induct): are engineered induction signatures load-bearing?"""

from .pipeline import create_pipeline

__all__ = ["create_pipeline"]
