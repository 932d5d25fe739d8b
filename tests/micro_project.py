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

# The evaluated experiments (bi_induct, base_calibration, model_choice): 4 steps at B 4 x C 48,
# a checkpoint every 2 steps, online emergence checked every 2; each test adds its seeds, arms
# or presets.
MICRO_EXPERIMENT_TRAINING = {"batch_sizes": [4], "context_lengths": [48], "max_steps": 4,
                             "warmup_steps": 1, "checkpoint_every": 2, "log_every": 2,
                             "online_emergence": {"eval_every": 2, "n_probes": 4},
                             **SEQUENTIAL_EXECUTOR}  # fmt: skip
MICRO_EXPERIMENT_TELEMETRY = {"probe": {"n_samples": 4, "snippet_length": 5}, "batch_size": 4,
                              "n_validation_sequences": 2, "emergence": {"n_bootstrap": 5}}  # fmt: skip
MICRO_EVALUATION = {"n_validation_sequences": 4, "n_prompts_per_task": 1, "n_probes": 4,
                    "n_controls": 1, "snippet_length": 5, "results": {"n_bootstrap": 20}}  # fmt: skip

# law_mechanisms' arms (and law_mechanisms_reference's): 2 steps over C {16, 32}, one seed,
# nothing emerges (the fits say "not fitted"; their tables still get one row per arm).
MICRO_LAW_ARM = {"batch_sizes": [4], "context_lengths": [16, 32], "seeds": [0], "max_steps": 2,
                 "max_tokens": None, "warmup_steps": 1, "checkpoint_dense_until": 0,
                 "checkpoint_every": 1, "log_every": 1, **SEQUENTIAL_EXECUTOR,
                 "online_emergence": {"enabled": False}}  # fmt: skip
MICRO_LAW_TELEMETRY = {"probe": {"n_samples": 4}, "batch_size": 4, "n_validation_sequences": 2,
                       "emergence": {"n_bootstrap": 5}}  # fmt: skip


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
