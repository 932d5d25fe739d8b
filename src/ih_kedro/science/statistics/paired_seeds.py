"""Two conditions compared seed by seed: the paired difference and its Student-t interval.

When two conditions (two Markov processes, two Bi-Induct arms, ...) are trained with the same
seeds, the per-seed difference ``d_s = treatment_s - control_s`` removes whatever seed-to-seed
spread the two share (what the seed sets, e.g. the initialisation). :func:`paired_difference` pairs two per-seed Series on their common seeds and gives
the mean difference with the paired t interval

    mean(d) +/- t_{(1 + level) / 2, n - 1} * sd(d) / sqrt(n)      (sd with n - 1 in the divisor)

in the units of the measure compared. Edge cases, by design:

- a seed missing on either side, or NaN on either side, is left out of the pairing and listed in
  ``dropped_seeds``;
- fewer than two paired seeds: no interval (``ci_low = ci_high = NaN``);
- every difference the same (sd 0): the interval collapses to the mean, ``[mean, mean]``. The t
  interval has zero width there; it says the seeds agree exactly, not that the mean is known
  exactly, which is why rules built on it also ask every ``d_s`` to have the same sign.

:func:`mean_interval` is the same interval for one condition's values over seeds, and
:func:`equivalence` reads a difference as "no effect beyond ``margin``".

:func:`judge_pair` applies :data:`PAIRED_RULE` to a T ("should form") and a K ("should not, or
less") condition given per seed a threshold-free score and a formed flag read at a threshold: a
verdict (``supported`` / ``contradicted`` / ``undecided``) needs every seed to agree *and* the
paired interval to be away from 0, and an undecided one names what failed (seeds disagree, the
interval includes 0, one seed so no interval, a flag unobserved). Plain numpy / scipy / pandas;
no Kedro imports.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import t as student_t

SUPPORTED = "supported"
CONTRADICTED = "contradicted"
UNDECIDED = "undecided"

PAIRED_RULE = (
    "For conditions T (should form) and K (should not, or less) trained with the same seeds, at "
    "a threshold: supported iff in every seed T formed and K did not and the paired difference "
    "of scores d = T - K is > 0 in every seed with its paired t CI above 0; contradicted iff K "
    "formed in every seed with the CI of d not above 0, or every d < 0 with the CI below 0; "
    "otherwise undecided."
)


def _check_level(level: float) -> float:
    level = float(level)
    if not 0.0 < level < 1.0:
        raise ValueError(f"level: a confidence level in (0, 1) is needed, got {level:g}")
    return level


def mean_interval(values: Iterable[float], *, level: float = 0.95) -> tuple[float, float, float]:
    """Mean of ``values`` with its Student-t interval, ``(mean, ci_low, ci_high)``.

    NaN values are skipped. No finite value: all three NaN; one value: its value and a NaN
    interval; all values equal: the interval collapses to the mean. Same units as ``values``.
    """
    level = _check_level(level)
    x = np.asarray(list(values), dtype=float)  # (n,)
    x = x[~np.isnan(x)]
    if x.size == 0:
        return math.nan, math.nan, math.nan
    mean = float(np.mean(x))
    if x.size < 2:
        return mean, math.nan, math.nan
    if np.all(x == x[0]):
        return mean, mean, mean  # sd 0: the interval has no width (module docstring)
    half = float(student_t.ppf((1.0 + level) / 2.0, x.size - 1)) * float(np.std(x, ddof=1))
    half /= math.sqrt(x.size)
    return mean, mean - half, mean + half


def json_safe(value: Any) -> Any:
    """``value`` as JSON can hold it, recursively: numpy scalars as Python ones, tuples as
    lists, NaN, ±inf and ``<NA>`` as None (JSON has no NaN); dict keys are kept."""
    if value is None or value is pd.NA:
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


@dataclass(frozen=True)
class PairedDifference:
    """``treatment - control`` seed by seed, with the paired t interval of its mean.

    ``seeds``, ``treatment``, ``control`` and ``differences`` are aligned tuples over the paired
    seeds (sorted); ``mean``, ``ci_low`` and ``ci_high`` are in the compared measure's units;
    ``level`` is the interval's confidence level, ``n`` the number of paired seeds, and
    ``dropped_seeds`` the seeds present on one side only or NaN on either side.
    """

    seeds: tuple[Hashable, ...]
    treatment: tuple[float, ...]
    control: tuple[float, ...]
    differences: tuple[float, ...]
    mean: float
    ci_low: float
    ci_high: float
    level: float
    n: int
    dropped_seeds: tuple[Hashable, ...] = field(default=())

    @property
    def all_positive(self) -> bool:
        """Every paired seed has ``d_s > 0`` (False with no paired seed)."""
        return self.n > 0 and all(d > 0 for d in self.differences)

    @property
    def all_negative(self) -> bool:
        """Every paired seed has ``d_s < 0`` (False with no paired seed)."""
        return self.n > 0 and all(d < 0 for d in self.differences)

    @property
    def excludes_zero(self) -> bool:
        """The interval lies strictly above or strictly below 0 (False without an interval)."""
        return self.ci_low > 0 or self.ci_high < 0

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe: lists for the tuples, None for NaN, Python scalars for numpy ones."""
        out: dict[str, Any] = {}
        for name in ("seeds", "treatment", "control", "differences", "dropped_seeds"):
            out[name] = [json_safe(v) for v in getattr(self, name)]
        for name in ("mean", "ci_low", "ci_high", "level", "n"):
            out[name] = json_safe(getattr(self, name))
        out["all_positive"] = self.all_positive
        out["all_negative"] = self.all_negative
        out["excludes_zero"] = self.excludes_zero
        return out


def _flag(value: Any) -> bool | None:
    return None if value is None else bool(value)


def _seed_order(seeds: Iterable[Hashable]) -> list[Hashable]:
    seeds = list(seeds)
    try:
        return sorted(seeds)
    except TypeError:  # mixed seed types: a stable, readable order
        return sorted(seeds, key=str)


def paired_difference(
    treatment: pd.Series, control: pd.Series, *, level: float = 0.95
) -> PairedDifference:
    """Pair ``treatment`` and ``control`` (each indexed by seed) and compare them.

    Args:
        treatment: one value per seed (e.g. a formation score), index = seed.
        control: the same measure for the control condition, index = seed.
        level: confidence level of the paired t interval (``n - 1`` degrees of freedom).

    Returns:
        The :class:`PairedDifference` on the seeds both sides have with a finite value.

    Raises:
        ValueError: a seed appears twice on one side, or ``level`` is not in (0, 1).
    """
    level = _check_level(level)
    for name, series in (("treatment", treatment), ("control", control)):
        if series.index.has_duplicates:
            twice = _seed_order(set(series.index[series.index.duplicated()]))
            raise ValueError(f"paired_difference: {name} has seeds {twice} more than once")
    t_values = pd.to_numeric(treatment, errors="coerce").astype(float)
    k_values = pd.to_numeric(control, errors="coerce").astype(float)
    every = _seed_order(set(t_values.index) | set(k_values.index))
    paired = [
        s
        for s in every
        if s in t_values.index
        and s in k_values.index
        and not math.isnan(t_values[s])
        and not math.isnan(k_values[s])
    ]
    kept = set(paired)
    t_paired = tuple(float(t_values[s]) for s in paired)
    k_paired = tuple(float(k_values[s]) for s in paired)
    differences = tuple(a - b for a, b in zip(t_paired, k_paired, strict=True))
    mean, ci_low, ci_high = mean_interval(differences, level=level)
    return PairedDifference(
        seeds=tuple(paired),
        treatment=t_paired,
        control=k_paired,
        differences=differences,
        mean=mean,
        ci_low=ci_low,
        ci_high=ci_high,
        level=level,
        n=len(paired),
        dropped_seeds=tuple(s for s in every if s not in kept),
    )


# --------------------------------------------------------------------------------------------
# The paired rule: agreement across seeds and a paired CI away from 0
# --------------------------------------------------------------------------------------------
def _seed_value(seed: Any) -> Any:
    """A JSON-safe seed: an int when it is a whole number."""
    try:
        value = float(seed)
    except (TypeError, ValueError):
        return str(seed)
    return int(value) if value.is_integer() else value


def _seed_name(seed: Any) -> str:
    return f"s{_seed_value(seed)}"


def _ci_text(difference: PairedDifference) -> str:
    return f"[{difference.ci_low:.3g}, {difference.ci_high:.3g}]"


def _pattern(treatment: bool | None, control: bool | None) -> str:
    named = {(True, False): "T formed/K not", (True, True): "both formed",
             (False, False): "neither formed", (False, True): "K formed/T not"}  # fmt: skip
    if (treatment, control) in named:
        return named[(treatment, control)]
    text = {True: "formed", False: "not", None: "<NA>"}
    return f"T {text[treatment]}/K {text[control]}"


def _failures(rows: list[dict[str, Any]], diff: PairedDifference, at: str) -> list[str]:
    """What keeps the paired rule from supporting T over K, in words."""
    out = []
    unobserved = [
        f"{side} {_seed_name(r['seed'])}"
        for r in rows
        for side, key in (("T", "treatment_formed"), ("K", "control_formed"))
        if r[key] is None
    ]
    if unobserved:
        out.append(f"<NA>: unobserved{at} ({', '.join(unobserved)})")
    observed = [r for r in rows if None not in (r["treatment_formed"], r["control_formed"])]
    patterns = [_pattern(r["treatment_formed"], r["control_formed"]) for r in observed]
    if len(set(patterns)) > 1:
        named = zip(observed, patterns, strict=True)
        out.append("seeds disagree: " + ", ".join(f"{_seed_name(r['seed'])} {p}" for r, p in named))
    elif patterns and patterns[0] != "T formed/K not":
        out.append(f"every seed: {patterns[0]}")
    if diff.dropped_seeds:
        out.append("no score for " + ", ".join(map(_seed_name, diff.dropped_seeds)))
    if diff.n < 2:
        out.append("one seed: no CI" if diff.n == 1 else "no seed with both scores: no CI")
    elif diff.ci_high < 0:
        out.append(f"paired CI {_ci_text(diff)} lies below 0")
    elif not diff.ci_low > 0:
        out.append(f"paired CI {_ci_text(diff)} includes 0")
    if diff.n and not diff.all_positive:
        pairs = zip(diff.seeds, diff.differences, strict=True)
        worse = ", ".join(f"{_seed_name(s)}: {d:.3g}" for s, d in pairs if not d > 0)
        out.append(f"not every difference > 0 ({worse})")
    return out


def _paired_rule(rows: list[dict[str, Any]], diff: PairedDifference, at: str) -> tuple[str, str]:
    """:data:`PAIRED_RULE` on one comparison: ``(verdict, reason)``."""
    t_formed = [r["treatment_formed"] for r in rows]
    k_formed = [r["control_formed"] for r in rows]
    if (
        rows
        and all(t is True and k is False for t, k in zip(t_formed, k_formed, strict=True))
        and not diff.dropped_seeds
        and diff.all_positive
        and diff.ci_low > 0
    ):
        return SUPPORTED, (
            f"in every seed T formed and K did not{at}; every difference > 0, paired CI "
            f"{_ci_text(diff)} above 0"
        )
    if rows and all(k is True for k in k_formed) and diff.ci_low <= 0:
        return CONTRADICTED, (
            f"K formed in every seed{at} and the paired CI {_ci_text(diff)} does not lie above 0"
        )
    if not diff.dropped_seeds and diff.all_negative and diff.ci_high < 0:
        return CONTRADICTED, f"every difference < 0 and the paired CI {_ci_text(diff)} lies below 0"
    return UNDECIDED, "; ".join(_failures(rows, diff, at))


def judge_pair(
    treatment: pd.DataFrame,
    control: pd.DataFrame,
    *,
    level: float = 0.95,
    threshold: float | None = None,
) -> dict[str, Any]:
    """:data:`PAIRED_RULE` on T = ``treatment`` against K = ``control``.

    Args:
        treatment: index = seed; ``score`` (float, larger = formed earlier / further, NaN =
            unknown) and ``formed`` (bool or nullable boolean, <NA> = unobserved).
        control: the same for the control condition.
        level: confidence level of the paired t interval.
        threshold: the threshold ``formed`` was read at, only for the reason's wording.

    Returns:
        JSON-safe ``{verdict, reason, seeds, mean, ci_low, ci_high, level, n,
        dropped_seeds}``: ``seeds`` has one row per seed either side has (``seed,
        treatment_score, control_score, difference, treatment_formed, control_formed``; None
        for unknown or missing); a seed missing on one side counts as unobserved there.
    """
    diff = paired_difference(treatment["score"], control["score"], level=level)
    differences = dict(zip(diff.seeds, diff.differences, strict=True))

    def value(frame: pd.DataFrame, column: str, seed: Any) -> Any:
        return json_safe(frame[column].get(seed)) if seed in frame.index else None

    rows = [
        {
            "seed": _seed_value(seed),
            "treatment_score": value(treatment, "score", seed),
            "control_score": value(control, "score", seed),
            "difference": differences.get(seed),
            "treatment_formed": _flag(value(treatment, "formed", seed)),
            "control_formed": _flag(value(control, "formed", seed)),
        }
        for seed in _seed_order(set(treatment.index) | set(control.index))
    ]
    at = "" if threshold is None else f" at {float(threshold):g}"
    verdict, reason = _paired_rule(rows, diff, at)
    summary = diff.to_dict()
    keys = ("mean", "ci_low", "ci_high", "level", "n", "dropped_seeds")
    return {"verdict": verdict, "reason": reason, "seeds": rows, **{k: summary[k] for k in keys}}


def can_still_decide(comparison: Mapping[str, Any]) -> bool:
    """Whether added seeds could still decide a :func:`judge_pair` comparison under
    :data:`PAIRED_RULE`, given the seeds it has (they stay in every later sample).

    ``supported`` needs every seed to be "T formed / K not" with a difference > 0;
    ``contradicted`` needs K formed in every seed, or every difference < 0. A seed already in the
    sample that breaks every one of these (e.g. both formed with T ahead, or K not formed and a
    difference > 0; an unknown flag or score breaks the conditions it enters) rules the
    comparison out for good: more seeds only narrow the CI, which both outcomes also need.
    A comparison without seeds can still be decided.
    """
    rows = list(comparison.get("seeds") or [])
    if not rows:
        return True
    differences = [r.get("difference") for r in rows]
    known = all(d is not None and math.isfinite(float(d)) for d in differences)
    can_support = known and all(
        r.get("treatment_formed") is True and r.get("control_formed") is False and d > 0
        for r, d in zip(rows, differences, strict=True)
    )
    can_contradict = all(r.get("control_formed") is True for r in rows) or (
        known and all(d < 0 for d in differences)
    )
    return can_support or can_contradict


def equivalence(difference: PairedDifference, margin: float) -> bool:
    """True when the paired interval lies inside ``[-margin, margin]`` (no effect beyond the
    margin, in the measure's units); False without an interval.

    Raises:
        ValueError: ``margin`` is not a positive finite number.
    """
    margin = float(margin)
    if not (math.isfinite(margin) and margin > 0):
        raise ValueError(f"equivalence: margin must be positive and finite, got {margin:g}")
    return -margin <= difference.ci_low and difference.ci_high <= margin


__all__ = [
    "CONTRADICTED",
    "PAIRED_RULE",
    "SUPPORTED",
    "UNDECIDED",
    "PairedDifference",
    "can_still_decide",
    "equivalence",
    "json_safe",
    "judge_pair",
    "mean_interval",
    "paired_difference",
]
