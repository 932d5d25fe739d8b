"""The prediction command's ``--level`` and its errors, through the printed numbers."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from ih_kedro.predict import main
from ih_kedro.science.statistics.emergence_law import fit_emergence_law
from ih_kedro.science.statistics.emergence_prediction import fit_summary_dict, predict_emergence


@pytest.fixture()
def summary_path(tmp_path):
    rng = np.random.default_rng(0)
    rows = [
        {
            "batch_size": b,
            "context_length": c,
            "seed": s,
            "step": 1e5 / (b**0.37 * c**0.62) * math.exp(rng.normal(0, 0.2)),
        }
        for b in (32, 64, 128)
        for c in (32, 64, 128)
        for s in range(2)
    ]
    summary = {"status": "ok", **fit_summary_dict(fit_emergence_law(pd.DataFrame(rows)))}
    path = tmp_path / "law_fit_summary.json"
    path.write_text(json.dumps(summary))
    return path


def printed_rows(text: str) -> list[list[float]]:
    """The numeric rows of the printed table (thousands separators removed): its first 8 cells,
    before ``extrapolated`` and ``extrapolated_axis``."""
    rows = []
    for line in text.splitlines():
        cells = line.split()[:8]
        try:
            rows.append([float(cell.replace(",", "")) for cell in cells])
        except ValueError:
            continue
    return [row for row in rows if len(row) == 8]


@pytest.mark.parametrize("level", [0.8, 0.95])
def test_level_sets_the_printed_interval(summary_path, caplog, level):
    with caplog.at_level("INFO", logger="ih_kedro.predict"):
        args = ["-B", "256", "48", "-C", "64", "100", "--level", str(level)]
        assert main([*args, "--summary", str(summary_path)]) == 0
    assert f"{100 * level:.0f}% prediction intervals" in caplog.text
    expected = predict_emergence(
        json.loads(summary_path.read_text()), [256, 48], [64, 100], level=level
    )
    rows = printed_rows(caplog.text)
    columns = ["batch_size", "context_length", "step", "step_low", "step_high", "tokens"]
    assert len(rows) == 2
    for row, (_, want) in zip(rows, expected.iterrows(), strict=True):
        for value, column in zip(row, columns, strict=False):
            assert value == pytest.approx(want[column], abs=0.51), column  # printed as %.0f


def test_unfitted_summary_is_a_usage_error(tmp_path, capsys):
    path = tmp_path / "law_fit_summary.json"
    path.write_text(json.dumps({"status": "insufficient_data: 2 runs"}))
    with pytest.raises(SystemExit) as exit_info:
        main(["-B", "64", "-C", "32", "--summary", str(path)])
    assert exit_info.value.code == 2
    assert (
        "--summary: the law was not fitted (insufficient_data: 2 runs)" in capsys.readouterr().err
    )
