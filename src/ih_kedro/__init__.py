"""ih-kedro: when and why induction heads form, and whether they are load-bearing."""

__version__ = "0.1.0"
