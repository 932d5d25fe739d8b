"""An independent CR2 (Bell–McCaffrey) reference for the tests: cluster-robust OLS covariance
with each cluster's residuals scaled by ``(I - H_gg)^(-1/2)`` (scipy's matrix square root) and
the Bell–McCaffrey degrees of freedom from the eigenvalues of ``G'G`` (Imbens & Kolesár 2016,
eq. 9), written without the package's code."""

from __future__ import annotations

import numpy as np
import scipy.linalg


def cr2_reference(
    y: np.ndarray, X: np.ndarray, groups: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(params (p,), CR2 covariance (p, p), Bell–McCaffrey df per coefficient (p,))``."""
    XtX_inv = scipy.linalg.inv(X.T @ X)
    params = XtX_inv @ X.T @ y
    residuals = y - X @ params
    M = np.eye(len(y)) - X @ XtX_inv @ X.T
    labels = list(dict.fromkeys(groups.tolist()))
    meat = np.zeros((X.shape[1], X.shape[1]))
    columns = {j: [] for j in range(X.shape[1])}
    for label in labels:
        idx = np.flatnonzero(groups == label)
        A = np.real(scipy.linalg.sqrtm(scipy.linalg.inv(M[np.ix_(idx, idx)])))
        score = X[idx].T @ A @ residuals[idx]
        meat += np.outer(score, score)
        for j in range(X.shape[1]):
            columns[j].append(M[:, idx] @ A @ X[idx] @ XtX_inv[:, j])
    cov = XtX_inv @ meat @ XtX_inv
    df = []
    for j in range(X.shape[1]):
        G = np.column_stack(columns[j])
        eig = np.linalg.eigvalsh(G.T @ G)
        df.append(eig.sum() ** 2 / (eig**2).sum())
    return params, cov, np.array(df)
