"""The README's commands, run as typed in subprocesses of a micro project.

The micro project is the one of ``tests/pipelines/test_law_fit.py`` (the project's conf/base, a
small KJV shard, conf/local shrinking the grid). Each test runs a README command word for word
(only the checkpoint path is the test's) and checks what it wrote.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
import pytest
import yaml

from ih_kedro.hooks import RuntimeEnvironmentHooks
from ih_kedro.science.statistics.emergence_law import fit_emergence_law
from ih_kedro.science.statistics.emergence_prediction import fit_summary_dict, predict_emergence
from ih_kedro.science.training.checkpoints import CheckpointStore
from ih_kedro.science.training.models import build_model
from tests.micro_project import deep_merge, write_local_parameters
from tests.pipelines.test_law_fit import (  # noqa: F401 - fixtures
    MICRO_TELEMETRY,
    MICRO_TRAINING,
    micro_params,
    micro_project,
)

README = Path(__file__).resolve().parents[1] / "README.md"


def command_in_readme(prefix: str) -> list[str]:
    """The README line that starts with ``prefix`` (after ``.venv/bin/``), split into words."""
    import shlex

    for raw in README.read_text().splitlines():
        line = raw.strip().removeprefix(".venv/bin/")
        if line.startswith(prefix):
            return shlex.split(line.split("  #")[0])
    raise AssertionError(f"README has no command starting with {prefix!r}")


def run(words: list[str], cwd: Path, timeout: int = 1800) -> subprocess.CompletedProcess:
    """Run a documented command with this interpreter's environment (kedro -> python -m kedro)."""
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    if words[0] in ("kedro", "python"):
        words = [sys.executable, *(["-m", "kedro"] if words[0] == "kedro" else []), *words[1:]]
    return subprocess.run(
        words, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def output(result: subprocess.CompletedProcess) -> str:
    return result.stdout[-4000:] + result.stderr[-4000:]


def test_kedro_under_a_launcher_is_refused(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(RuntimeError, match="ranks_per_run"):
        RuntimeEnvironmentHooks().after_context_created(None)


def test_a_dotted_params_override_changes_one_key_even_with_env_parameter_files(tmp_path):
    """``--params=telemetry.external_checkpoints=/p`` with a parameter file in conf/local: the
    project's settings merge key by key, so ``telemetry.probe`` survives (Kedro's default
    replaced the whole ``telemetry`` mapping: ``KeyError: 'probe'``)."""
    from kedro.config import OmegaConfigLoader

    from ih_kedro.settings import CONFIG_LOADER_ARGS

    root = Path(__file__).resolve().parents[1]
    conf = tmp_path / "conf"
    shutil.copytree(root / "conf" / "base", conf / "base")
    (conf / "local").mkdir()
    (conf / "local" / "parameters_law_fit.yml").write_text("law_fit: {telemetry: {batch_size: 4}}")
    runtime = {"telemetry": {"external_checkpoints": "/p"}, "law_fit": {"training": {"seeds": [1]}}}
    loader = OmegaConfigLoader(str(conf), runtime_params=runtime, **CONFIG_LOADER_ARGS)
    params = loader["parameters"]
    assert params["telemetry"]["external_checkpoints"] == "/p"
    assert params["telemetry"]["probe"]["n_samples"] == 100
    assert params["law_fit"]["training"]["seeds"] == [1]
    base = yaml.safe_load((root / "conf/base/parameters_law_fit.yml").read_text())
    assert (
        params["law_fit"]["training"]["batch_sizes"] == base["law_fit"]["training"]["batch_sizes"]
    )
    assert params["law_fit"]["telemetry"]["batch_size"] == 4
    assert params["law_fit"]["telemetry"]["probe"]["top_k"] == 500


def test_predict_command(tmp_path):
    rng = np.random.default_rng(0)
    rows = [
        {
            "batch_size": b,
            "context_length": c,
            "step": 2e5 / (b**0.4 * c**0.6) * rng.lognormal(0, 0.05),
        }
        for b in (32, 128, 512)
        for c in (24, 32, 48)
    ]
    fit = fit_emergence_law(pd.DataFrame(rows), leave_one_out=False)
    summary = {"status": "ok", **fit_summary_dict(fit)}
    folder = tmp_path / "data" / "08_reporting" / "law_fit"
    folder.mkdir(parents=True)
    (folder / "law_fit_summary.json").write_text(json.dumps(summary, default=float))
    words = command_in_readme("python -m ih_kedro.predict")
    assert words[1:] == ["-m", "ih_kedro.predict", "--batch-size", "512", "--context-length", "64"]
    result = run(words, tmp_path, timeout=300)
    assert result.returncode == 0, output(result)
    expected = predict_emergence(summary, 512, 64).iloc[0]
    assert f"{expected['step']:,.0f}" in result.stdout
    assert f"{expected['tokens']:,.0f}" in result.stdout


@pytest.mark.slow
def test_stage_commands_in_order(micro_project, micro_params):  # noqa: F811
    """The README's stage commands, as typed and in order: data engineering, the training sweep
    (its own ``training`` parameters, shrunk in conf/local), then offline telemetry on the
    checkpoints it wrote. Each reads only what the previous one left in the catalog."""
    root = Path(__file__).resolve().parents[1]
    base_training = yaml.safe_load((root / "conf/base/parameters_training.yml").read_text())
    base_telemetry = yaml.safe_load((root / "conf/base/parameters_telemetry.yml").read_text())
    local = micro_project / "conf" / "local"
    training = deep_merge(base_training["training"], MICRO_TRAINING)
    training.update(batch_sizes=[4], context_lengths=[16], data_variants=["copy_spans"])
    training["executor"] = {**training["executor"], "kind": "sequential"}
    (local / "parameters_training.yml").write_text(yaml.safe_dump({"training": training}))
    telemetry = deep_merge(base_telemetry["telemetry"], MICRO_TELEMETRY)
    (local / "parameters_telemetry.yml").write_text(yaml.safe_dump({"telemetry": telemetry}))
    try:
        for prefix in ("kedro run --pipeline=data_engineering", "kedro run --pipeline=training",
                       "kedro run --pipeline=telemetry"):  # fmt: skip
            words = command_in_readme(prefix)
            assert words == ["kedro", "run", prefix.split()[-1]]
            result = run(words, micro_project)
            assert result.returncode == 0, output(result)
    finally:
        (local / "parameters_training.yml").unlink()
        (local / "parameters_telemetry.yml").unlink()
    outputs = micro_project / "data" / "07_model_output"
    manifest = pd.read_parquet(outputs / "sweep_manifest.parquet")
    assert manifest["run_name"].tolist() == ["attn-only-2l-d128_B4_C16_copy_spans_s0"]
    assert manifest["steps_trained"].tolist() == [12]
    scores = pd.read_parquet(outputs / "head_scores.parquet")
    assert set(scores["run_name"]) == set(manifest["run_name"])
    # step 0, the dense steps 1 and 2, every 6 steps, the final step
    assert sorted(scores["step"].unique()) == [0, 1, 2, 6, 12]
    assert set(scores["probe_length"]) == {8}  # min(50, 16 // 2)
    table = pd.read_parquet(outputs / "emergence_table.parquet")
    assert set(table["run_name"]) == set(manifest["run_name"])
    assert table["status"].notna().all()


@pytest.mark.slow
def test_telemetry_external_command(micro_project, micro_params, tmp_path):  # noqa: F811
    result = run(["kedro", "run", "--pipeline=data_engineering"], micro_project)
    assert result.returncode == 0, output(result)
    vocab = micro_params["data_engineering"]["tokenizer"]["vocab_size"]
    external = tmp_path / "external_run"
    store = CheckpointStore(tmp_path)
    model = build_model("attn-only-2l-d64", vocab, 16, seed=0)
    for step in (0, 10):
        state = {"step": step, "tokens_seen": step * 64}
        store.save_hf_checkpoint("external_run", step, model, state)
    words = command_in_readme("kedro run --pipeline=telemetry_external")
    words = [w.replace("/path/to/checkpoints", str(external)) for w in words]
    assert words[-1] == f"--params=telemetry.external_checkpoints={external}"
    result = run(words, micro_project)
    assert result.returncode == 0, output(result)
    scores = pd.read_parquet(micro_project / "data/07_model_output/external/head_scores.parquet")
    assert set(scores["run_name"]) == {"external_run"}
    assert sorted(scores["step"].unique()) == [0, 10]


@pytest.mark.slow
def test_paper_command_reaches_parameter_validation(micro_project, micro_params):  # noqa: F811
    """``--env paper`` on a CPU machine: the corpus is built, then the sweep refuses the paper
    configuration's one-GPU runs before any training, naming the parameter."""
    root = Path(__file__).resolve().parents[1]
    shutil.copytree(root / "conf" / "paper", micro_project / "conf" / "paper")
    shutil.move(micro_project / "data/01_raw/corpus", micro_project / "data/01_raw/pile")
    for path in (micro_project / "conf" / "local").glob("parameters_*.yml"):
        path.unlink()  # the paper configuration alone
    words = command_in_readme("kedro run --env paper --pipeline=law_fit")
    result = run(words, micro_project)
    assert result.returncode != 0
    assert "training.executor.num_gpus_per_run" in output(result), output(result)
    assert (micro_project / "data/05_model_input/pile/train_tokens/meta.json").is_file()
    assert not (micro_project / "data/06_models/law_fit/checkpoints").exists() or not any(
        (micro_project / "data/06_models/law_fit/checkpoints").iterdir()
    )


@pytest.mark.slow
def test_multi_rank_command_end_to_end(micro_project, micro_params):  # noqa: F811
    # The micro parameters written again: the paper-command test removes conf/local's files.
    params = copy.deepcopy(micro_params)
    params["law_fit"]["training"].update(batch_sizes=[8], context_lengths=[16])
    write_local_parameters(micro_project, params)
    words = command_in_readme('kedro run --pipeline=law_fit --params "law_fit.training.executor')
    assert words[-1] == "law_fit.training.executor.ranks_per_run=2"
    result = run(words, micro_project)
    assert result.returncode == 0, output(result)
    manifest = pd.read_parquet(
        micro_project / "data/07_model_output/law_fit/sweep_manifest.parquet"
    )
    assert manifest["run_name"].tolist() == ["attn-only-2l-d128_B8_C16_fixed_rate_copies_s0"]
    assert manifest["steps_trained"].tolist() == [12]
    run_dir = Path(manifest["run_dir"][0])
    assert "2 ranks" in output(result) or (run_dir / "deepspeed_job.log").is_file()
    log = (run_dir / "deepspeed_job.log").read_text()
    assert "dist_world_size=2" in log
    mlflow.set_tracking_uri(f"sqlite:///{micro_project / 'mlflow.db'}")
    try:
        runs = mlflow.search_runs(search_all_experiments=True)
    finally:
        mlflow.set_tracking_uri(os.environ["MLFLOW_TRACKING_URI"])
    nested = runs[runs["tags.mlflow.parentRunId"].notna()]
    training = nested[nested["tags.run_name"] == manifest["run_name"][0]]
    assert len(training) == 1  # rank 0 only
    parent = runs[runs["run_id"] == training["tags.mlflow.parentRunId"].iloc[0]]
    assert parent["status"].tolist() == ["FINISHED"]
