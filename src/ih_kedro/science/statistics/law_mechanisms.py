"""The emergence law per mechanism arm, in one table, and the law with a model-size term.

The mechanism experiment trains the same (B, C) grid under several data recipes (``today``,
``growing_repetition``, ``distance_window``, ``both``) and an optimizer ``setup_check`` arm, and
fits ``log S* = log T - a log B - b log C`` once per arm with
:func:`~ih_kedro.science.statistics.emergence_law.fit_emergence_law` (OLS on the runs that
emerged by default, cluster-robust CIs by configuration, seeds inside). Each arm's exponents are
tested against the published forms (:data:`PUBLISHED_FORMS`) by the fit's own joint Wald test:
the fit is called once per form with that form as its reference exponents. The test is the
fit's: ``F`` on (exponents tested, residual df) for OLS, where the residual df is G - k with G
configurations and k coefficients under the cluster-robust covariance; ``chi2`` on the exponents
tested for a classical Tobit fit; under the CR2 covariance the denominator df is Hotelling's
(the smallest Bell–McCaffrey df of the tested exponents, minus the exponents tested, plus one).

:func:`mechanism_contrasts` compares each arm with the reference arm (``today``) in one pooled
fit per pair: the differences of the exponents with cluster-robust CIs, the share of the gap to
the published ``b`` a switch closes, and a verdict per exponent (:func:`contrast_verdict`).

:func:`size_term_fit` adds ``log size`` to the law (``S* ∝ size^(-c)``) and asks whether the
size exponent ``c`` is negligible: its CI inside ``[-margin, margin]``.

Plain numpy/scipy/statsmodels/pandas; no Kedro imports.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from ih_kedro.science.statistics.censored_regression import (
    RegressionFit,
    coefficient_ci,
    coefficient_df,
    fit_ols,
)
from ih_kedro.science.statistics.emergence_law import (
    CENSORED_HANDLING,
    EmergenceLawFit,
    fit_emergence_law,
)
from ih_kedro.science.statistics.law_design import RESPONSES

logger = logging.getLogger(__name__)

# Published step exponents (a of B, b of C): S* ∝ 1/sqrt(B C) and the seed study's fit.
PUBLISHED_FORMS: dict[str, tuple[float, float]] = {
    "aoyama_sqrt_BC": (0.5, 0.5),
    "seed_study": (0.37, 0.62),
}
DEFAULT_OPTIONS: dict[str, Any] = {
    "response": "step",
    "censored": "exclude",
    "level": 0.95,
    "leave_one_out": True,
    "forms": PUBLISHED_FORMS,
}
BASE_COLUMNS = [
    "arm",
    "n_runs",
    "n_emerged",
    "n_configurations",
    "n_seeds",
    "a",
    "a_ci_low",
    "a_ci_high",
    "b",
    "b_ci_low",
    "b_ci_high",
    "T",
    "r_squared",
    "loo_r_log",
]
TAIL_COLUMNS = ["n_clusters", "df_resid", "wald_test", "note"]


def table_columns(forms: Mapping[str, Any] = PUBLISHED_FORMS) -> list[str]:
    """The columns of :func:`mechanism_fit_table` for the published ``forms``."""
    wald = [f"wald_{form}_{part}" for form in forms for part in ("statistic", "df", "p_value")]
    return [*BASE_COLUMNS, *wald, *TAIL_COLUMNS]


def _settings(options: Mapping[str, Any] | None) -> dict[str, Any]:
    """:data:`DEFAULT_OPTIONS` updated by ``options``; unknown keys and bad values raise."""
    options = dict(options or {})
    unknown = sorted(set(options) - set(DEFAULT_OPTIONS))
    if unknown:
        raise ValueError(
            f"mechanism fits: unknown options {unknown}; expected {sorted(DEFAULT_OPTIONS)}"
        )
    settings = {**DEFAULT_OPTIONS, **options}
    if settings["response"] not in RESPONSES:
        raise ValueError(f"response: expected one of {RESPONSES}, got {settings['response']!r}")
    if settings["censored"] not in CENSORED_HANDLING:
        raise ValueError(
            f"censored: expected one of {CENSORED_HANDLING}, got {settings['censored']!r}"
        )
    if not 0 < settings["level"] < 1:
        raise ValueError(f"level: must be in (0, 1), got {settings['level']}")
    forms = settings["forms"]
    if not forms or any(len(exponents) != 2 for exponents in forms.values()):
        raise ValueError("forms: expected {name: (a, b)} with at least one form")
    return settings


def emerged_mask(table: pd.DataFrame) -> np.ndarray:
    """Which runs emerged, ``(n,)`` bool: ``status == "emerged"`` when the table has a status,
    else not ``censored`` (missing = not censored); and always a positive, finite ``step``."""
    step = pd.to_numeric(table["step"], errors="coerce").to_numpy(dtype=float)
    has_step = np.isfinite(step) & (step > 0)
    if "status" in table.columns:
        return (table["status"].astype(str) == "emerged").to_numpy() & has_step
    if "censored" in table.columns:
        return ~table["censored"].fillna(False).astype(bool).to_numpy() & has_step
    return has_step


def _counts(table: pd.DataFrame) -> dict[str, int]:
    """Runs in the arm's table, runs that emerged, and the (B, C) configurations and seeds
    among the runs that emerged."""
    if "step" not in table.columns:
        return {"n_runs": len(table), "n_emerged": 0, "n_configurations": 0, "n_seeds": 0}
    emerged = table.loc[emerged_mask(table)]
    keys = [c for c in ("batch_size", "context_length") if c in emerged.columns]
    n_configs = len(emerged[keys].drop_duplicates()) if keys else 0
    n_seeds = emerged["seed"].nunique() if "seed" in emerged.columns else 0
    return {
        "n_runs": len(table),
        "n_emerged": int(len(emerged)),
        "n_configurations": int(n_configs),
        "n_seeds": int(n_seeds),
    }


def _not_identifiable(fit: EmergenceLawFit) -> str:
    """``""`` when both exponents are identified, else the note naming the single level."""
    missing = [name for key, name in (("a", "B"), ("b", "C")) if not fit.identifiable[key]]
    if not missing:
        return ""
    return "not identifiable: one " + " and one ".join(missing) + " level"


def _unfitted_row(arm: str, counts: Mapping[str, int], columns: list[str], note: str) -> dict:
    """A row of NaNs for an arm that cannot be fitted: its counts and the reason in ``note``."""
    logger.warning("mechanism fits: arm %r not fitted (%s)", arm, note)
    row: dict[str, Any] = dict.fromkeys(columns, math.nan)
    row.update(arm=arm, **counts, wald_test="", note=note)
    return row


def _fits_per_form(table: pd.DataFrame, settings: Mapping[str, Any]) -> dict[str, EmergenceLawFit]:
    """One :func:`fit_emergence_law` per published form (its Wald reference); the estimates
    are the same in all, the leave-one-configuration-out refits run only in the first."""
    fits = {}
    for i, (form, (a, b)) in enumerate(settings["forms"].items()):
        fits[form] = fit_emergence_law(
            table,
            response=settings["response"],
            censored=settings["censored"],
            seed_exponents={"a": a, "b": b},
            level=settings["level"],
            leave_one_out=bool(settings["leave_one_out"]) and i == 0,
        )
    return fits


def _arm_row(
    arm: str, table: pd.DataFrame, settings: Mapping[str, Any], columns: list[str]
) -> dict[str, Any]:
    """One arm's row: its exponents with CIs, fit quality and a Wald test per form."""
    counts = _counts(table)
    try:
        fits = _fits_per_form(table, settings)
    except ValueError as error:
        return _unfitted_row(arm, counts, columns, f"not fitted: {error}")
    fit = next(iter(fits.values()))
    note = _not_identifiable(fit)
    if note:
        # A law with one exponent is another model: its b is not comparable across arms.
        return _unfitted_row(arm, counts, columns, note)
    if not fit.n_clusters:
        note = "classical covariance: too few configurations to cluster by"
    row: dict[str, Any] = {
        "arm": arm,
        **counts,
        "a": fit.a,
        "a_ci_low": fit.a_ci[0],
        "a_ci_high": fit.a_ci[1],
        "b": fit.b,
        "b_ci_low": fit.b_ci[0],
        "b_ci_high": fit.b_ci[1],
        "T": fit.T,
        "r_squared": fit.r_squared,
        "loo_r_log": fit.loo_r_log,
    }
    for form, form_fit in fits.items():
        row[f"wald_{form}_statistic"] = form_fit.wald_statistic
        row[f"wald_{form}_df"] = form_fit.wald_df
        row[f"wald_{form}_p_value"] = form_fit.wald_p_value
    row.update(n_clusters=fit.n_clusters, df_resid=fit.wald_df_denominator, wald_test=fit.wald_test)
    row["note"] = note
    return row


def mechanism_fit_table(
    emergence_tables: Mapping[str, pd.DataFrame], options: Mapping[str, Any] | None = None
) -> pd.DataFrame:
    """The emergence law fitted once per mechanism arm, one row per arm.

    Args:
        emergence_tables: ``{arm: emergence table}``, each one metric/method/threshold with
            ``step`` (S*, optimizer steps), ``batch_size`` (sequences), ``context_length``
            (tokens), and optionally ``status``, ``censored``, ``last_step``, ``seed``,
            ``run_name`` (as :func:`fit_emergence_law` reads them).
        options: overrides of :data:`DEFAULT_OPTIONS`: ``response`` (``step`` or ``tokens``),
            ``censored`` (``exclude`` or ``tobit``), ``level`` (CI level),
            ``leave_one_out`` (the leave-one-configuration-out r) and ``forms``
            (``{name: (a, b)}``, step exponents tested; default :data:`PUBLISHED_FORMS`).

    Returns:
        One row per arm, in the mapping's order, columns :func:`table_columns`: ``arm``;
        ``n_runs`` (rows of the arm's table), ``n_emerged``, ``n_configurations`` (distinct
        (B, C)) and ``n_seeds`` among the runs that emerged; ``a, a_ci_low, a_ci_high, b,
        b_ci_low, b_ci_high`` (exponents of B and C, cluster-robust CIs at ``level``), ``T``
        (the law's constant, in units of the response), ``r_squared`` (log space),
        ``loo_r_log``; per form ``wald_<form>_statistic``, ``wald_<form>_df`` (exponents
        tested, numerator df of the F) and ``wald_<form>_p_value``; ``n_clusters``,
        ``df_resid`` (the F's denominator df), ``wald_test`` (``F`` or ``chi2``) and ``note``.
        An arm that cannot be fitted (too few runs, a collinear design, missing columns) or
        whose B or C takes one level keeps its counts, has NaN estimates and says why in
        ``note``; it never raises.

    Raises:
        ValueError: unknown options or bad option values.
    """
    settings = _settings(options)
    columns = table_columns(settings["forms"])
    rows = [_arm_row(str(arm), table, settings, columns) for arm, table in emergence_tables.items()]
    return pd.DataFrame(rows, columns=columns)


# --------------------------------------------------------------------------------------------
# The law with a model-size term
# --------------------------------------------------------------------------------------------
def _exponent(core: RegressionFit, index: int, level: float) -> tuple[float, tuple[float, float]]:
    """The exponent ``-params[index]`` of a fit on ``log S*`` and its CI (bounds negated)."""
    low, high = coefficient_ci(core, index, level)
    return -float(core.params[index]), (-float(high), -float(low))


def _size_runs(table: pd.DataFrame, size_column: str) -> pd.DataFrame:
    """The runs that emerged, checked for positive B, C and size and for the levels the size
    term needs (>= 2 of each of B, C and size)."""
    missing = [c for c in ("step", "batch_size", "context_length", size_column) if c not in table]
    if missing:
        raise ValueError(f"size term: emergence table misses columns {missing}")
    runs = table.loc[emerged_mask(table)].reset_index(drop=True)
    for column in ("batch_size", "context_length", size_column):
        values = pd.to_numeric(runs[column], errors="coerce")
        if values.isna().any() or (values <= 0).any():
            raise ValueError(f"size term: {column} must be positive numbers")
    too_few = [
        f"{runs[column].nunique()} level(s) of {name} ({column})"
        for name, column in (("B", "batch_size"), ("C", "context_length"), ("size", size_column))
        if runs[column].nunique() < 2
    ]
    if too_few:
        raise ValueError(
            "size term: the runs that emerged need >= 2 levels of each of B, C and model size "
            f"(a 2x2 B x C grid at two sizes at least); got {', '.join(too_few)}"
        )
    return runs


def size_term_fit(
    emergence_table: pd.DataFrame,
    size_column: str = "n_parameters",
    margin: float = 0.1,
    level: float = 0.95,
) -> dict[str, Any]:
    """Fit ``log S* = log T - a log B - b log C - c log size`` over the runs that emerged.

    OLS (:func:`~ih_kedro.science.statistics.censored_regression.fit_ols`) with a covariance
    cluster-robust by configuration (B, C, size) when enough configurations repeat (t on
    G - 4 df), classical otherwise.

    Args:
        emergence_table: ``step`` (S*, steps), ``batch_size``, ``context_length``,
            ``size_column`` and optionally ``status`` / ``censored`` (only runs that emerged
            are fitted).
        size_column: the model size (e.g. parameters); only its log enters.
        margin: the size exponent is negligible when its CI lies inside ``[-margin, margin]``.
        level: CI level.

    Returns:
        ``c`` (S* ∝ size^(-c)), ``c_ci`` ``(low, high)``, ``p_value`` (two-sided t test of
        c = 0), ``inside_margin``, ``margin``, ``level``, ``a``, ``a_ci``, ``b``, ``b_ci``,
        ``n_runs``, ``n_clusters`` (0 for the classical covariance), ``df_resid``.

    Raises:
        ValueError: missing columns, non-positive values, fewer than 2 levels of B, C or
            size among the runs that emerged, a collinear design or too few runs.
    """
    if not 0 < level < 1:
        raise ValueError(f"level: must be in (0, 1), got {level}")
    if margin < 0:
        raise ValueError(f"margin: must be >= 0, got {margin}")
    runs = _size_runs(emergence_table, size_column)
    columns = ("batch_size", "context_length", size_column)
    logs = np.log(runs[list(columns)].to_numpy(dtype=float))  # (n, 3): log B, log C, log size
    X = np.column_stack([np.ones(len(runs)), logs])  # (n, 4)
    if np.linalg.matrix_rank(X) < X.shape[1]:
        raise ValueError("size term: B, C and size are collinear; vary them independently")
    if len(runs) <= X.shape[1]:
        raise ValueError(f"size term: {len(runs)} runs that emerged for 4 coefficients")
    groups = runs[list(columns)].astype(str).agg("|".join, axis=1).to_numpy()
    core = fit_ols(np.log(runs["step"].to_numpy(dtype=float)), X, groups)

    a, a_ci = _exponent(core, 1, level)
    b, b_ci = _exponent(core, 2, level)
    c, c_ci = _exponent(core, 3, level)
    se = math.sqrt(core.cov[3, 3]) if core.cov[3, 3] > 0 else math.nan
    p_value = float(2 * stats.t.sf(abs(c) / se, coefficient_df(core, 3))) if se > 0 else math.nan
    return {
        "c": c,
        "c_ci": c_ci,
        "p_value": p_value,
        "inside_margin": bool(-margin <= c_ci[0] and c_ci[1] <= margin),
        "margin": float(margin),
        "level": float(level),
        "a": a,
        "a_ci": a_ci,
        "b": b,
        "b_ci": b_ci,
        "n_runs": int(len(runs)),
        "n_clusters": int(core.n_clusters),
        "df_resid": float(core.df_resid),
    }


# --------------------------------------------------------------------------------------------
# Each arm against the reference arm: how far a switch moves the exponents
# --------------------------------------------------------------------------------------------
CONTRAST_COLUMNS = [
    "arm",
    "reference",
    "delta_a",
    "delta_a_ci_low",
    "delta_a_ci_high",
    "delta_b",
    "delta_b_ci_low",
    "delta_b_ci_high",
    "share_of_b_gap",
    "verdict_a",
    "verdict_b",
    "n_runs",
    "n_clusters",
    "df_resid",
    "note",
]


def _emerged_runs(table: pd.DataFrame) -> pd.DataFrame:
    missing = [c for c in ("step", "batch_size", "context_length") if c not in table.columns]
    if missing:
        raise ValueError(f"emergence table misses columns {missing}")
    return table.loc[emerged_mask(table)].reset_index(drop=True)


def contrast_verdict(delta: float, ci: tuple[float, float], toward: float, margin: float) -> str:
    """How a switch moved an exponent, read on the CI of ``delta`` (arm minus reference).

    ``moves toward`` / ``moves away`` the published value (``toward`` is the sign of
    published minus the reference's value) when the CI excludes 0; ``no effect`` when it lies
    inside ``[-margin, margin]``; ``undecided`` otherwise (also for a NaN CI)."""
    low, high = ci
    if not (math.isfinite(low) and math.isfinite(high)):
        return "undecided"
    if low > 0 or high < 0:
        return "moves toward" if np.sign(delta) == np.sign(toward) else "moves away"
    if -margin <= low and high <= margin:
        return "no effect"
    return "undecided"


def _contrast(arm: pd.DataFrame, reference: pd.DataFrame, level: float):  # noqa: ANN202
    """Pooled OLS ``log S* = t0 + dt D - (a + da D) log B - (b + db D) log C`` (``D`` = 1 on
    the arm's runs), cluster-robust by (arm, B, C): ``(core, da, da_ci, db, db_ci)``."""
    runs = pd.concat([reference.assign(_arm=0.0), arm.assign(_arm=1.0)], ignore_index=True)
    d = runs["_arm"].to_numpy(dtype=float)  # (n,)
    log_b = np.log(runs["batch_size"].to_numpy(dtype=float))  # (n,)
    log_c = np.log(runs["context_length"].to_numpy(dtype=float))  # (n,)
    X = np.column_stack([np.ones(len(runs)), d, log_b, d * log_b, log_c, d * log_c])  # (n, 6)
    if np.linalg.matrix_rank(X) < X.shape[1] or len(runs) <= X.shape[1]:
        raise ValueError("needs >= 2 levels of B and of C in both arms and more runs than 6")
    groups = runs[["_arm", "batch_size", "context_length"]].astype(str).agg("|".join, axis=1)
    core = fit_ols(np.log(runs["step"].to_numpy(dtype=float)), X, groups.to_numpy())
    return (core, *_exponent(core, 3, level), *_exponent(core, 5, level))


def mechanism_contrasts(
    emergence_tables: Mapping[str, pd.DataFrame],
    reference: str = "today",
    *,
    published: tuple[float, float] = PUBLISHED_FORMS["aoyama_sqrt_BC"],
    margin: float = 0.2,
    level: float = 0.95,
) -> pd.DataFrame:
    """Each arm's exponents minus the reference arm's, from one pooled fit per pair.

    The pooled fit (:func:`_contrast`) shares nothing but the design between the two arms
    (intercept and both exponents differ), so ``delta_a`` / ``delta_b`` equal the difference of
    the two arms' own OLS exponents, with a CI that is cluster-robust by configuration.

    Args:
        emergence_tables: ``{arm: emergence table}`` (one metric/method/threshold; ``step``,
            ``batch_size``, ``context_length`` and ``status`` or ``censored``); runs that
            emerged are fitted.
        reference: the arm the others are compared with.
        published: the published ``(a, b)`` a switch may move the exponents toward.
        margin: ``no effect`` when a difference's CI lies inside ``[-margin, margin]``.
        level: CI level.

    Returns:
        One row per arm other than ``reference``, columns :data:`CONTRAST_COLUMNS`:
        ``delta_a`` / ``delta_b`` with CIs, ``share_of_b_gap`` = ``delta_b / (published b -
        reference b)`` (the share of the gap to the published b the switch closes), verdicts
        from :func:`contrast_verdict`, ``n_runs`` (both arms' runs that emerged), ``n_clusters``,
        ``df_resid``, ``note`` (why a row is NaN).

    Raises:
        ValueError: ``reference`` is not an arm, or ``margin`` < 0.
    """
    if reference not in emergence_tables:
        raise ValueError(f"reference arm {reference!r} not among {list(emergence_tables)}")
    if margin < 0:
        raise ValueError(f"margin: must be >= 0, got {margin}")
    base = _emerged_runs(emergence_tables[reference])
    rows = []
    for arm, table in emergence_tables.items():
        if arm == reference:
            continue
        row = dict.fromkeys(CONTRAST_COLUMNS, math.nan) | {"arm": arm, "reference": reference}
        try:
            runs = _emerged_runs(table)
            core, da, da_ci, db, db_ci = _contrast(runs, base, level)
        except (ValueError, np.linalg.LinAlgError) as error:
            rows.append(row | {"verdict_a": "undecided", "verdict_b": "undecided",
                               "note": f"not fitted: {error}"})  # fmt: skip
            continue
        # The reference's own exponents are the pooled fit's main effects: a = -p[2], b = -p[4].
        gap_a = published[0] + float(core.params[2])
        gap = published[1] + float(core.params[4])
        row |= {
            "delta_a": da, "delta_a_ci_low": da_ci[0], "delta_a_ci_high": da_ci[1],
            "delta_b": db, "delta_b_ci_low": db_ci[0], "delta_b_ci_high": db_ci[1],
            "share_of_b_gap": db / gap if gap else math.nan,
            "verdict_a": contrast_verdict(da, da_ci, gap_a, margin),
            "verdict_b": contrast_verdict(db, db_ci, gap, margin),
            "n_runs": int(len(runs) + len(base)), "n_clusters": int(core.n_clusters),
            "df_resid": float(core.df_resid), "note": "",
        }  # fmt: skip
        rows.append(row)
    return pd.DataFrame(rows, columns=CONTRAST_COLUMNS)


# ---------------------------------------------------------------------------------------------
# The reference schedule's warm-up against the measured emergence.

WARMUP_COLUMNS = [
    "batch_size",
    "context_length",
    "tokens_per_step",
    "warmup_steps",
    "horizon_steps",
    "n_runs",
    "n_emerged",
    "emergence_step_median",
    "warmup_share",
]


def warmup_share_table(
    table: pd.DataFrame, schedule: Mapping[tuple[int, int], tuple[int, int]]
) -> pd.DataFrame:
    """Per (B, C) cell of ``schedule`` (``(B, C) -> (warm-up steps, horizon steps)``): how long
    the warm-up lasts against the measured emergence. ``warmup_share`` = warm-up steps over the
    median emergence step of the cell's emerged runs (= warm-up tokens over emergence tokens,
    B·C being fixed in a cell); NaN where no run emerged. The reference's token-fixed warm-up
    spans about 0.6 at its smallest B·C to 0.03 at its largest: this table checks that an arm
    meant to mimic it does. One row per cell, smallest B·C first (:data:`WARMUP_COLUMNS`).
    """
    emerged = emerged_mask(table)  # (n,)
    rows = []
    for (batch, context), (warmup, horizon) in sorted(
        schedule.items(), key=lambda item: (item[0][0] * item[0][1], item[0])
    ):
        cell = ((table["batch_size"] == batch) & (table["context_length"] == context)).to_numpy()
        steps = pd.to_numeric(table.loc[cell & emerged, "step"]).to_numpy(
            dtype=float
        )  # (n_emerged,)
        median = float(np.median(steps)) if len(steps) else float("nan")
        rows.append({
            "batch_size": int(batch), "context_length": int(context),
            "tokens_per_step": int(batch) * int(context), "warmup_steps": int(warmup),
            "horizon_steps": int(horizon), "n_runs": int(cell.sum()), "n_emerged": len(steps),
            "emergence_step_median": median,
            "warmup_share": int(warmup) / median if len(steps) else float("nan"),
        })  # fmt: skip
    return pd.DataFrame(rows, columns=WARMUP_COLUMNS)
