"""The adaptive-seeds loop: each round's seeds come from the last report's next look."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ih_kedro import adaptive_seeds
from ih_kedro.adaptive_seeds import next_seeds, run_until_settled, seeds_override


def _report(seeds):
    return {"sequential": {"next_look": {"seeds": seeds} if seeds else None}}


def test_rounds_follow_the_next_look_until_settled():
    reports = iter([_report([0, 1, 2, 3, 4, 5, 6]), _report([0, 1, 2, 3, 4, 5, 6, 7, 8]),
                    _report(None)])  # fmt: skip
    ran = []
    rounds = run_until_settled("bi_induct", ran.append, lambda: next(reports))
    assert ran == [None, [0, 1, 2, 3, 4, 5, 6], [0, 1, 2, 3, 4, 5, 6, 7, 8]]
    assert [r["next_seeds"] for r in rounds][-1] is None


def test_stops_at_max_rounds_and_when_nothing_is_added():
    ran = []
    run_until_settled("markov", ran.append, lambda: _report([0, 1, 2, 3, 4]), max_rounds=5)
    assert ran == [None, [0, 1, 2, 3, 4]]  # the second report asks for what it had
    ran.clear()
    grow = iter(_report(list(range(n))) for n in range(4, 20))
    run_until_settled("markov", ran.append, lambda: next(grow), seeds=[0, 1, 2], max_rounds=2)
    assert ran == [[0, 1, 2], [0, 1, 2, 3]]
    with pytest.raises(ValueError, match="law_fit"):
        run_until_settled("law_fit", ran.append, dict)


def test_override_and_report_reading():
    assert seeds_override("bi_induct", [0, 1, 5]) == "bi_induct.training.seeds=[0,1,5]"
    assert next_seeds({}) is None and next_seeds(_report([3, 4])) == [3, 4]


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


@pytest.mark.slow  # two micro markov runs: 275 s on 2 shared cores
def test_markov_loop_on_the_micro_project(tmp_path: Path, monkeypatch):
    """Round 1 trains the micro grid's two seeds, whose verdicts ask for the planned third;
    round 2 trains only that seed (the sweep skips the others) and makes the first look."""
    import pandas as pd

    from tests.micro_project import new_micro_project
    from tests.pipelines.test_markov import _micro_params

    project = new_micro_project(tmp_path)
    _micro_params(project)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    rounds = adaptive_seeds.main(["--pipeline=markov", f"--project={project}", "--max-rounds=2"])
    assert [r["seeds"] for r in rounds] == [None, [0, 1, 2]]
    verdicts = json.loads((project / adaptive_seeds.REPORTS["markov"]).read_text())
    looks = [v["sequential"]["looks"] for v in verdicts["claims"].values()]
    assert any(claim_looks and claim_looks[0]["n"] == 3 for claim_looks in looks)
    manifest = pd.read_parquet(project / "data" / "07_model_output" / "markov" /
                               "sweep_manifest.parquet")  # fmt: skip
    assert sorted(manifest["seed"].unique()) == [0, 1, 2]
