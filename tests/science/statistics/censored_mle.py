"""An independent right-censored Gaussian MLE (Tobit), the reference for the emergence-law tests.

Written with scipy densities and Nelder-Mead, sharing nothing with the Newton solver in
``ih_kedro.science.statistics.censored_regression``.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from scipy import optimize, stats


def censored_normal_nll(
    y: np.ndarray, X: np.ndarray, censored: np.ndarray
) -> Callable[[np.ndarray], float]:
    """The negative log-likelihood of ``theta = (beta..., log sigma)``."""

    def nll(theta: np.ndarray) -> float:
        mu, sigma = X @ theta[:-1], math.exp(theta[-1])
        return -float(
            stats.norm.logpdf(y[~censored], mu[~censored], sigma).sum()
            + stats.norm.logsf(y[censored], mu[censored], sigma).sum()
        )

    return nll


def censored_normal_mle(
    y: np.ndarray, X: np.ndarray, censored: np.ndarray, *, xatol: float, fatol: float
) -> np.ndarray:
    """``theta = (beta..., log sigma)`` maximising the likelihood, from the least-squares start."""
    start = np.append(np.linalg.lstsq(X, y, rcond=None)[0], math.log(np.std(y)))
    return optimize.minimize(
        censored_normal_nll(y, X, censored),
        start,
        method="Nelder-Mead",
        options={"xatol": xatol, "fatol": fatol, "maxiter": 40_000},
    ).x


def independent_tobit(y: np.ndarray, X: np.ndarray, censored: np.ndarray) -> np.ndarray:
    """Right-censored Gaussian MLE (beta, sigma) with scipy densities and Nelder-Mead."""
    theta = censored_normal_mle(y, X, censored, xatol=1e-11, fatol=1e-13)
    return np.append(theta[:-1], math.exp(theta[-1]))
