"""The adaptive-seeds loop: each round's seeds come from the last report's next look."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ih_kedro import adaptive_seeds
from ih_kedro.adaptive_seeds import (
    look_command,
    look_overrides,
    next_seeds,
    run_until_settled,
    seeds_override,
)
from ih_kedro.cli import split_params


def _report(seeds):
    return {"sequential": {"next_look": {"seeds": seeds} if seeds else None}}


def test_rounds_follow_the_next_look_until_settled():
    reports = iter([_report([0, 1, 2, 3, 4, 5, 6]), _report([0, 1, 2, 3, 4, 5, 6, 7, 8]),
                    _report(None)])  # fmt: skip
    ran = []
    rounds = run_until_settled("bi_induct", ran.append, lambda: next(reports))
    assert [r and r["seeds"] for r in ran] == [None, [0, 1, 2, 3, 4, 5, 6],
                                               [0, 1, 2, 3, 4, 5, 6, 7, 8]]  # fmt: skip
    assert [r["next_seeds"] for r in rounds][-1] is None


def test_stops_at_max_rounds_and_when_nothing_is_added():
    ran = []
    run_until_settled("markov", ran.append, lambda: _report([0, 1, 2, 3, 4]), max_rounds=5)
    assert [r and r["seeds"] for r in ran] == [None, [0, 1, 2, 3, 4]]  # asks for what it had
    ran.clear()
    grow = iter(_report(list(range(n))) for n in range(4, 20))
    run_until_settled("markov", ran.append, lambda: next(grow), look={"seeds": [0, 1, 2]},
                      max_rounds=2)  # fmt: skip
    assert [r["seeds"] for r in ran] == [[0, 1, 2], [0, 1, 2, 3]]
    with pytest.raises(ValueError, match="law_fit"):
        run_until_settled("law_fit", ran.append, dict)


def test_override_and_report_reading():
    assert seeds_override("bi_induct", [0, 1, 5]) == "bi_induct.training.seeds=[0,1,5]"
    assert next_seeds({}) is None and next_seeds(_report([3, 4])) == [3, 4]
    look = {"seeds": [0, 1, 2, 3], "seed_cells": [{"seeds": [3], "labels": ["a.b", "c"]}]}
    assert look_command("markov", look) == (
        "kedro run --pipeline=markov --params='markov.training.seeds=[0,1,2,3],"
        "markov.training.seed_cells=[{seeds: [3], labels: [a.b, c]}]'"
    )
    # The project's CLI reads the items back as the parameters they set.
    params = split_params(None, None, ",".join(look_overrides("markov", look)))
    assert params == {"markov": {"training": {"seeds": [0, 1, 2, 3], "seed_cells": [
        {"seeds": [3], "labels": ["a.b", "c"]}]}}}  # fmt: skip


def test_main_runs_kedro_with_the_seeds(tmp_path: Path, monkeypatch):
    report = tmp_path / adaptive_seeds.REPORTS["bi_induct"]
    report.parent.mkdir(parents=True)
    commands = []

    def fake_run(command, cwd, check):
        commands.append(command)
        seeds = [0, 1, 2, 3, 4, 5, 6] if len(commands) == 1 else None
        report.write_text(json.dumps(_report(seeds)))

    monkeypatch.setattr(adaptive_seeds.subprocess, "run", fake_run)
    rounds = adaptive_seeds.main(["--pipeline=bi_induct", f"--project={tmp_path}"])
    assert len(rounds) == 2
    assert commands[0][-1] == "--pipeline=bi_induct"
    assert commands[1][-1] == "--params=bi_induct.training.seeds=[0,1,2,3,4,5,6]"
    # The caller's own --params join the look's (kedro run takes one --params).
    commands.clear()
    adaptive_seeds.main(["--pipeline=bi_induct", f"--project={tmp_path}", "--",
                         "--params=bi_induct.training.max_steps=10", "--env=local"])  # fmt: skip
    assert commands[0][-2:] == ["--env=local", "--params=bi_induct.training.max_steps=10"]
    assert commands[1][-1] == (
        "--params=bi_induct.training.max_steps=10,bi_induct.training.seeds=[0,1,2,3,4,5,6]"
    )


def test_resume_starts_from_the_reports_next_look(tmp_path: Path, monkeypatch):
    """``--resume`` skips re-running the configured seeds: the first command is the report's
    next look; a settled report runs nothing; no report is a clear error."""
    report = tmp_path / adaptive_seeds.REPORTS["bi_induct"]
    report.parent.mkdir(parents=True)
    commands = []

    def fake_run(command, cwd, check):
        commands.append(command)
        report.write_text(json.dumps(_report(None)))  # the look settled every claim

    monkeypatch.setattr(adaptive_seeds.subprocess, "run", fake_run)
    with pytest.raises(SystemExit):
        adaptive_seeds.main(["--pipeline=bi_induct", f"--project={tmp_path}", "--resume"])
    report.write_text(json.dumps(_report([0, 1, 2, 3, 4, 5, 6])))
    rounds = adaptive_seeds.main(["--pipeline=bi_induct", f"--project={tmp_path}", "--resume"])
    assert [c[-1] for c in commands] == ["--params=bi_induct.training.seeds=[0,1,2,3,4,5,6]"]
    assert rounds == [{"round": 1, "seeds": [0, 1, 2, 3, 4, 5, 6], "next_seeds": None,
                       "next_seed_cells": None}]  # fmt: skip
    assert adaptive_seeds.main(["--pipeline=bi_induct", f"--project={tmp_path}", "--resume"]) == []
    assert len(commands) == 1  # settled: nothing run


def test_markov_full_vocab_loops_its_own_pipeline_and_report(tmp_path: Path, monkeypatch):
    """``--pipeline=markov_full_vocab``: its runs, its overrides (its parameters' namespace) and
    its verdicts.json, not markov's."""
    report = tmp_path / "data/08_reporting/markov_full_vocab/verdicts.json"
    assert tmp_path / adaptive_seeds.REPORTS["markov_full_vocab"] == report
    report.parent.mkdir(parents=True)
    (tmp_path / "data/08_reporting/markov").mkdir()
    (tmp_path / "data/08_reporting/markov/verdicts.json").write_text(json.dumps(_report([9])))
    commands = []

    def fake_run(command, cwd, check):
        commands.append(command)
        look = {
            "seeds": [0, 1, 2, 3, 4],
            "seed_cells": [{"seeds": [3, 4], "labels": ["LD_zipf.high"]}],
        }
        report.write_text(
            json.dumps({"sequential": {"next_look": look if len(commands) == 1 else None}})
        )

    monkeypatch.setattr(adaptive_seeds.subprocess, "run", fake_run)
    rounds = adaptive_seeds.main(["--pipeline=markov_full_vocab", f"--project={tmp_path}"])
    assert [r["seeds"] for r in rounds] == [None, [0, 1, 2, 3, 4]]
    assert commands[0][-1] == "--pipeline=markov_full_vocab"
    assert commands[1][-2:] == [
        "--pipeline=markov_full_vocab",
        "--params=markov_full_vocab.training.seeds=[0,1,2,3,4],"
        "markov_full_vocab.training.seed_cells=[{seeds: [3, 4], labels: [LD_zipf.high]}]",
    ]
    assert look_command("markov_full_vocab", {"seeds": [0, 1, 2, 3]}) == (
        "kedro run --pipeline=markov_full_vocab "
        "--params='markov_full_vocab.training.seeds=[0,1,2,3]'"
    )


@pytest.mark.slow  # two micro markov runs: about 5 min on 2 shared cores
def test_markov_loop_on_the_micro_project(tmp_path: Path, monkeypatch):
    """Looks at 2 and 3 seeds: round 1 trains the micro grid's two seeds and looks; the open
    claims' cells get seed 2 (``training.seed_cells``) in round 2, which trains only those runs
    (the sweep skips the others) and makes the last look."""
    import pandas as pd
    import yaml

    from tests.micro_project import new_micro_project
    from tests.pipelines.test_markov import _micro_params

    project = new_micro_project(tmp_path)
    _micro_params(project)
    path = project / "conf" / "base" / "parameters_markov.yml"
    params = yaml.safe_load(path.read_text())
    params["markov"]["conditions"]["adaptive_seeds"].update({"planned": 2, "batch": 1, "cap": 3})
    path.write_text(yaml.safe_dump(params))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    rounds = adaptive_seeds.main(["--pipeline=markov", f"--project={project}", "--max-rounds=3"])
    assert [r["seeds"] for r in rounds] == [None, [0, 1, 2]]
    (cells,) = rounds[0]["next_seed_cells"]
    assert cells["seeds"] == [2]
    verdicts = json.loads((project / adaptive_seeds.REPORTS["markov"]).read_text())
    assert verdicts["sequential"]["next_look"] is None  # decided or at the cap
    looks = [v["sequential"]["looks"] for v in verdicts["claims"].values()]
    assert any(len(claim_looks) == 2 and claim_looks[1]["n"] == 3 for claim_looks in looks)
    manifest = pd.read_parquet(project / "data" / "07_model_output" / "markov" /
                               "sweep_manifest.parquet")  # fmt: skip
    trained = manifest.loc[manifest["seed"] == 2, "run_name"]
    assert len(trained) == len(cells["labels"])
    assert all(any(f"_{label}_s2" in name for label in cells["labels"]) for name in trained)
