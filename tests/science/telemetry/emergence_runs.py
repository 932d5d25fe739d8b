"""Synthetic per-checkpoint score samples shared by the emergence and emergence-table tests."""

from __future__ import annotations

import math

import numpy as np

STEPS = np.arange(50.0, 2001.0, 50.0)  # (K,)


def log_logistic(steps: np.ndarray, midpoint: float, low=0.03, rise=0.6, width=0.15):
    """A curve that is a logistic in log-step with its midpoint at ``midpoint`` steps."""
    return low + rise / (1.0 + np.exp(-(np.log(steps) - math.log(midpoint)) / width))


def head_samples(curve: np.ndarray, *, n=100, layers=2, heads=4, sd=0.1, seed=0) -> np.ndarray:
    """(K, n, layers, heads) PS samples: layer 1 head 2 follows ``curve``, the rest baseline."""
    rng = np.random.default_rng(seed)
    base = np.full((curve.size, n, layers, heads), 0.03)
    base[:, :, 1, 2] = curve[:, None]
    # Layer 0 gets a strong previous-token-like head that min_layer=1 must ignore.
    base[:, :, 0, 0] = 0.9
    return base + rng.normal(0.0, sd, size=base.shape)


def model_level(curve, n=4):
    """(K, n) samples that all equal ``curve``."""
    curve = np.asarray(curve, dtype=float)
    return np.repeat(curve[:, None], n, axis=1)
