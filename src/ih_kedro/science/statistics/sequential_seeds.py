"""Seeds until a verdict settles: a group-sequential plan over seeds with a stated correction.

A fixed seed count either wastes runs on verdicts already decided or leaves others undecided.
A :class:`SequentialPlan` looks at the verdict after the ``planned`` seeds, then after each
``batch`` more, up to ``cap`` seeds: look sizes ``n_1 = planned, n_2 = planned + batch, ...,
n_K = cap`` (the last batch clipped to the cap). At look ``k`` the verdict rule already used for
the claim (a CI against 0 or a margin: :mod:`.bi_induct_claims`, :mod:`.paired_seeds`) is applied
to the first ``n_k`` seeds with its interval at the **corrected level** ``level(k)``; the claim
stops at the first look whose verdict is not ``undecided``, and is undecided at the cap
otherwise. Repeated looks would inflate the rate of false decisions; the correction keeps the
chance that *any* look's two-sided interval misses the true value at or below ``alpha``:

- ``bonferroni`` (default): every look uses level ``1 - alpha / K`` (K = planned looks). Valid
  whatever the correlation between looks (a union bound), conservative.
- ``obrien_fleming``: an O'Brien-Fleming-type boundary on the information fraction
  ``t_k = n_k / cap``: look ``k`` uses ``z_k = c / sqrt(t_k)``, i.e. level ``2 Phi(z_k) - 1``.
  For a Brownian motion (known spread) ``c`` solves ``P(any |Z_k| >= z_k) = alpha``
  (:func:`obrien_fleming_boundary`, the published constants); with few seeds the intervals are
  Student-t and that ``c`` lets 5.5 % through instead of 5 %, so the plan uses ``c`` calibrated
  by simulation for t looks (:func:`obrien_fleming_t_boundary`). Strict early, close to the
  plain level at the cap.
- ``none``: every look at ``1 - alpha`` (for comparison only; it inflates false decisions).

With ``alpha = 1 - level`` of the fixed-seed rules (0.05), a *false decision* - an interval that
excludes the true difference on either side at some look - happens in at most ``alpha`` of the
experiments; a rule that claims one direction errs in at most ``alpha / 2``.

:func:`seeds_needed` projects, for a verdict still undecided at the cap, how many seeds the
observed effect and spread imply: the smallest ``n`` with ``t_{1 - a/2, n - 1} * sd / sqrt(n) <
D``, about ``n ~ (z_{1 - a/2} * sd / D)^2``, where ``sd`` is the spread over seeds (of the paired
difference), ``a`` the per-look miss rate at the cap and ``D`` the distance from the estimate to
the boundary whose crossing decides (``|mean|`` against 0, ``|margin - |mean||`` against a
margin). It is a point projection from a noisy estimate, not a promise.

Plain numpy / scipy; no Kedro imports.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from functools import cached_property
from typing import Any

import numpy as np
from scipy.optimize import brentq
from scipy.stats import multivariate_normal, norm
from scipy.stats import t as student_t

from ih_kedro.science.statistics.paired_seeds import UNDECIDED, json_safe

CORRECTIONS = ("bonferroni", "obrien_fleming", "none")

SEQUENTIAL_RULE = (
    "Look at the verdict after the planned seeds, then after each batch of added seeds, up to "
    "the cap; at look k the claim's own rule is applied to the first n_k seeds with its CI at "
    "the corrected level ({correction}: {level_text}); a claim stops at its first decided look "
    "and is undecided at the cap otherwise; the chance that any look's two-sided CI misses the "
    "true difference is at most alpha = {alpha:g}."
)

SEEDS_NEEDED_FORMULA = (
    "n = smallest n with t_{1-a/2, n-1} * sd / sqrt(n) < D (about (z_{1-a/2} * sd / D)^2): sd = "
    "spread over seeds of the compared quantity, a = the per-look miss rate at the cap, D = "
    "distance from the estimate to the boundary whose crossing decides"
)


@dataclass(frozen=True)
class SequentialPlan:
    """When to look and at which CI level.

    ``planned`` seeds at the first look, ``batch`` more per look, at most ``cap`` seeds;
    ``alpha`` is the family-wise two-sided miss rate over all looks, ``correction`` one of
    :data:`CORRECTIONS`.
    """

    planned: int
    batch: int = 2
    cap: int = 10
    alpha: float = 0.05
    correction: str = "bonferroni"

    def __post_init__(self) -> None:
        if int(self.planned) < 2:
            raise ValueError(f"sequential plan: planned must be >= 2 seeds, got {self.planned}")
        if int(self.batch) < 1:
            raise ValueError(f"sequential plan: batch must be >= 1 seed, got {self.batch}")
        if int(self.cap) < int(self.planned):
            raise ValueError(
                f"sequential plan: cap ({self.cap}) must be >= planned seeds ({self.planned})"
            )
        if not 0.0 < float(self.alpha) < 1.0:
            raise ValueError(f"sequential plan: alpha must be in (0, 1), got {self.alpha:g}")
        if self.correction not in CORRECTIONS:
            raise ValueError(
                f"sequential plan: correction {self.correction!r} is not one of {CORRECTIONS}"
            )

    @classmethod
    def from_params(cls, params: dict[str, Any], *, planned: int, alpha: float) -> SequentialPlan:
        """From an ``adaptive_seeds`` parameter block (``batch``, ``cap``, ``correction``,
        optional ``alpha``); ``planned`` = the seeds the sweep trains first."""
        return cls(
            planned=int(planned),
            batch=int(params.get("batch", 2)),
            cap=max(int(params.get("cap", planned)), int(planned)),
            alpha=float(params.get("alpha") or alpha),
            correction=str(params.get("correction", "bonferroni")),
        )

    @cached_property
    def look_sizes(self) -> tuple[int, ...]:
        """Seeds at each look: ``planned, planned + batch, ..., cap``."""
        sizes = list(range(int(self.planned), int(self.cap), int(self.batch)))
        return (*sizes, int(self.cap))

    @property
    def n_looks(self) -> int:
        return len(self.look_sizes)

    @cached_property
    def _z(self) -> tuple[float, ...]:
        """The two-sided normal boundary at each look."""
        k = self.n_looks
        if self.correction == "none":
            return (float(norm.ppf(1 - self.alpha / 2)),) * k
        if self.correction == "bonferroni" or k == 1:
            return (float(norm.ppf(1 - self.alpha / (2 * k))),) * k
        return obrien_fleming_t_boundary(self.look_sizes, self.alpha)

    def level(self, look: int) -> float:
        """Two-sided CI level at look ``look`` (1-based)."""
        if not 1 <= look <= self.n_looks:
            raise ValueError(f"sequential plan: look {look} not in 1..{self.n_looks}")
        return float(2 * norm.cdf(self._z[look - 1]) - 1)

    @property
    def levels(self) -> tuple[float, ...]:
        return tuple(self.level(k) for k in range(1, self.n_looks + 1))

    def rule(self) -> str:
        """:data:`SEQUENTIAL_RULE` in words for this plan."""
        if self.correction == "bonferroni":
            text = f"level 1 - alpha/K = {self.level(1):.4g} at each of K = {self.n_looks} looks"
        elif self.correction == "obrien_fleming":
            text = "levels " + ", ".join(f"{v:.4g}" for v in self.levels) + " (z_k = c/sqrt(t_k))"
        else:
            text = f"level {self.level(1):.4g} at every look, uncorrected"
        return SEQUENTIAL_RULE.format(correction=self.correction, level_text=text, alpha=self.alpha)

    def to_dict(self) -> dict[str, Any]:
        return json_safe({**asdict(self), "look_sizes": list(self.look_sizes),
                          "levels": list(self.levels), "rule": self.rule()})  # fmt: skip


def obrien_fleming_boundary(fractions: Sequence[float], alpha: float) -> tuple[float, ...]:
    """Two-sided boundaries ``z_k = c / sqrt(t_k)`` at information fractions ``t_k`` (increasing,
    last 1) with ``P(any |Z_k| >= z_k) = alpha`` for ``Z`` a standardised Brownian motion
    (``corr(Z_i, Z_j) = sqrt(t_i / t_j)``, ``i <= j``)."""
    t = np.asarray(fractions, dtype=float)  # (K,)
    if t.ndim != 1 or t.size == 0 or np.any(np.diff(t) <= 0) or t[0] <= 0:
        raise ValueError("obrien_fleming_boundary: fractions must be increasing and positive")
    cov = np.sqrt(np.minimum.outer(t, t) / np.maximum.outer(t, t))  # (K, K)
    law = multivariate_normal(mean=np.zeros(t.size), cov=cov, allow_singular=True)

    def miss(c: float) -> float:
        z = c / np.sqrt(t)
        return 1.0 - float(law.cdf(z, lower_limit=-z)) - alpha

    c = brentq(miss, norm.ppf(1 - alpha / 2) * 0.5, 10.0, xtol=1e-6)
    return tuple(float(c / math.sqrt(f)) for f in t)


def obrien_fleming_t_boundary(
    look_sizes: Sequence[int], alpha: float, *, n_draws: int = 20_000, seed: int = 0
) -> tuple[float, ...]:
    """:func:`obrien_fleming_boundary`'s shape ``z_k = c / sqrt(t_k)`` (``t_k = n_k / n_K``)
    with ``c`` calibrated for **Student-t** looks: the normal ``c`` holds for known spread, but
    with few seeds the t intervals at levels ``2 Phi(z_k) - 1`` miss more often (5-9 seeds:
    0.055 instead of 0.05). ``c`` is the ``1 - alpha`` quantile, over ``n_draws`` simulated
    null experiments (normal seeds, fixed ``seed``), of the smallest ``c`` at which each
    experiment's looks stay inside, so every look's t interval at its level misses in at most
    ``alpha`` of the experiments (up to Monte-Carlo error, about 0.002)."""
    sizes = np.asarray(look_sizes, dtype=int)  # (K,)
    if sizes.ndim != 1 or sizes.size == 0 or np.any(np.diff(sizes) <= 0) or sizes[0] < 2:
        raise ValueError("obrien_fleming_t_boundary: look sizes must increase from >= 2 seeds")
    fractions = sizes / sizes[-1]
    draws = np.random.default_rng(seed).standard_normal((n_draws, int(sizes[-1])))  # (E, N)
    needed = np.zeros(n_draws)  # (E,) the c at which each experiment would cross
    for n, fraction in zip(sizes, fractions, strict=True):
        x = draws[:, :n]  # (E, n)
        t_stat = np.abs(x.mean(axis=1)) / (x.std(axis=1, ddof=1) / math.sqrt(n))  # (E,)
        # |T| >= t_{n-1}^{-1}(Phi(z)) iff z <= Phi^{-1}(F_t(|T|)): crossing at c <= sqrt(t) z.
        z = norm.isf(student_t.sf(t_stat, n - 1))  # (E,)
        needed = np.maximum(needed, math.sqrt(fraction) * z)
    c = float(np.quantile(needed, 1 - alpha))
    return tuple(float(c / math.sqrt(f)) for f in fractions)


@dataclass(frozen=True)
class Look:
    """One look: ``n`` seeds (their ids), the CI ``level``, the rule's ``verdict`` and the
    estimate with its interval in the compared measure's units; ``details``: whatever else the
    judge returned under that key (e.g. every paired comparison behind a verdict)."""

    look: int
    n: int
    seeds: tuple[Any, ...]
    level: float
    verdict: str
    estimate: float
    ci_low: float
    ci_high: float
    reason: str = ""
    details: Any = None

    def to_dict(self) -> dict[str, Any]:
        return json_safe(asdict(self))


Judge = Callable[[Sequence[Any], float], dict[str, Any]]
"""``judge(seeds, level) -> {verdict, estimate, ci_low, ci_high, reason[, details]}`` on those
seeds."""


def sequential_verdict(judge: Judge, seeds: Sequence[Any], plan: SequentialPlan) -> dict[str, Any]:
    """Apply ``judge`` at each look of ``plan`` that ``seeds`` (in the order they are added)
    can fill; stop at the first decided look.

    Returns JSON-safe ``{verdict, status, looks, decided_at, n_used, next_seeds_needed}``;
    ``status`` is ``decided``, ``undecided_at_cap`` or ``continue`` (undecided, the cap not
    reached: ``next_seeds_needed`` = the next look's size); with fewer seeds than ``planned``
    no look is made (status ``continue``).
    """
    seeds = list(seeds)
    looks: list[Look] = []
    for k, n in enumerate(plan.look_sizes, start=1):
        if n > len(seeds):
            break
        level = plan.level(k)
        judged = judge(seeds[:n], level)
        looks.append(Look(k, n, tuple(seeds[:n]), level, str(judged["verdict"]),
                          float(judged.get("estimate", math.nan)),
                          float(judged.get("ci_low", math.nan)),
                          float(judged.get("ci_high", math.nan)),
                          str(judged.get("reason", "")), judged.get("details")))  # fmt: skip
        if looks[-1].verdict != UNDECIDED:
            break
    last = looks[-1] if looks else None
    if last is not None and last.verdict != UNDECIDED:
        status, following = "decided", None
    elif last is not None and last.look == plan.n_looks:
        status, following = "undecided_at_cap", None
    else:
        status = "continue"
        following = plan.look_sizes[last.look if last else 0]
    return json_safe({
        "verdict": last.verdict if last else UNDECIDED,
        "status": status,
        "decided_at": last.look if status == "decided" else None,
        "n_used": last.n if last else 0,
        "next_seeds_needed": following,
        "looks": [look.to_dict() for look in looks],
    })  # fmt: skip


def seeds_needed(sd: float, distance: float, *, level: float, most: int = 100_000) -> float:
    """Seeds for a ``level`` Student-t half-width ``t * sd / sqrt(n)`` to fall below ``distance``
    (see :data:`SEEDS_NEEDED_FORMULA`); ``inf`` when ``distance <= 0`` or more than ``most``;
    NaN when ``sd`` or ``distance`` is unknown. ``sd`` 0 and ``distance`` > 0: 2 seeds."""
    if not (math.isfinite(sd) and math.isfinite(distance)):
        return math.nan
    if distance <= 0:
        return math.inf
    if sd <= 0:
        return 2.0
    quantile = (1 + level) / 2
    guess = max(2, math.ceil((norm.ppf(quantile) * sd / distance) ** 2))
    if guess > most:
        return math.inf
    n = max(2, guess - 1)
    while student_t.ppf(quantile, n - 1) * sd / math.sqrt(n) >= distance:
        n += 1
        if n > most:
            return math.inf
    return float(n)


def decision_distance(mean: float, rule: str, margin: float | None = None) -> float:
    """``D`` of :data:`SEEDS_NEEDED_FORMULA` for the estimate ``mean`` under ``rule``:

    - ``zero`` (the paired rule; a CI away from 0 decides): ``|mean|``;
    - ``directional`` (CI on one side of 0, or inside ``+/- margin``): the larger of ``|mean|``
      and ``margin - |mean|`` (the second only inside the margin);
    - ``equivalence`` / ``bound`` (CI inside, or beyond, the margin): ``| |mean| - margin |``
      (``bound`` against ``mean - margin``).
    """
    if not math.isfinite(mean):
        return math.nan
    if rule == "zero":
        return abs(mean)
    if margin is None:
        raise ValueError(f"decision_distance: rule {rule!r} needs a margin")
    if rule == "directional":
        return max(abs(mean), margin - abs(mean))
    if rule == "equivalence":
        return abs(abs(mean) - margin)
    if rule == "bound":
        return abs(mean - margin)
    raise ValueError(f"decision_distance: unknown rule {rule!r}")


def projection(
    values: Sequence[float], rule: str, margin: float | None, plan: SequentialPlan
) -> dict[str, Any]:
    """Seeds an undecided verdict would need, from its per-seed ``values`` (paired differences
    or one arm's values): ``{mean, sd, distance, level, seeds_needed, formula}``, at the cap's
    level of ``plan`` (JSON-safe; ``seeds_needed`` None when not finite)."""
    x = np.asarray([v for v in values if v is not None], dtype=float)  # (n,)
    x = x[np.isfinite(x)]
    mean = float(np.mean(x)) if x.size else math.nan
    sd = float(np.std(x, ddof=1)) if x.size >= 2 else math.nan
    distance = decision_distance(mean, rule, margin)
    level = plan.level(plan.n_looks)
    return json_safe({"mean": mean, "sd": sd, "distance": distance, "level": level,
                      "seeds_needed": seeds_needed(sd, distance, level=level),
                      "formula": SEEDS_NEEDED_FORMULA})  # fmt: skip


# --------------------------------------------------------------------------------------------
# Simulation: the false-decision rate of a plan, and its power
# --------------------------------------------------------------------------------------------
def _t_interval(x: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Row-wise mean and Student-t interval of ``x`` (experiments, n)."""
    n = x.shape[1]
    mean = x.mean(axis=1)  # (E,)
    half = student_t.ppf((1 + level) / 2, n - 1) * x.std(axis=1, ddof=1) / math.sqrt(n)
    return mean, mean - half, mean + half


def simulate_plan(
    plan: SequentialPlan,
    effect: float,
    sd: float = 1.0,
    *,
    n_experiments: int = 2000,
    seed: int = 0,
    rule: str = "zero",
    margin: float | None = None,
) -> dict[str, float]:
    """Monte-Carlo of ``plan`` on normal per-seed values (mean ``effect``, spread ``sd``).

    ``rule = "zero"``: decided = the CI excludes 0 (``excludes_zero``: either side,
    ``above_zero``: the CI above 0); ``rule = "equivalence"``: decided = the CI inside
    ``+/- margin`` (``inside_margin``). Every experiment stops at its first decided look.
    Returns the shares of experiments decided each way, ``mc_se`` of a share at ``alpha``, and
    the mean seeds used.
    """
    rng = np.random.default_rng(seed)
    draws = rng.normal(effect, sd, size=(n_experiments, plan.cap))  # (E, cap)
    open_ = np.ones(n_experiments, dtype=bool)
    decided = {"excludes_zero": 0, "above_zero": 0, "below_zero": 0, "inside_margin": 0}
    used = np.full(n_experiments, plan.cap, dtype=float)
    for k, n in enumerate(plan.look_sizes, start=1):
        _, low, high = _t_interval(draws[:, :n], plan.level(k))
        if rule == "equivalence":
            hit = open_ & (low >= -margin) & (high <= margin)
            decided["inside_margin"] += int(hit.sum())
        else:
            above, below = open_ & (low > 0), open_ & (high < 0)
            hit = above | below
            decided["above_zero"] += int(above.sum())
            decided["below_zero"] += int(below.sum())
            decided["excludes_zero"] += int(hit.sum())
        used[hit] = n
        open_ &= ~hit
    out = {name: count / n_experiments for name, count in decided.items()}
    out["mc_se"] = math.sqrt(plan.alpha * (1 - plan.alpha) / n_experiments)
    out["mean_seeds"] = float(used.mean())
    out["n_experiments"] = float(n_experiments)
    return out


__all__ = [
    "CORRECTIONS",
    "SEEDS_NEEDED_FORMULA",
    "SEQUENTIAL_RULE",
    "Look",
    "SequentialPlan",
    "decision_distance",
    "obrien_fleming_boundary",
    "obrien_fleming_t_boundary",
    "projection",
    "seeds_needed",
    "sequential_verdict",
    "simulate_plan",
]
