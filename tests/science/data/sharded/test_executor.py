"""Tests of ih_kedro.science.data.sharded.executor: executor settings and the task plan."""

from __future__ import annotations

from pathlib import Path

import pytest

from ih_kedro.science.data.sharded.executor import ExecutorSettings, plan_blocks, stage_executor


def test_plan_blocks_are_contiguous_and_balanced(tmp_path: Path) -> None:
    paths = []
    for i, size in enumerate([100, 100, 100, 100, 400]):
        p = tmp_path / f"s{i}.jsonl"
        p.write_bytes(b"x" * size)
        paths.append(p)
    assert plan_blocks(paths, 2) == [(0, 4), (4, 5)]
    assert plan_blocks(paths, 1) == [(0, 5)]
    blocks = plan_blocks(paths, 8)
    assert blocks[0][0] == 0 and blocks[-1][1] == 5
    assert all(a[1] == b[0] for a, b in zip(blocks, blocks[1:], strict=False))


def test_executor_settings(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="executor.kind"):
        ExecutorSettings.from_params({"kind": "spark"})
    with pytest.raises(ValueError, match="executor: unknown keys"):
        ExecutorSettings.from_params({"kind": "local", "task": 3})
    with pytest.raises(ValueError, match=r"slurm executor needs \['partition', 'time'\]"):
        ExecutorSettings.from_params({"kind": "slurm"})
    with pytest.raises(ValueError, match="executor.tasks"):
        ExecutorSettings.from_params({"tasks": 0})
    slurm = ExecutorSettings.from_params(
        {"kind": "slurm", "tasks": 512, "options": {"partition": "cpu", "time": "04:00:00"}}
    )
    executor = stage_executor(slurm, [], 512, tmp_path / "logs", "signatures")
    assert type(executor).__name__ == "SlurmPipelineExecutor"
    assert executor.tasks == 512 and executor.partition == "cpu" and executor.time == "04:00:00"
    # A per-kind section overrides the top level for that kind (conf/paper's layout).
    params = {
        "kind": "slurm",
        "tasks": None,
        "options": {},
        "slurm": {"tasks": 2048, "workers": 512, "options": {"partition": "p", "time": "1:00"}},
        "ray": {"tasks": 64},
    }
    chosen = ExecutorSettings.from_params(params)
    assert (chosen.kind, chosen.tasks, chosen.workers) == ("slurm", 2048, 512)
    assert chosen.options == {"partition": "p", "time": "1:00"}
    local_params = ExecutorSettings.from_params({**params, "kind": "local"})
    assert (local_params.tasks, local_params.workers, local_params.options) == (None, None, {})
    with pytest.raises(ValueError, match=r"executor.slurm: unknown keys \['partition'\]"):
        ExecutorSettings.from_params({"kind": "slurm", "slurm": {"partition": "p"}})
    local = stage_executor(ExecutorSettings(tasks=4, workers=1), [], 4, tmp_path / "l", "x")
    assert type(local).__name__ == "LocalPipelineExecutor" and local.workers == 1
