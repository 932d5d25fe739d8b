"""Synthetic emergence tables from the law ``S* = T / (B^a C^b)``, shared by the emergence-law
test files (the fit, its design, its prediction and their known-answer variants)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ih_kedro.science.statistics.emergence_law import fit_emergence_law

A, B, T = 0.37, 0.62, 1e5
BATCHES = (32, 64, 128)
CONTEXTS = (32, 64, 128)
GRID = (32, 64, 128)


def synthetic_table(
    *,
    seed: int = 0,
    sd: float = 0.05,
    batches=BATCHES,
    contexts=CONTEXTS,
    n_seeds: int = 3,
    a: float = A,
    b: float = B,
) -> pd.DataFrame:
    """Emergence steps from the law with log-normal noise, one row per (B, C, seed)."""
    rng = np.random.default_rng(seed)
    rows = []
    for bs in batches:
        for c in contexts:
            for s in range(n_seeds):
                step = T / (bs**a * c**b) * math.exp(rng.normal(0, sd))
                rows.append(
                    {
                        "run_name": f"b{bs}_c{c}_s{s}",
                        "metric": "prefix_matching",
                        "method": "threshold",
                        "step": step,
                        "tokens": step * bs * c,
                        "censored": False,
                        "threshold": 0.4,
                        "last_step": 10 * step,
                        "preset": "attn2l",
                        "batch_size": bs,
                        "context_length": c,
                        "seed": s,
                    }
                )
    return pd.DataFrame(rows)


def law_table(
    batches: tuple[float, ...] = (32, 64, 128),
    contexts: tuple[float, ...] = (32, 64, 128),
    n_seeds: int = 2,
    sd: float = 0.1,
    seed: int = 0,
) -> pd.DataFrame:
    """Emergence steps from the law with log-normal noise, one row per (B, C, seed)."""
    rng = np.random.default_rng(seed)
    rows = [
        {
            "run_name": f"b{bs}_c{c}_s{s}",
            "batch_size": bs,
            "context_length": c,
            "seed": s,
            "step": T / (bs**A * c**B) * math.exp(rng.normal(0, sd)),
        }
        for bs in batches
        for c in contexts
        for s in range(n_seeds)
    ]
    return pd.DataFrame(rows)


def grid_table(seed: int = 0, sd: float = 0.05, n_seeds: int = 3) -> pd.DataFrame:
    """Emergence steps on the ``GRID`` x ``GRID`` cells, ``n_seeds`` runs each, none censored."""
    table = law_table(GRID, GRID, n_seeds=n_seeds, sd=sd, seed=seed)
    return table.assign(censored=False)


def design(table: pd.DataFrame) -> np.ndarray:
    """The law's design matrix of ``table``: const, log B, log C."""
    return np.column_stack(
        [
            np.ones(len(table)),
            np.log(table.batch_size.to_numpy(float)),
            np.log(table.context_length.to_numpy(float)),
        ]
    )  # (n, 3)


def classical_fit(*args, **kwargs):
    """``fit_emergence_law`` with the classical covariance unless a test asks otherwise: the value
    tests pin the level, interval and likelihood arithmetic against plain statsmodels OLS / an
    independent MLE; the cluster-robust covariance (the default with seed replicates) is pinned
    in its own tests."""
    kwargs.setdefault("cluster_by_configuration", False)
    return fit_emergence_law(*args, **kwargs)
