"""The prediction command: a fitted law in, predicted emergence step with an interval out."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from ih_kedro.predict import main
from ih_kedro.science.statistics.emergence_law import fit_emergence_law
from ih_kedro.science.statistics.emergence_prediction import fit_summary_dict


def _summary(tmp_path):
    rng = np.random.default_rng(0)
    rows = [
        {
            "run_name": f"B{b}_C{c}_s{s}",
            "batch_size": b,
            "context_length": c,
            "seed": s,
            "step": 1e5 / (b**0.37 * c**0.62) * math.exp(rng.normal(0, 0.05)),
            "censored": False,
        }
        for b in (32, 64, 128)
        for c in (32, 64, 128)
        for s in range(2)
    ]
    table = pd.DataFrame(rows)
    table["tokens"] = table["step"] * table["batch_size"] * table["context_length"]
    summary = {"status": "ok", **fit_summary_dict(fit_emergence_law(table))}
    path = tmp_path / "law_fit_summary.json"
    path.write_text(json.dumps(summary))
    return path


def test_predict_prints_step_and_interval(tmp_path, caplog) -> None:
    path = _summary(tmp_path)
    with caplog.at_level("INFO", logger="ih_kedro.predict"):
        assert main(["-B", "256", "-C", "64", "--summary", str(path)]) == 0
    text = caplog.text
    expected = 1e5 / (256**0.37 * 64**0.62)  # ≈ 975 steps
    assert "a = 0." in text and "b = 0." in text and "step_low" in text
    shown = [float(tok.replace(",", "")) for tok in text.split() if tok.replace(",", "").isdigit()]
    assert any(abs(value - expected) / expected < 0.1 for value in shown)


def test_predict_without_a_fit_is_a_clear_error(tmp_path) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["-B", "64", "-C", "32", "--summary", str(tmp_path / "missing.json")])
    assert exit_info.value.code == 2
