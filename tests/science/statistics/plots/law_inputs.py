"""Hand-built inputs of the emergence-law figures, shared by the figure tests of the science
(``tests/science/statistics/plots/test_law.py``) and of the statistics nodes
(``tests/pipelines/test_statistics_figures.py``).

A law summary (``S* = T / (B^a C^b)``, zero coefficient covariance, residual sd ``SIGMA``,
infinite dof so the prediction interval is ``S* exp(+-z SIGMA)``), emergence rows and head
scores, and readers of what a figure drew.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from scipy import stats

A, B, T, SIGMA = 0.4, 0.6, 1e4, 0.1
Z = float(stats.norm.ppf(0.975))  # the 95 % interval with infinite dof

# Run names sort against batch size ("r1" is the B64 run): the figure orders cells by B, C.
THREE_RUNS = [("r1", 64, 16, 0, 100.0), ("r2", 32, 16, 0, 100.0), ("r3", 32, 16, 1, 100.0)]

OBSERVED = [
    ("r64", 64, 16, 0, 120.0),
    ("r32a", 32, 16, 0, 300.0),
    ("r32b", 32, 16, 1, 500.0),
    ("cens", 32, 32, 0, math.nan),
    ("late", 64, 32, 1, 80.0),
]


def law(batch: float, context: float) -> float:
    """Predicted S* in steps."""
    return T / (batch**A * context**B)


def summary(**overrides: Any) -> dict[str, Any]:
    """A fitted law summary in ``fit_summary_dict``'s layout."""
    fitted: dict[str, Any] = {
        "status": "ok",
        "response": "step",
        "threshold": 0.4,
        "a": {"estimate": 0.4, "ci_low": 0.3, "ci_high": 0.5},
        "b": {"estimate": 0.6, "ci_low": 0.55, "ci_high": 0.65},
        "pearson_r_log": {"estimate": 0.987},
        "n_runs": 3,
        "n_censored": 1,
        "seeds": [0, 1],
        "model": {
            "coef_names": ["const", "log_batch_size", "log_context_length"],
            "params": [math.log(T), -A, -B],
            "cov": [[0.0] * 3] * 3,
            "sigma": SIGMA,
            "df_resid": None,
        },
    }
    return {**fitted, **overrides}


def emergence(runs: list[tuple[str, int, int, int, float]], **columns: list[Any]) -> pd.DataFrame:
    """Emergence rows ``(run_name, batch_size, context_length, seed, step)``."""
    rows = pd.DataFrame(
        [
            {
                "run_name": name,
                "metric": "prefix_matching",
                "method": "threshold",
                "threshold": 0.4,
                "step": step,
                "censored": False,
                "batch_size": bs,
                "context_length": c,
                "seed": seed,
                "preset": "p",
            }
            for name, bs, c, seed, step in runs
        ]
    )
    for name, values in columns.items():
        rows[name] = values
    return rows


def heads(values: dict[str, float], steps: tuple[float, ...] = (10.0, 20.0)) -> pd.DataFrame:
    """Head scores: per run, a layer-1 head at ``k * step / 100`` and a stronger layer-0 head."""
    rows = []
    for name, k in values.items():
        for step in steps:
            for layer, value in ((0, 0.99), (1, k * step / 100)):
                rows.append(
                    {
                        "run_name": name,
                        "step": step,
                        "tokens_seen": step * 7,
                        "layer": layer,
                        "head": 0,
                        "metric": "prefix_matching",
                        "value": value,
                    }
                )
    return pd.DataFrame(rows)


def data_lines(ax: Axes) -> list[Line2D]:
    """Lines with data (seaborn's legend proxies have none)."""
    return [line for line in ax.lines if len(line.get_xdata())]


def the_text(ax: Axes) -> tuple[str, tuple[float, float], str, str]:
    (text,) = ax.texts
    return text.get_text(), text.get_position(), text.get_ha(), text.get_va()


def assert_empty_figure(fig: Figure, message: str) -> None:
    (ax,) = fig.axes
    assert the_text(ax) == (message, (0.5, 0.5), "center", "center")
    assert ax.texts[0].get_wrap() is True
    assert not ax.axison
    assert tuple(fig.get_size_inches()) == (5.0, 3.0)


def observed_table() -> pd.DataFrame:
    return emergence(
        OBSERVED,
        censored=[False, False, False, True, False],
        status=["emerged", "emerged", "emerged", "censored", "fit_failed"],
    )


def residual_table() -> pd.DataFrame:
    return emergence(
        [("z1", 64, 16, 0, 120.0), ("a1", 32, 16, 0, 300.0), ("a2", 32, 16, 1, 500.0),
         ("a3", 64, 16, 1, 90.0)],
        preset=["zeta", "alpha", "alpha", "alpha"],
    )  # fmt: skip


def residuals_by_x(ax: Axes) -> list[tuple[int, float]]:
    """(category index, residual) of every point; the strip jitter is within +-0.5."""
    offsets = np.concatenate([np.ma.filled(c.get_offsets(), np.nan) for c in ax.collections])
    return sorted((round(x), round(y, 9)) for x, y in offsets)


def expected_residuals(table: pd.DataFrame, category: dict[str, int]) -> list[tuple[int, float]]:
    return sorted(
        (category[row.run_name], round(math.log(row.step / law(row.batch_size, 16)), 9))
        for row in table.itertuples()
    )
