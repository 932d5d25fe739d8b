"""``make smoke``: the micro study's project, its parameters, and what it prints at the end."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from ih_kedro import smoke

ROOT = Path(__file__).resolve().parents[1]


def test_smoke_parameters_shrink_law_fit_and_the_readme_says_how() -> None:
    params = smoke.smoke_parameters()
    training = params["law_fit"]["training"]
    assert training["seeds"] == [0]
    assert len(training["batch_sizes"]) * len(training["context_lengths"]) == 4
    readme = (ROOT / "README.md").read_text()
    described = re.search(r"B \{([\d, ]+)\} ×\s+C \{([\d, ]+)\}, one seed", readme)
    assert described is not None
    assert [int(b) for b in described.group(1).split(",")] == training["batch_sizes"]
    assert [int(c) for c in described.group(2).split(",")] == training["context_lengths"]
    assert f"{smoke.SMOKE_DOCUMENTS} KJV chapters" in readme
    assert f"{params['data_engineering']['tokenizer']['vocab_size']}-token BPE" in readme


def test_new_project_holds_conf_a_raw_shard_and_the_local_overrides(tmp_path: Path) -> None:
    project = smoke.new_project(tmp_path / "p", n_documents=30, docs_per_shard=10)
    smoke.write_local_parameters(project, smoke.smoke_parameters())
    assert (project / "pyproject.toml").is_file() and (project / "src").is_dir()
    assert sorted(p.name for p in (project / "data" / "01_raw" / "corpus").iterdir()) == [
        "shard_00000.jsonl.zst",
        "shard_00001.jsonl.zst",
        "shard_00002.jsonl.zst",
    ]
    local = yaml.safe_load((project / "conf/local/parameters_law_fit.yml").read_text())
    assert local["law_fit"]["training"]["seeds"] == [0]
    base = yaml.safe_load((project / "conf/base/parameters_law_fit.yml").read_text())
    assert base["law_fit"]["training"]["seeds"] == [0, 1]  # conf/base untouched


def test_where_to_look_reports_the_fit_the_runs_and_the_commands(tmp_path: Path) -> None:
    reporting = tmp_path / "data" / "08_reporting" / "law_fit"
    reporting.mkdir(parents=True)
    summary = {
        "status": "ok",
        "a": {"estimate": 0.61, "ci_low": -1.5, "ci_high": 2.7},
        "b": {"estimate": 0.2, "ci_low": -3.0, "ci_high": 3.4},
    }
    (reporting / "law_fit_summary.json").write_text(json.dumps(summary))
    (reporting / "ps_trajectories.png").write_bytes(b"png")
    table = tmp_path / "data" / "07_model_output" / "law_fit"
    table.mkdir(parents=True)
    pd.DataFrame(
        {
            "metric": ["prefix_matching"] * 4 + ["associative_recall"],
            "method": ["threshold"] * 5,
            "status": ["emerged", "emerged", "emerged", "censored", "emerged"],
        }
    ).to_parquet(table / "emergence_table.parquet")
    text = smoke.where_to_look(tmp_path)
    assert "a = 0.61 [-1.50, 2.70], b = 0.20 [-3.00, 3.40]" in text
    assert "runs that formed an induction head: 3 of 4" in text
    assert "figures (1)" in text and "ps_trajectories.png" in text
    assert f"--backend-store-uri sqlite:///{tmp_path}/mlflow.db" in text
    assert f"cd {tmp_path} && " in text and "kedro viz run" in text


def test_too_few_documents_is_a_one_line_error(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "ih_kedro.smoke", "--dir", str(tmp_path / "s"), "--documents", "5"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2
    assert "--documents: at least 20 chapters are needed, got 5" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "s").exists()


@pytest.mark.slow
def test_make_smoke_forms_heads_and_fits_the_law(tmp_path: Path) -> None:
    """The whole micro study, as `make smoke` runs it (minutes on 2 cores)."""
    result = subprocess.run(
        [sys.executable, "-m", "ih_kedro.smoke", "--dir", str(tmp_path / "smoke")],
        capture_output=True,
        text=True,
        check=False,
        timeout=3600,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "runs that formed an induction head: 4 of 4" in result.stdout
    assert re.search(r"law \(4 configurations.*a = -?\d", result.stdout)
