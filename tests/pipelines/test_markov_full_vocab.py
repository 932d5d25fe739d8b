"""``markov_full_vocab``: the markov pipeline in its own namespace, over the full vocabulary.

The graph is markov's with every name moved to ``markov_full_vocab``; its parameters are
markov's but for ``vocabulary.compact`` (a YAML merge key, in conf/base and conf/paper); its
datasets resolve under ``.../markov_full_vocab/`` (the ``markov{variant}`` factories and the
stage factories) and the new factories capture no other pipeline's dataset; its verdicts name
the pipeline in the next look's command and in MLflow. The training itself is markov's, run end
to end in CI by tests/pipelines/test_markov.py; the micro run of this pipeline is ``slow`` only.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from kedro.config import OmegaConfigLoader
from kedro.framework.project import pipelines
from kedro.framework.startup import bootstrap_project
from kedro.io.catalog_config_resolver import CatalogConfigResolver

from ih_kedro.adaptive_seeds import REPORTS
from ih_kedro.cli import split_params
from ih_kedro.pipelines.markov.pipeline import EXPERIMENT as MARKOV
from ih_kedro.pipelines.markov_full_vocab import EXPERIMENT
from ih_kedro.science.data.tokenization import read_packed_tokens
from ih_kedro.settings import CONFIG_LOADER_ARGS
from tests.micro_project import kedro_run, new_micro_project, run_output
from tests.pipelines.test_markov_nodes import (
    _AGREEMENT_TAGS,
    _EXPECTED_METRICS,
    _FRONTIER_LEVEL,
    _LOGGED_TABLE,
    _VERDICT_TAGS,
    _VERDICTS,
    _FakeMlflow,
    _runs_table,
)

ROOT = Path(__file__).resolve().parents[2]
# markov's own datasets (conf/base/catalog_markov.yml); the rest come from stage factories.
OWN_DATASETS = (
    "processes", "process_table", "variant_data", "calibration_variant_data",
    "calibration_sweep_manifest", "frontier_level", "runs_table", "conditions_table",
    "verdicts", "processes_plot", "conditions_plot", "comparisons_plot",
)  # fmt: skip


def _renamed(name: str) -> str:
    """A markov dataset, parameter or node name moved to the markov_full_vocab namespace."""
    for prefix in (f"{MARKOV}.", f"params:{MARKOV}."):
        if name.startswith(prefix):
            return prefix.replace(MARKOV, EXPERIMENT) + name.removeprefix(prefix)
    return name


def _rename_back(name: str) -> str:
    """A markov_full_vocab name with the markov namespace back (for comparing to markov's)."""
    for prefix in (f"{EXPERIMENT}.", f"params:{EXPERIMENT}."):
        if name.startswith(prefix):
            return prefix.replace(EXPERIMENT, MARKOV) + name.removeprefix(prefix)
    return name


def _resolver() -> CatalogConfigResolver:
    loader = OmegaConfigLoader(str(ROOT / "conf"), **CONFIG_LOADER_ARGS)
    return CatalogConfigResolver(loader["catalog"])


def _path(config: dict[str, Any]) -> str | None:
    return config.get("filepath", config.get("path"))


def test_registry_has_markov_in_the_full_vocab_namespace(project_root: Path) -> None:
    bootstrap_project(project_root)
    full, markov = pipelines[EXPERIMENT], pipelines[MARKOV]
    # The same graph, every node, dataset and parameter of markov's namespace renamed.
    assert len(full.nodes) == len(markov.nodes) == 24
    assert {(n.name, tuple(n.inputs), tuple(n.outputs)) for n in full.nodes} == {
        (_renamed(n.name), tuple(map(_renamed, n.inputs)), tuple(map(_renamed, n.outputs)))
        for n in markov.nodes
    }
    assert {n.namespace for n in full.nodes} >= {
        EXPERIMENT, f"{EXPERIMENT}.training", f"{EXPERIMENT}.telemetry",
        f"{EXPERIMENT}.vocabulary", "data_engineering",
    }  # fmt: skip
    assert not any(n.startswith(f"{MARKOV}.") for n in full.datasets())
    assert {f"{EXPERIMENT}.{name}" for name in OWN_DATASETS} <= full.all_outputs()
    assert {f"{EXPERIMENT}.{name}" for name in ("sweep_manifest", "emergence_table",
                                                "train_tokens")} <= full.all_outputs()  # fmt: skip
    assert f"params:{EXPERIMENT}.vocabulary" in full.inputs()
    # Shared with markov: the corpus and the tokenizer only.
    shared = {n for n in full.datasets() if not n.startswith(("params:", f"{EXPERIMENT}."))}
    assert shared == {n for n in markov.datasets() if not n.startswith(("params:", f"{MARKOV}."))}
    assert {"tokenizer", "train_tokens", "validation_tokens"} <= shared


def test_every_dataset_resolves_under_markov_full_vocab(project_root: Path) -> None:
    bootstrap_project(project_root)
    resolver = _resolver()
    full = pipelines[EXPERIMENT]
    names = sorted(n for n in full.datasets() if n.startswith(f"{EXPERIMENT}."))
    assert len(names) == 23  # the 12 of catalog_markov.yml + 11 from the stage factories
    for name in names:
        config = resolver.resolve_pattern(name)
        markov_config = resolver.resolve_pattern(_rename_back(name))
        # Every one is persisted, as markov's is, at markov's path with the folder renamed:
        # data/<layer>/markov_full_vocab/...
        assert config["type"] == markov_config["type"], name
        assert f"/{MARKOV}/" in _path(markov_config), name
        assert _path(config) == _path(markov_config).replace(f"/{MARKOV}/", f"/{EXPERIMENT}/"), name
    verdicts = resolver.resolve_pattern(f"{EXPERIMENT}.verdicts")
    assert verdicts["filepath"] == "data/08_reporting/markov_full_vocab/verdicts.json"
    assert verdicts["filepath"] == REPORTS[EXPERIMENT]
    assert resolver.resolve_pattern(f"{EXPERIMENT}.processes")["path"] == (
        "data/05_model_input/markov_full_vocab/processes"
    )
    # markov's explicit entries keep their paths.
    assert resolver.resolve_pattern(f"{MARKOV}.verdicts")["filepath"] == REPORTS[MARKOV]


def test_the_markov_factories_capture_no_other_pipelines_dataset(project_root: Path) -> None:
    """A pattern starting ``markov{variant}`` can only match a markov variant's datasets: every
    registered pipeline's other datasets resolve as before (explicit, a stage factory, memory)."""
    bootstrap_project(project_root)
    resolver = _resolver()
    ours = {p for p in resolver.list_patterns() if p.startswith("markov{variant}.")}
    assert ours == {f"markov{{variant}}.{name}" for name in OWN_DATASETS}
    for pipeline_name, pipeline in pipelines.items():
        for name in pipeline.datasets():
            if name.startswith(f"{EXPERIMENT}.") or name in resolver.config:
                continue
            assert resolver.match_dataset_pattern(name) not in ours, (pipeline_name, name)


@pytest.mark.parametrize("env", ["local", "paper"])
def test_parameters_are_markovs_but_the_vocabulary(env: str) -> None:
    loader = OmegaConfigLoader(str(ROOT / "conf"), **{**CONFIG_LOADER_ARGS,
                                                     "default_run_env": env})  # fmt: skip
    parameters = loader["parameters"]
    markov, full = parameters[MARKOV], parameters[EXPERIMENT]
    assert markov["vocabulary"]["compact"] is True and full["vocabulary"]["compact"] is False
    assert full["vocabulary"]["size"] == markov["vocabulary"]["size"]
    assert full["vocabulary"]["size"] == {"local": 64, "paper": 1024}[env]
    assert {**full, "vocabulary": markov["vocabulary"]} == markov
    assert full["training"]["max_steps"] == markov["training"]["max_steps"]
    assert full["design"]["processes"] == markov["design"]["processes"]


def test_the_next_look_command_runs_markov_full_vocab(project_root: Path) -> None:
    bootstrap_project(project_root)
    nodes = {n.name: n for n in pipelines[EXPERIMENT].nodes}
    judge = nodes[f"{EXPERIMENT}.judge"].func
    conditions = {"adaptive_seeds": {"enabled": True, "planned": 3, "batch": 2, "cap": 5}}
    following = judge(_runs_table(), _FRONTIER_LEVEL, conditions)["sequential"]["next_look"]
    assert following["seeds"] == [0, 1, 2, 3, 4]
    assert following["command"] == (
        "kedro run --pipeline=markov_full_vocab "
        "--params='markov_full_vocab.training.seeds=[0,1,2,3,4]'"
    )
    overrides = following["command"].split("--params=", 1)[1].strip("'")
    assert split_params(None, None, overrides) == {
        EXPERIMENT: {"training": {"seeds": [0, 1, 2, 3, 4]}}
    }
    # markov's own judge still names markov
    markov_judge = next(n.func for n in pipelines[MARKOV].nodes if n.name == f"{MARKOV}.judge")
    markov_look = markov_judge(_runs_table(), _FRONTIER_LEVEL, conditions)
    assert markov_look["sequential"]["next_look"]["command"].startswith(
        "kedro run --pipeline=markov --params='markov.training.seeds=[0,1,2,3,4]'"
    )


def _renamed_keys(mapping: dict[str, Any]) -> dict[str, Any]:
    return {_renamed(key): value for key, value in mapping.items()}


def test_mlflow_names_the_full_vocab_run_and_keys(
    project_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bootstrap_project(project_root)
    node = next(n for n in pipelines[EXPERIMENT].nodes
                if n.name == f"{EXPERIMENT}.log_markov_to_mlflow")  # fmt: skip
    fake = _FakeMlflow(active=None)
    monkeypatch.setitem(sys.modules, "mlflow", fake)
    node.func(_VERDICTS, _LOGGED_TABLE)
    assert fake.calls == [
        ("start_run", {"run_name": "markov_full_vocab"}),
        ("set_tags", _renamed_keys(_VERDICT_TAGS)),
        ("set_tags", _renamed_keys(_AGREEMENT_TAGS)),
        ("log_metrics", _renamed_keys(_EXPECTED_METRICS)),
        ("end_run", {}),
    ]
    assert "markov_full_vocab.ld_necessary" in fake.calls[1][1]


@pytest.mark.slow  # a micro markov run (about a minute on 2 cores); markov's runs in CI
def test_markov_full_vocab_kedro_run_writes_beside_markov(tmp_path: Path) -> None:
    """``kedro run --pipeline=markov_full_vocab`` on test_markov's micro design: the models
    over the micro tokenizer's 300 ids, every output under markov_full_vocab/, the next look's
    command and the MLflow parent run naming the pipeline."""
    import mlflow

    from tests.pipelines.test_markov import _micro_params

    project = new_micro_project(tmp_path)
    micro = _micro_params(project)[MARKOV]
    full = {**micro, "vocabulary": {"compact": False, "size": 16}}
    path = project / "conf" / "base" / "parameters_markov.yml"
    path.write_text(yaml.safe_dump({MARKOV: micro, EXPERIMENT: full}))
    result = kedro_run(project, f"--pipeline={EXPERIMENT}")
    assert result.returncode == 0, run_output(result)

    data = project / "data"
    assert not list(data.rglob(f"{MARKOV}/*"))  # nothing of markov's
    streams = read_packed_tokens(data / "05_model_input" / EXPERIMENT / "train_tokens")
    assert streams.vocab_size == 300
    configs = list((data / "06_models" / EXPERIMENT).rglob("config.json"))
    assert configs and {json.loads(c.read_text())["vocab_size"] for c in configs} == {300}
    manifest = data / "07_model_output" / EXPERIMENT / "sweep_manifest.parquet"
    assert manifest.exists()
    reporting = data / "08_reporting" / EXPERIMENT
    assert {p.name for p in reporting.iterdir()} >= {
        "verdicts.json", "runs_table.csv", "conditions_table.csv", "frontier_level.json",
        "process_table.csv", "processes.png", "conditions.png", "comparisons.png",
    }  # fmt: skip
    verdicts = json.loads((reporting / "verdicts.json").read_text())
    assert {v["verdict"] for v in verdicts["claims"].values()} == {"undecided"}
    assert verdicts["sequential"]["next_look"]["command"].startswith(
        "kedro run --pipeline=markov_full_vocab --params='markov_full_vocab.training.seeds=[0,1,2],"
        "markov_full_vocab.training.seed_cells=[{seeds: [2], labels: ["
    )

    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{project / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("ih_kedro")
    runs = client.search_runs([experiment.experiment_id])
    (parent,) = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    assert parent.info.run_name == EXPERIMENT
    assert parent.data.tags[f"{EXPERIMENT}.ld_necessary"] == "undecided"
    assert not any(key.startswith(f"{MARKOV}.") for key in parent.data.tags)
