"""Do the project's intervals keep their promise? Coverage and test size by simulation.

Each check draws data from a known truth with the default design's structure, runs the
project's own estimator on it (:func:`~ih_kedro.science.statistics.emergence_law.
fit_emergence_law`, :func:`~ih_kedro.science.statistics.emergence_prediction.predict_emergence`,
:func:`~ih_kedro.science.statistics.law_mechanisms.mechanism_contrasts`,
:func:`~ih_kedro.science.statistics.paired_seeds.mean_interval`), and counts how often the
nominal ``level`` interval holds the truth (or a test at ``alpha`` rejects a true null). The
Monte-Carlo standard error of a share ``p`` over ``n`` draws is ``sqrt(p (1 - p) / n)``.

The default design (``conf/base/parameters_law_fit.yml``): B ∈ {32, 64, 128} × C ∈ {32, 64,
128} × 2 seeds (18 runs, 9 configurations), ``log S* = log T - a log B - b log C + u + e`` with
a configuration deviation ``u`` (sd ``config_sd``, shared by a configuration's seeds) and a seed
deviation ``e`` (sd ``seed_sd``); the defaults 0.2 and 0.05 (natural log) are the spreads
``docs/calibration.md`` calibrated the fit with.

A check is *flagged* when it under-covers: coverage below ``level - tolerance`` (or a size
above ``alpha + tolerance``), tolerance 0.02 (the issue's 93 % for a 95 % interval).

Plain numpy/pandas; no Kedro imports.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ih_kedro.science.statistics.censored_regression import fit_ols, interval_quantile
from ih_kedro.science.statistics.emergence_law import fit_emergence_law
from ih_kedro.science.statistics.emergence_prediction import predict_emergence
from ih_kedro.science.statistics.law_mechanisms import PUBLISHED_FORMS, mechanism_contrasts
from ih_kedro.science.statistics.paired_seeds import mean_interval
from ih_kedro.science.statistics.pareto_bootstrap import bootstrap_frontier
from ih_kedro.science.statistics.pareto_frontier import fit_frontier
from ih_kedro.science.telemetry.emergence import estimate_emergence, threshold_crossing

TOLERANCE = 0.02  # flag a 95 % interval below 93 %, a 5 % test above 7 %


@dataclass(frozen=True)
class LawDesign:
    """A simulated law-fit experiment: the grid, the seeds, the true law and its noise.

    ``a, b`` are the true step exponents, ``log_T`` the law's constant (natural log, steps);
    ``config_sd`` and ``seed_sd`` the sds (natural log) of the configuration and seed
    deviations."""

    batch_sizes: tuple[int, ...] = (32, 64, 128)
    context_lengths: tuple[int, ...] = (32, 64, 128)
    seeds: tuple[int, ...] = (0, 1)
    a: float = 0.5
    b: float = 0.5
    log_T: float = math.log(64_000.0)  # S* = 2,000 steps at B32 C32 with a = b = 0.5
    config_sd: float = 0.2
    seed_sd: float = 0.05
    # The Tobit check's budget (steps): a run past it is right-censored there. 2,000 censors
    # about half the runs of the slowest configuration (B32 C32), ~1 in 12 overall.
    tobit_budget: float = 2_000.0

    def describe(self) -> str:
        """One line: the grid, seeds and noise."""
        return (
            f"B {list(self.batch_sizes)} x C {list(self.context_lengths)} x "
            f"{len(self.seeds)} seeds; config sd {self.config_sd:g}, seed sd {self.seed_sd:g}; "
            f"a {self.a:g}, b {self.b:g}; Tobit budget {self.tobit_budget:g} steps"
        )


@dataclass
class CoverageResult:
    """One interval's (or test's) measured behaviour over ``draws`` simulated data sets.

    ``kind`` is ``interval`` (``measured`` = share of intervals holding the truth) or ``test``
    (``measured`` = share of rejections of a true null, its size); ``nominal`` is the level
    (interval) or alpha (test); ``mc_se`` the Monte-Carlo standard error of ``measured``."""

    name: str
    kind: str
    nominal: float
    measured: float
    mc_se: float
    draws: int
    design: str
    flagged: bool = field(default=False)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def summarise_hits(
    name: str, hits: Iterable[bool], nominal: float, kind: str, design: str
) -> CoverageResult:
    """The share of ``hits`` (covered, or rejected for a test) with its Monte-Carlo error, and
    whether it is flagged (coverage below ``nominal - TOLERANCE``, size above ``nominal +
    TOLERANCE``)."""
    values = np.asarray(list(hits), dtype=bool)  # (draws,)
    n = int(values.size)
    p = float(values.mean()) if n else math.nan
    se = math.sqrt(p * (1 - p) / n) if n else math.nan
    flagged = p < nominal - TOLERANCE if kind == "interval" else p > nominal + TOLERANCE
    return CoverageResult(name, kind, nominal, p, se, n, design, bool(flagged))


# --------------------------------------------------------------------------------------------
# Simulated emergence tables
# --------------------------------------------------------------------------------------------
def simulate_law_table(
    design: LawDesign,
    rng: np.random.Generator,
    a: float | None = None,
    b: float | None = None,
    budget: float | None = None,
) -> pd.DataFrame:
    """One simulated emergence table: ``run_name, batch_size, context_length, seed, step``
    (S*, steps); ``a``, ``b`` override the design's exponents. With a ``budget`` (steps), a
    run whose S* exceeds it is censored there (``censored``, ``last_step``, NaN ``step``)."""
    a = design.a if a is None else a
    b = design.b if b is None else b
    rows = []
    for batch in design.batch_sizes:
        for context in design.context_lengths:
            u = rng.normal(0.0, design.config_sd)
            for seed in design.seeds:
                log_step = design.log_T - a * math.log(batch) - b * math.log(context)
                log_step += u + rng.normal(0.0, design.seed_sd)
                rows.append((f"B{batch}_C{context}_s{seed}", batch, context, seed, log_step))
    table = pd.DataFrame(rows, columns=["run_name", "batch_size", "context_length", "seed", "y"])
    table["step"] = np.exp(table.pop("y"))
    if budget is not None:
        censored = table["step"].to_numpy() > budget
        table["censored"] = censored
        table["last_step"] = budget
        table.loc[censored, "step"] = np.nan
    return table


def _true_log_step(design: LawDesign, batch: float, context: float) -> float:
    return design.log_T - design.a * math.log(batch) - design.b * math.log(context)


# --------------------------------------------------------------------------------------------
# The checks: each returns {name: hit per draw} for one simulated data set
# --------------------------------------------------------------------------------------------
def _inside(value: float, interval: tuple[float, float]) -> bool:
    return bool(interval[0] <= value <= interval[1])


def law_checks(
    design: LawDesign,
    rng: np.random.Generator,
    level: float = 0.95,
    censored: str = "exclude",
    new_configs: Mapping[str, tuple[float, float]] | None = None,
    forms: Mapping[str, tuple[float, float]] = PUBLISHED_FORMS,
    prefix: str = "law",
) -> dict[str, bool]:
    """One draw of the law's checks: the ``a``, ``b``, ``T`` CIs, the prediction interval of a
    new run at each of ``new_configs`` (``{label: (B, C)}``), and the Wald test of each of
    ``forms`` (``{name: (a, b)}``, default the published ones) on data whose truth is that form
    (a rejection is a size hit)."""
    prefix = prefix if censored == "exclude" else f"{prefix} ({censored})"
    budget = design.tobit_budget if censored == "tobit" else None
    fit = fit_emergence_law(
        simulate_law_table(design, rng, budget=budget),
        censored=censored,
        level=level,
        leave_one_out=False,
    )
    hits = {
        f"{prefix}: a CI": _inside(design.a, fit.a_ci),
        f"{prefix}: b CI": _inside(design.b, fit.b_ci),
        f"{prefix}: T CI": _inside(math.exp(design.log_T), fit.T_ci),
    }
    for label, (batch, context) in (new_configs or {}).items():
        row = predict_emergence(fit, batch, context, level=level).iloc[0]
        # A new run: its own configuration deviation and seed deviation.
        log_step = _true_log_step(design, batch, context)
        log_step += rng.normal(0.0, design.config_sd) + rng.normal(0.0, design.seed_sd)
        hits[f"{prefix}: prediction interval, {label}"] = _inside(
            math.exp(log_step), (row["step_low"], row["step_high"])
        )
    for form, (a, b) in forms.items():
        table = simulate_law_table(design, rng, a=a, b=b, budget=budget)
        form_fit = fit_emergence_law(
            table, censored=censored, seed_exponents={"a": a, "b": b}, leave_one_out=False
        )
        hits[f"{prefix}: Wald test vs {form}"] = bool(form_fit.wald_p_value < 1 - level)
    return hits


def naive_law_checks(
    design: LawDesign, rng: np.random.Generator, level: float = 0.95
) -> dict[str, bool]:
    """One draw of a deliberately naive CI of ``a``: classical OLS (seeds as independent runs,
    no clustering) with a normal quantile; it should be flagged."""
    table = simulate_law_table(design, rng)
    X = np.column_stack(
        [
            np.ones(len(table)),
            np.log(table["batch_size"].to_numpy(float)),
            np.log(table["context_length"].to_numpy(float)),
        ]
    )  # (n, 3)
    core = fit_ols(np.log(table["step"].to_numpy(float)), X)
    half = interval_quantile(level, math.inf) * math.sqrt(core.cov[1, 1])
    a_hat = -core.params[1]
    return {"naive: a CI (classical OLS, normal)": _inside(design.a, (a_hat - half, a_hat + half))}


def contrast_checks(
    design: LawDesign, rng: np.random.Generator, level: float = 0.95, prefix: str = "law_mechanisms"
) -> dict[str, bool]:
    """One draw of ``law_mechanisms``' contrasts: two arms with the same true law (each on
    ``design``), so the true differences of ``a`` and ``b`` are 0."""
    tables = {"today": simulate_law_table(design, rng), "arm": simulate_law_table(design, rng)}
    row = mechanism_contrasts(tables, level=level).iloc[0]
    return {
        f"{prefix}: contrast delta_a CI": _inside(
            0.0, (row["delta_a_ci_low"], row["delta_a_ci_high"])
        ),
        f"{prefix}: contrast delta_b CI": _inside(
            0.0, (row["delta_b_ci_low"], row["delta_b_ci_high"])
        ),
    }


# law_mechanisms' default arm grid (conf/base/parameters_law_mechanisms.yml, ``today``):
# B {64, 128} x C {32, 48, 64} x 2 seeds, 6 configurations (G - k = 3).
MECHANISM_DESIGN = LawDesign(batch_sizes=(64, 128), context_lengths=(32, 48, 64))


def paired_seed_checks(
    rng: np.random.Generator, n_seeds: int = 3, level: float = 0.95, skewed: bool = False
) -> dict[str, bool]:
    """One draw of a paired-seed CI (``mean_interval`` of ``n_seeds`` paired differences,
    true mean 0): normal differences, or ``skewed`` ones (a centred exponential, a lopsided
    seed effect)."""
    values = rng.exponential(1.0, n_seeds) - 1.0 if skewed else rng.normal(0.0, 1.0, n_seeds)
    _, low, high = mean_interval(values, level=level)
    shape = "skewed" if skewed else "normal"
    name = f"paired seeds: mean difference CI ({n_seeds} seeds, {shape})"
    return {name: _inside(0.0, (low, high))}


@dataclass(frozen=True)
class FrontierDesign:
    """A simulated Pareto grid (``conf/base/parameters_pareto.yml``): frequency x reliability
    cells, seeds per cell, and the true ``logit P(formed) = b0 + b1 log f + b2 log r``."""

    frequencies: tuple[float, ...] = (0.25, 0.5, 1.0)
    reliabilities: tuple[float, ...] = (0.5, 0.71, 1.0)
    n_seeds: int = 3
    # The 50 % contour passes through (f 0.5, r 0.71); P(formed) spans 0.06-0.94 over the grid.
    coef: tuple[float, float, float] = (2.756, 2.0, 4.0)

    def describe(self) -> str:
        return (
            f"f {list(self.frequencies)} x r {list(self.reliabilities)} x {self.n_seeds} seeds; "
            f"logit P = {self.coef[0]:g} + {self.coef[1]:g} log f + {self.coef[2]:g} log r"
        )

    def log_contour(self, frequency: np.ndarray) -> np.ndarray:
        """The true 50 % contour, log reliability at each frequency."""
        b0, b1, b2 = self.coef
        return -(b0 + b1 * np.log(frequency)) / b2


def simulate_frontier_runs(design: FrontierDesign, rng: np.random.Generator) -> pd.DataFrame:
    """One simulated Pareto grid: ``cell, frequency, reliability, seed, formed`` (0/1)."""
    b0, b1, b2 = design.coef
    rows = []
    for f in design.frequencies:
        for r in design.reliabilities:
            p = 1.0 / (1.0 + math.exp(-(b0 + b1 * math.log(f) + b2 * math.log(r))))
            for seed in range(design.n_seeds):
                rows.append((f"f{f:g}_r{r:g}", f, r, seed, float(rng.random() < p)))
    return pd.DataFrame(rows, columns=["cell", "frequency", "reliability", "seed", "formed"])


def frontier_checks(
    design: FrontierDesign,
    rng: np.random.Generator,
    units: Iterable[str] = ("seed", "cell", "run"),
    n_bootstrap: int = 200,
    level: float = 0.95,
) -> dict[str, bool]:
    """One draw of the frontier's intervals: per bootstrap ``unit``, the contour band at each
    grid frequency and the percentile CI of ``b1 / b2`` (:func:`bootstrap_frontier`); and the
    fit's Wald (delta-method) band and CI of the ratio (:meth:`FrontierFit.log_contour_interval`,
    :meth:`FrontierFit.coefficient_ratio`)."""
    runs = simulate_frontier_runs(design, rng)
    grid = np.asarray(design.frequencies, dtype=float)
    truth = np.exp(design.log_contour(grid))  # (G,) reliability on the true 50 % contour
    ratio = design.coef[1] / design.coef[2]
    hits = {}
    for unit in units:
        boot = bootstrap_frontier(
            runs, grid, n_bootstrap=n_bootstrap, unit=unit, level=level,
            seed=int(rng.integers(2**31)),
        )  # fmt: skip
        band = boot.contour
        for f, low, high, true_r in zip(grid, band.band_low, band.band_high, truth, strict=True):
            hits[f"pareto ({unit} bootstrap): contour band at f {f:g}"] = _inside(
                true_r, (low, high)
            )
        row = boot.coefficients.set_index("name").loc["ratio"]
        hits[f"pareto ({unit} bootstrap): ratio b1/b2 CI"] = _inside(
            ratio, (row["ci_low"], row["ci_high"])
        )
    fit = fit_frontier(runs["frequency"], runs["reliability"], runs["formed"], level=level)
    low, high = fit.log_contour_interval(grid)
    for f, lo, hi, true_r in zip(grid, low, high, truth, strict=True):
        hits[f"pareto (Firth fit): contour Wald band at f {f:g}"] = _inside(
            math.log(true_r), (lo, hi)
        )
    hits["pareto (Firth fit): ratio b1/b2 Wald CI"] = _inside(ratio, fit.coefficient_ratio()[1:])
    return hits


@dataclass(frozen=True)
class EmergenceDesign:
    """A simulated run's prefix-matching curve: checkpoints every ``every`` steps to ``last``,
    ``n_probes`` probe samples per checkpoint (``parameters_law_fit.yml``: eval every 25 steps,
    100 probe sequences), each the true curve plus normal noise of sd ``probe_sd``; the true
    curve rises logistically from ``floor`` by ``rise`` around ``midpoint`` (steps) with scale
    ``width``; the estimand is its crossing of ``threshold`` between checkpoints."""

    every: int = 25
    last: int = 2_000
    n_probes: int = 100
    probe_sd: float = 0.2
    floor: float = 0.08
    rise: float = 0.6
    midpoint: float = 1_000.0
    width: float = 60.0
    threshold: float = 0.4

    def describe(self) -> str:
        return (
            f"checkpoints every {self.every} steps to {self.last}, {self.n_probes} probe samples "
            f"(sd {self.probe_sd:g}); logistic rise {self.rise:g} at step {self.midpoint:g} "
            f"(scale {self.width:g}); threshold {self.threshold:g}"
        )

    def steps(self) -> np.ndarray:
        return np.arange(0, self.last + 1, self.every, dtype=float)  # (K,)

    def curve(self) -> np.ndarray:
        x = (self.steps() - self.midpoint) / self.width
        return self.floor + self.rise / (1.0 + np.exp(-x))  # (K,)


def emergence_checks(
    design: EmergenceDesign, rng: np.random.Generator, n_bootstrap: int = 200, level: float = 0.95
) -> dict[str, bool]:
    """One draw of a run's emergence-step CI (:func:`estimate_emergence`, threshold method,
    bootstrap over probe samples): does it hold the true curve's crossing?"""
    steps, curve = design.steps(), design.curve()
    samples = curve[:, None] + rng.normal(0.0, design.probe_sd, (steps.size, design.n_probes))
    estimate = estimate_emergence(
        steps, steps * 1024.0, samples, threshold=design.threshold, n_bootstrap=n_bootstrap,
        seed=int(rng.integers(2**31)), ci=level,
    )  # fmt: skip
    truth = threshold_crossing(steps, curve, design.threshold)
    return {
        "emergence step: bootstrap CI (threshold)": _inside(
            truth, (estimate.ci_low, estimate.ci_high)
        )
    }


# --------------------------------------------------------------------------------------------
# The harness
# --------------------------------------------------------------------------------------------
# New configurations of the prediction-interval check: inside the fitted grid (between its
# points) and just outside it (one doubling beyond the largest B, one halving below the
# smallest C).
PREDICTION_CONFIGS = {
    "inside (B 48, C 90)": (48.0, 90.0),
    "outside (B 256, C 64)": (256.0, 64.0),
    "outside (B 64, C 16)": (64.0, 16.0),
}

Check = Callable[[np.random.Generator], dict[str, bool]]


def default_checks(design: LawDesign, level: float = 0.95) -> dict[str, Check]:
    """The checks of every law interval and test the pipelines report at ``design``:
    ``{group: check(rng) -> {name: hit}}``. ``law_mechanisms``' own grid:
    :func:`mechanism_checks`; paired seeds: :func:`paired_checks`; the frontier's (slower):
    :func:`frontier_checks`."""
    return {
        "law": lambda rng: law_checks(design, rng, level, new_configs=PREDICTION_CONFIGS),
        "law_tobit": lambda rng: law_checks(design, rng, level, censored="tobit"),
        "contrasts": lambda rng: contrast_checks(
            design, rng, level, prefix="contrasts on the law_fit grid"
        ),
    }


PAIRED_DESIGN = "paired differences over seeds, true mean 0: normal (sd 1) or skewed (Exp(1) - 1)"


def paired_checks(level: float = 0.95) -> dict[str, Check]:
    """The paired-seed t CIs at the seeds the pipelines use (``markov`` 3, ``bi_induct`` 5),
    normal differences, and at 5 seeds with skewed ones (:data:`PAIRED_DESIGN`)."""
    return {
        "paired_seeds_markov": lambda rng: paired_seed_checks(rng, 3, level),
        "paired_seeds_bi_induct": lambda rng: paired_seed_checks(rng, 5, level),
        "paired_seeds_skewed": lambda rng: paired_seed_checks(rng, 5, level, skewed=True),
    }


def mechanism_checks(design: LawDesign = MECHANISM_DESIGN, level: float = 0.95) -> dict[str, Check]:
    """``law_mechanisms``' per-arm fit (CIs, Wald tests of both forms) and contrasts at its arm
    grid."""
    return {
        "mechanism_arm": lambda rng: law_checks(design, rng, level, prefix="law_mechanisms arm"),
        "mechanism_contrasts": lambda rng: contrast_checks(design, rng, level),
    }


def run_harness(
    checks: Mapping[str, Check],
    draws: int,
    *,
    seed: int = 0,
    level: float = 0.95,
    design: str = "",
) -> list[CoverageResult]:
    """Run each check ``draws`` times (one independent generator per check, from ``seed``)
    and summarise every named interval or test it reports.

    Returns one :class:`CoverageResult` per name; names containing ``test`` are tests (size
    at ``1 - level``), the others intervals (coverage at ``level``)."""
    results = []
    streams = np.random.SeedSequence(seed).spawn(len(checks))
    for stream, check in zip(streams, checks.values(), strict=True):
        rng = np.random.default_rng(stream)
        per_name: dict[str, list[bool]] = {}
        for _ in range(draws):
            for name, hit in check(rng).items():
                per_name.setdefault(name, []).append(hit)
        for name, hits in per_name.items():
            kind = "test" if "test" in name else "interval"
            nominal = level if kind == "interval" else 1 - level
            results.append(summarise_hits(name, hits, nominal, kind, design))
    return results


def results_frame(results: Iterable[CoverageResult]) -> pd.DataFrame:
    """The results as a table, one row per interval or test."""
    return pd.DataFrame([r.to_dict() for r in results])
