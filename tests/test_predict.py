"""The prediction command: a fitted law in, predicted emergence step with an interval out."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from ih_kedro.predict import main
from ih_kedro.science.statistics.emergence_law import fit_emergence_law
from ih_kedro.science.statistics.emergence_prediction import fit_summary_dict, predict_emergence


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


# ------------------------------------------------------------------ extrapolation and bad input


def test_predict_marks_configurations_outside_the_fitted_range(tmp_path, caplog) -> None:
    path = _summary(tmp_path)  # fitted on B 32-128, C 32-128
    with caplog.at_level("INFO"):
        assert main(["-B", "512", "64", "16", "-C", "64", "64", "256", "--summary", str(path)]) == 0
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warnings == [
        "predict_emergence: 2 of 3 configurations lie outside the fitted range "
        "(B 32-128, C 32-128): B 512 C 64, B 16 C 256; their intervals extrapolate the law"
    ]
    table = caplog.text
    assert "extrapolated" in table and "extrapolated_axis" in table and "B, C" in table


def test_prediction_frame_says_which_axis_extrapolates(tmp_path) -> None:
    summary = json.loads(_summary(tmp_path).read_text())
    assert summary["fitted_range"] == {"batch_size": [32.0, 128.0], "context_length": [32.0, 128.0]}
    got = predict_emergence(summary, [32, 128, 256, 64, 16], [128, 32, 64, 16, 256])
    assert got["extrapolated"].tolist() == [False, False, True, True, True]
    assert got["extrapolated_axis"].tolist() == ["", "", "B", "C", "B, C"]
    # A summary written before the range was recorded: unknown, not "inside".
    del summary["fitted_range"]
    old = predict_emergence(summary, [512], [64])
    assert old["extrapolated"].isna().all() and old["extrapolated_axis"].tolist() == [
        "unknown range"
    ]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["-B", "64", "-C", "0"], "argument -C/--context-length: expected a positive number, got '0'"),
        (["-B", "-64", "-C", "32"], "argument -B/--batch-size: expected a positive number, got '-64'"),
        (["-B", "many", "-C", "32"], "argument -B/--batch-size: expected a positive number, got 'many'"),
        (["-B", "inf", "-C", "32"], "argument -B/--batch-size: expected a positive number, got 'inf'"),
        (["-B", "64", "-C", "32", "--level", "95"], "argument --level: expected a level in (0, 1), got '95'"),
        (
            ["-B", "32", "64", "128", "-C", "32", "64"],
            "argument -C/--context-length: 2 values for 3 batch sizes; give one, or one per batch size",
        ),
    ],
)  # fmt: skip
def test_bad_input_is_one_line_naming_the_argument_exit_2(tmp_path, capsys, argv, message) -> None:
    path = _summary(tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        main([*argv, "--summary", str(path)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err == f"ih_kedro.predict: error: {message}\n"


def test_bad_input_from_the_command_line_has_no_traceback(tmp_path) -> None:
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "ih_kedro.predict", "--batch-size", "64", "--context-length", "0"],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "ih_kedro.predict: error: argument -C/--context-length: expected a positive number, got '0'"
    ]
