"""The design of the emergence law's regression, from an emergence table.

Checks an emergence table (one metric, method and threshold; positive sizes; numeric extra
covariates), reads which runs are right-censored, and builds the log-space design of
``log S* = log T - a log B - b log C (+ extra covariates)``: the response, the columns that
vary (a single B or C leaves its exponent out, held as a constant) and each run's
configuration, the unit of leave-one-out and of clustering.

Plain numpy/pandas; no Kedro imports.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

logger = logging.getLogger(__name__)

RESPONSES = ("step", "tokens")
LOG_BATCH_SIZE = "log_batch_size"
LOG_CONTEXT_LENGTH = "log_context_length"


@dataclass
class Design:
    """The law's regression in log space: response, design matrix, censoring, the log B / log C
    held fixed when not identifiable, which exponents the data identify, and the clusters."""

    y: np.ndarray  # (n,) log response; for censored rows the censoring point
    X: pd.DataFrame  # (n, p) with columns const, [log_batch_size], [log_context_length], extra
    censored: np.ndarray  # (n,) bool
    constants: dict[str, float]
    identifiable: dict[str, bool]
    groups: np.ndarray | None = None  # (n,) configuration of each run, for clustered CIs


def validate_table(table: pd.DataFrame, response: str, extra: Sequence[str]) -> None:
    """Raise ``ValueError`` naming the problem when ``table`` cannot be fitted as one law."""
    if response not in RESPONSES:
        raise ValueError(f"response: expected one of {RESPONSES}, got {response!r}")
    required = ["step", "batch_size", "context_length", *extra]
    missing = [c for c in required if c not in table.columns]
    if missing:
        raise ValueError(f"emergence table: missing columns {missing}")
    for column in ("metric", "method", "threshold"):
        if column in table.columns and table[column].nunique(dropna=True) > 1:
            values = sorted(table[column].dropna().unique().tolist())  # plain, not np.float64
            raise ValueError(
                f"emergence table: one law per {column}; got {values} (select rows before fitting)"
            )
    for column in ("batch_size", "context_length"):
        values = pd.to_numeric(table[column], errors="coerce")
        if values.isna().any() or (values <= 0).any():
            raise ValueError(f"emergence table: {column} must be positive numbers")
    for column in extra:
        if not pd.api.types.is_numeric_dtype(table[column]):
            raise ValueError(
                f"extra_covariates: {column!r} is not numeric; encode it numerically "
                "(e.g. log n_parameters) before fitting"
            )


def censored_mask(table: pd.DataFrame) -> np.ndarray:
    """Which runs are right-censored, ``(n,)`` bool: the ``censored`` column (missing = not
    censored), else a missing ``step``; uncensored runs must have a positive step."""
    if "censored" in table.columns:
        censored = table["censored"].fillna(False).astype(bool).to_numpy()
    else:
        censored = table["step"].isna().to_numpy()
    step = pd.to_numeric(table["step"], errors="coerce").to_numpy(dtype=float)
    bad = ~censored & ~(np.isfinite(step) & (step > 0))
    if bad.any():
        names = table.get("run_name", pd.Series(range(len(table)))).to_numpy()[bad]
        raise ValueError(
            f"emergence table: step must be a positive number for uncensored runs; "
            f"bad rows: {list(names)[:5]}"
        )
    return censored


def build_design(
    table: pd.DataFrame, response: str, censored: np.ndarray, extra: Sequence[str]
) -> Design:
    """The log-space design of ``table``'s runs; censored runs' response is ``log(last_step)``.

    A B (C) that never varies is left out of the design and held as a constant (its exponent
    not identifiable); a constant extra covariate is left out with a warning.
    """
    batch = table["batch_size"].to_numpy(dtype=float)
    context = table["context_length"].to_numpy(dtype=float)
    step = table["step"].to_numpy(dtype=float)
    if censored.any():
        if "last_step" not in table.columns:
            raise ValueError("emergence table: censored runs need a last_step column")
        last = table["last_step"].to_numpy(dtype=float)
        if not np.all(np.isfinite(last[censored]) & (last[censored] > 0)):
            raise ValueError("emergence table: last_step must be positive for censored runs")
        step = np.where(censored, last, step)
    y = np.log(step)
    if response == "tokens":
        y = y + np.log(batch) + np.log(context)

    columns: dict[str, np.ndarray] = {"const": np.ones(len(table))}
    constants: dict[str, float] = {}
    identifiable: dict[str, bool] = {}
    for name, key, values in ((LOG_BATCH_SIZE, "a", batch), (LOG_CONTEXT_LENGTH, "b", context)):
        logs = np.log(values)
        identifiable[key] = bool(np.ptp(logs) > 0) if logs.size else False
        if identifiable[key]:
            columns[name] = logs
        elif logs.size:
            constants[name] = float(logs[0])
    for column in extra:
        values = table[column].to_numpy(dtype=float)
        if np.ptp(values) == 0:
            logger.warning("extra_covariates: %r is constant; left out of the design", column)
            continue
        columns[column] = values
    X = pd.DataFrame(columns, index=table.index)
    return Design(y=y, X=X, censored=censored, constants=constants, identifiable=identifiable)


def configuration_keys(table: pd.DataFrame) -> pd.Series:
    """Each run's configuration as a string key ``B|C[|preset]``."""
    keys = ["batch_size", "context_length"] + (["preset"] if "preset" in table.columns else [])
    return table[keys].astype(str).agg("|".join, axis=1)
