"""The emergence table on synthetic sigmoid trajectories: columns, covariates, spec errors."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ih_kedro.science.telemetry.emergence import threshold_crossing
from ih_kedro.science.telemetry.emergence_table import EMERGENCE_COLUMNS, detect_emergence_table
from tests.science.telemetry.emergence_runs import STEPS, head_samples, log_logistic


def test_table_has_columns_and_joins_covariates():
    runs = {
        "b32_c32_s0": {
            "steps": STEPS,
            "tokens": STEPS * 32 * 32,
            "prefix_matching": head_samples(log_logistic(STEPS, 900.0), n=20, seed=0),
            "associative_recall": np.clip(
                log_logistic(STEPS, 1000.0)[:, None] + np.zeros((1, 20)), 0, 1
            ),
        },
        "b64_c32_s0": {
            "steps": STEPS,
            "tokens_seen": STEPS * 64 * 32,
            "prefix_matching": head_samples(np.full(STEPS.size, 0.05), n=20, seed=1),
        },
    }
    manifest = pd.DataFrame(
        {
            "run_name": ["b32_c32_s0", "b64_c32_s0"],
            "preset": ["attn2l", "attn2l"],
            "batch_size": [32, 64],
            "context_length": [32, 32],
            "seed": [0, 0],
            "copy_rate": [1.0, 1.0],
            "data_variant": ["copy_spans", "copy_spans"],
            "learning_rate": [3e-3, 3e-3],
        }
    )
    specs = [
        {
            "metric": "prefix_matching",
            "method": "threshold",
            "threshold": 0.4,
            "min_layer": 1,
            "n_bootstrap": 20,
            "seed": 0,
        },
        {
            "metric": "associative_recall",
            "method": "threshold",
            "threshold": 0.3,
            "n_bootstrap": 20,
            "seed": 0,
        },
    ]
    table = detect_emergence_table(runs, manifest, specs)
    assert list(table.columns) == [
        *EMERGENCE_COLUMNS,
        "preset",
        "batch_size",
        "context_length",
        "seed",
        "copy_rate",
        "data_variant",
    ]
    # The second run has no associative_recall samples: 3 rows, censored run kept.
    assert len(table) == 3
    censored = table[table.run_name == "b64_c32_s0"].iloc[0]
    assert censored.censored and censored.status == "censored"
    assert censored.step == 2000.0 and censored.last_step == 2000.0
    assert censored.tokens == 2000.0 * 64 * 32
    assert table.status.tolist() == ["emerged", "emerged", "censored"]
    assert table.reason.tolist()[:2] == ["", ""]
    assert table.min_layer.tolist() == [1, 0, 1]
    assert censored.batch_size == 64
    emerged = table[(table.run_name == "b32_c32_s0") & (table.metric == "prefix_matching")]
    assert emerged.step.iloc[0] == pytest.approx(
        threshold_crossing(STEPS, log_logistic(STEPS, 900.0), 0.4), rel=0.05
    )
    assert table.threshold.tolist() == [0.4, 0.3, 0.4]
    # Without a manifest: only the emergence columns.
    assert list(detect_emergence_table(runs, None, specs[:1]).columns) == EMERGENCE_COLUMNS


def test_min_layer_beyond_the_model_names_the_spec_parameter():
    runs = {"r": {"steps": STEPS, "tokens": STEPS, "prefix_matching": head_samples(STEPS * 0, n=4)}}
    specs = [{"metric": "prefix_matching", "threshold": 0.4, "min_layer": 2, "n_bootstrap": 0}]
    with pytest.raises(ValueError, match=r"telemetry\.emergence\.metrics\[0\]\.min_layer"):
        detect_emergence_table(runs, None, specs)
