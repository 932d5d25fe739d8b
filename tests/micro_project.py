"""Micro Kedro projects for the end-to-end tests of every experiment.

A micro project is a temporary folder holding the project's own ``conf/base``, a small
Pile-format shard of KJV chapters already in the raw folder (so the embedded corpus is not
materialised), and a ``conf/local`` whose parameter files shrink the experiment to seconds. The
pipelines then run as a user runs them: ``kedro run`` in a subprocess, so MLflow's process-wide
state (tracking URI, active experiment) cannot leak into other tests, with the project's
kedro-mlflow hook writing to an SQLite store inside the temporary project.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from ih_kedro.smoke import new_project, write_local_parameters  # noqa: F401 - re-exported

PROJECT_ROOT = Path(__file__).resolve().parents[1]

# A 300-token BPE and a 20% held-out split: enough validation text from a few dozen chapters.
MICRO_DATA_ENGINEERING = {"tokenizer": {"vocab_size": 300}, "held_out_fraction": 0.2}

# The experiments' micro runs (pareto, markov, bi_induct) train one after another in the kedro
# process: a local Ray instance and its workers cost ~17 s of start-up per sweep on 2 cores,
# more than the runs themselves. The Ray path of ``kedro run`` is tested end to end by the
# law_fit micro run (the default executor) and in tests/science/training/test_sweep.py.
SEQUENTIAL_EXECUTOR = {"executor": {"kind": "sequential"}}


def deep_merge(base: dict, override: dict) -> dict:
    """``override`` merged into ``base`` key by key (nested mappings merged, the rest replaced)."""
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def base_parameters(project: Path, name: str) -> dict[str, Any]:
    """The top-level ``name`` block of the project's ``conf/base/parameters_<name>.yml``."""
    path = project / "conf" / "base" / f"parameters_{name}.yml"
    return yaml.safe_load(path.read_text())[name]


def new_micro_project(folder: Path, n_documents: int = 60, docs_per_shard: int = 30) -> Path:
    """A project in ``folder/project`` with conf/base, an empty conf/local and a raw KJV shard
    (the layout ``make smoke`` builds: :func:`ih_kedro.smoke.new_project`)."""
    return new_project(folder / "project", n_documents=n_documents, docs_per_shard=docs_per_shard)


def micro_data_engineering(project: Path) -> dict[str, Any]:
    """The project's data_engineering parameters with :data:`MICRO_DATA_ENGINEERING` merged in."""
    return deep_merge(base_parameters(project, "data_engineering"), MICRO_DATA_ENGINEERING)


def kedro_run(project: Path, *arguments: str, timeout: int = 1800) -> subprocess.CompletedProcess:
    """``kedro run <arguments>`` in ``project``, with the project's own MLflow store.

    The timeout is a hang guard only: a shared 2-core machine can be ten times slower than a
    quiet one.
    """
    env = {key: value for key, value in os.environ.items() if key != "MLFLOW_TRACKING_URI"}
    return subprocess.run(
        [sys.executable, "-m", "kedro", "run", *arguments],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def run_output(result: subprocess.CompletedProcess) -> str:
    """The tail of a run's stdout and stderr, for assertion messages."""
    return result.stdout[-3000:] + result.stderr[-3000:]
