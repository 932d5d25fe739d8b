"""Where the sharded data stages run: datatrove executors and the task plan over shard files.

:class:`ExecutorSettings` (``data_engineering.executor``) chooses a ``LocalPipelineExecutor``
(default), a ``RayPipelineExecutor`` or a ``SlurmPipelineExecutor``; :func:`stage_executor`
builds one for a stage and :func:`run_stage` runs it to completion. :func:`plan_blocks` gives
each task a contiguous block of shard files balanced by bytes, so task order is file order.
Used by deduplication (:mod:`ih_kedro.science.data.sharded.dedup`) and packing
(:mod:`ih_kedro.science.data.sharded.packing`). No Kedro imports here.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)

EXECUTORS = ("local", "ray", "slurm")
_MAX_TASKS = 65_534  # exact dedup orders duplicates by priority = 65535 - rank (uint16)


def default_tasks() -> int:
    """The CPU cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


@dataclass
class ExecutorSettings:
    """Where the datatrove stages run.

    Attributes:
        kind: ``"local"`` (a process pool on this machine), ``"ray"`` (a running Ray cluster,
            ``ray.init`` address from ``RAY_ADDRESS``) or ``"slurm"`` (``sbatch`` job arrays;
            ``work_dir`` must be on a shared file system).
        tasks: Tasks of the per-shard stages (reading, signatures, filtering); ``None``: the
            CPU cores here (local) — set it for a cluster.
        workers: Tasks running at once; ``None``: ``tasks`` (local: at most the cores).
        options: Extra keyword arguments of the executor (Slurm: ``partition``, ``time``,
            ``cpus_per_task``, ``mem_per_cpu_gb``, ``venv_path``, ``sbatch_args``...;
            Ray: ``cpus_per_task``, ``mem_per_cpu_gb``...).
    """

    kind: str = "local"
    tasks: int | None = None
    workers: int | None = None
    options: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_params(cls, params: dict[str, Any] | None) -> ExecutorSettings:
        """From ``data_engineering.executor``: ``kind``, ``tasks``, ``workers``, ``options``,
        and optional per-kind sections (``local:``, ``ray:``, ``slurm:``, each with ``tasks``,
        ``workers``, ``options``) whose values override the top-level ones for that kind, so
        one file names the cluster settings and ``--params data_engineering.executor.kind=slurm``
        switches to them."""
        p = dict(params or {})
        top = {"kind", "tasks", "workers", "options"}
        unknown = sorted(set(p) - top - set(EXECUTORS))
        if unknown:
            raise ValueError(
                f"data_engineering.executor: unknown keys {unknown}; expected some of "
                f"{sorted(top | set(EXECUTORS))}"
            )
        kind = str(p.get("kind", "local"))
        section = dict(p.get(kind) or {}) if kind in EXECUTORS else {}
        wrong = sorted(set(section) - {"tasks", "workers", "options"})
        if wrong:
            raise ValueError(
                f"data_engineering.executor.{kind}: unknown keys {wrong}; expected some of "
                "['options', 'tasks', 'workers']"
            )
        merged = {**{k: p.get(k) for k in ("tasks", "workers", "options")}, **section}
        settings = cls(
            kind=kind,
            tasks=None if merged.get("tasks") is None else int(merged["tasks"]),
            workers=None if merged.get("workers") is None else int(merged["workers"]),
            options=dict(merged.get("options") or {}),
        )
        settings.validate()
        return settings

    def validate(self) -> None:
        if self.kind not in EXECUTORS:
            raise ValueError(
                f"data_engineering.executor.kind: must be one of {EXECUTORS}, got {self.kind!r}"
            )
        for name in ("tasks", "workers"):
            value = getattr(self, name)
            if value is not None and not 1 <= value <= _MAX_TASKS:
                raise ValueError(
                    f"data_engineering.executor.{name}: must be in [1, {_MAX_TASKS}], got {value}"
                )
        if self.kind == "slurm":
            missing = [k for k in ("partition", "time") if k not in self.options]
            if missing:
                raise ValueError(
                    f"data_engineering.executor.options: the slurm executor needs {missing}"
                )

    @property
    def n_tasks(self) -> int:
        return self.tasks if self.tasks is not None else default_tasks()

    def n_workers(self, tasks: int) -> int:
        workers = self.workers if self.workers is not None else tasks
        if self.kind == "local":
            workers = min(workers, default_tasks())
        return max(1, min(workers, tasks))


def stage_executor(
    settings: ExecutorSettings, pipeline: list, tasks: int, logging_dir: Path, name: str
):
    """A datatrove executor for one stage (never skips tasks: every run starts clean)."""
    common = {"tasks": tasks, "logging_dir": str(logging_dir), "skip_completed": False}
    workers = settings.n_workers(tasks)
    if settings.kind == "local":
        from datatrove.executor import LocalPipelineExecutor

        # fork: the workers inherit the imported modules (forkserver re-imports them, ~1.5 CPU s).
        options = {"start_method": "fork", **settings.options}
        return LocalPipelineExecutor(pipeline, workers=workers, **common, **options)
    if settings.kind == "ray":
        try:
            import ray  # noqa: F401
        except ImportError as exc:
            raise ImportError(
                "data_engineering.executor.kind=ray needs the 'ray' package installed"
            ) from exc
        from datatrove.executor import RayPipelineExecutor

        return RayPipelineExecutor(pipeline, workers=workers, **common, **settings.options)
    from datatrove.executor import SlurmPipelineExecutor

    options = {"job_name": f"ih_dedup_{name}", **settings.options}
    return SlurmPipelineExecutor(pipeline, workers=workers, **common, **options)


def run_stage(executor, settings: ExecutorSettings) -> None:
    """Run a stage's executor; on Slurm, wait until every task has completed."""
    executor.run()
    if settings.kind == "slurm":  # sbatch returns at once: wait for every task to complete
        while incomplete := executor.get_incomplete_ranks(skip_completed=True):
            logger.info("waiting for %d slurm tasks of %s", len(incomplete), executor)
            time.sleep(30)


def plan_blocks(paths: Sequence[Path], tasks: int) -> list[tuple[int, int]]:
    """``tasks`` contiguous ``[start, end)`` ranges of ``paths`` with balanced total bytes.

    Contiguous (not round-robin), so task order is file order; a task may get no file.
    """
    sizes = np.array([max(1, Path(p).stat().st_size) for p in paths], dtype=np.float64)
    cum = np.concatenate([[0.0], np.cumsum(sizes)])
    total = cum[-1]
    bounds = [0]
    for t in range(1, tasks):
        bounds.append(max(bounds[-1], int(np.searchsorted(cum, total * t / tasks, "left"))))
    bounds.append(len(paths))
    return [(bounds[t], bounds[t + 1]) for t in range(tasks)]
