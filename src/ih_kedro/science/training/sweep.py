"""Run the training runs of a sweep: one Ray task per run (local or a cluster), or in-process.

No Kedro here: a notebook calls :func:`run_sweep` with the ``TrainingRunConfig`` list of any
grid. Every run is independent and deterministic by (config, seed), so where it runs does not
change what it produces:

- ``kind="ray"`` (the default): each run is a Ray task holding ``num_cpus_per_run`` CPUs and
  ``num_gpus_per_run`` GPUs (fractions allowed). The task reopens the packed corpus from its
  memmap path (never ships the array), builds its own model and its own one-rank DeepSpeed
  engine (its own process group on a free port, torch threads = its CPUs) and returns the
  run's manifest row. Without ``address`` the sweep starts a local Ray instance sized to the
  machine (no dashboard, quiet logs) and shuts it down at the end; ``address="auto"`` or
  ``"ray://host:10001"`` uses an existing cluster.
- ``kind="sequential"``: the same runs one after another in this process (for debugging).
- ``ranks_per_run=N > 1``: each run is one DeepSpeed job of N ranks started with the
  ``deepspeed`` launcher (by the Ray task on its node, or by this process), ``hostfile`` for a
  job across nodes (:mod:`ih_kedro.science.training.launcher`). Only rank 0 logs to MLflow and
  writes HF folders and the summary.

Faults: a run that raises, or whose worker dies (``kill -9``, out of memory), is reported with
its name and reason after the other runs have finished (their results stay in the checkpoint
store); the sweep then raises :class:`SweepFailedError`, so it never ends green with a run
missing. Re-running resumes each failed run from its last DeepSpeed checkpoint.

MLflow: each run is a run nested under ``parent_run_id`` (the Kedro run), written through a
client that retries on a locked SQLite store (:mod:`ih_kedro.science.training.tracking`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ih_kedro.science.data.packed import PackedTokens
from ih_kedro.science.training.checkpoints import CheckpointStore
from ih_kedro.science.training.config import TrainingRunConfig
from ih_kedro.science.training.distributed import remove_leaked_allreduce_buffers
from ih_kedro.science.training.launcher import run_rank_job
from ih_kedro.science.training.run import train_run
from ih_kedro.science.training.tasks import (
    RENDEZVOUS_VARIABLES,
    EvaluatorFactory,
    ProgressBoard,
    RunTask,
    TokenSource,
    TrackingSpec,
    manifest_row,
    report_progress,
    step_reporter,
)

logger = logging.getLogger(__name__)

EXECUTOR_KINDS = ("ray", "sequential")


class SweepFailedError(RuntimeError):
    """Some runs of a sweep failed; ``failures`` maps run name to reason."""

    def __init__(self, failures: Mapping[str, str], n_runs: int) -> None:
        self.failures = dict(failures)
        lines = "\n".join(f"  - {name}: {reason}" for name, reason in self.failures.items())
        super().__init__(
            f"{len(self.failures)} of {n_runs} training runs failed (the others finished and are "
            f"kept in the checkpoint store; re-run to resume the failed runs from their last "
            f"checkpoint):\n{lines}"
        )


@dataclass(frozen=True)
class ExecutorConfig:
    """Where and how the runs of a sweep execute (``training.executor`` in the parameters).

    ``num_cpus_per_run`` / ``num_gpus_per_run`` are what one run (all its ranks) holds;
    fractional GPUs let several tiny models share one. Each rank uses
    ``max(1, num_cpus_per_run // ranks_per_run)`` torch threads. ``max_concurrent_runs`` caps
    how many runs of a local Ray instance train at once (``None``: as many as fit).
    """

    kind: str = "ray"
    address: str | None = None
    num_cpus_per_run: float = 1
    num_gpus_per_run: float = 0
    ranks_per_run: int = 1
    hostfile: str | None = None
    max_concurrent_runs: int | None = None
    runtime_env: dict[str, Any] | None = None
    progress_seconds: float = 30.0

    @classmethod
    def from_params(cls, params: Mapping[str, Any] | None) -> ExecutorConfig:
        """Validate ``training.executor`` and build the config (errors name the parameter)."""
        params = dict(params or {})
        known = {f.name for f in fields(cls)}
        for key in params:
            if key not in known:
                raise ValueError(
                    f"training.executor.{key}: unknown option; choose from {sorted(known)}"
                )
        config = cls(**params)
        config.validate()
        return config

    def validate(self) -> None:
        if self.kind not in EXECUTOR_KINDS:
            raise ValueError(
                f"training.executor.kind: {self.kind!r} is not one of {list(EXECUTOR_KINDS)}"
            )
        if not _is_number(self.num_cpus_per_run) or self.num_cpus_per_run <= 0:
            raise ValueError(
                f"training.executor.num_cpus_per_run: must be > 0, got {self.num_cpus_per_run!r}"
            )
        if not _is_number(self.num_gpus_per_run) or self.num_gpus_per_run < 0:
            raise ValueError(
                f"training.executor.num_gpus_per_run: must be >= 0, got {self.num_gpus_per_run!r}"
            )
        if not isinstance(self.ranks_per_run, int) or self.ranks_per_run < 1:
            raise ValueError(
                f"training.executor.ranks_per_run: a positive integer, got {self.ranks_per_run!r}"
            )
        if self.num_gpus_per_run and self.ranks_per_run > 1:
            if self.num_gpus_per_run != self.ranks_per_run and not self.hostfile:
                raise ValueError(
                    "training.executor.num_gpus_per_run: a multi-rank run on GPUs holds one GPU "
                    f"per rank: set it to ranks_per_run={self.ranks_per_run}"
                )
        if self.address is not None and not isinstance(self.address, str):
            raise ValueError(
                "training.executor.address: null (a local Ray instance), 'auto' or "
                f"'ray://host:port', got {self.address!r}"
            )
        if self.address is not None and self.kind != "ray":
            raise ValueError("training.executor.address: only used with kind: ray")
        if self.hostfile is not None and not Path(self.hostfile).is_file():
            raise ValueError(f"training.executor.hostfile: {self.hostfile} is not a file")
        if self.max_concurrent_runs is not None and (
            not isinstance(self.max_concurrent_runs, int) or self.max_concurrent_runs < 1
        ):
            raise ValueError("training.executor.max_concurrent_runs: null or a positive integer")
        if not self.progress_seconds > 0:
            raise ValueError("training.executor.progress_seconds: must be > 0")

    @property
    def threads_per_rank(self) -> int:
        return max(1, int(self.num_cpus_per_run) // self.ranks_per_run)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def execute_run(task: RunTask, board: Any = None) -> dict[str, Any]:
    """Train one run in this process (or as a DeepSpeed job of ``task.ranks`` ranks) and
    return its manifest row."""
    config = task.config
    total = config.total_steps
    report_progress(board, config.run_name, 0, total)
    if task.ranks > 1:
        return run_rank_job(task, board)
    packed = task.tokens.open()
    store = CheckpointStore(task.store_root)
    tracker = None
    if task.tracking is not None:
        from ih_kedro.science.training.tracking import MlflowTracker

        tracker = MlflowTracker(
            task.tracking.tracking_uri, parent_run_id=task.tracking.parent_run_id
        )
    evaluate = None
    if task.evaluator_factory is not None:
        evaluate = task.evaluator_factory(packed, config.context_length)
    threads = torch.get_num_threads()
    torch.set_num_threads(task.threads)
    try:
        summary = train_run(
            config,
            packed,
            store,
            tracker,
            evaluate,
            step_hook=step_reporter(board, config.run_name, total),
        )
    finally:
        torch.set_num_threads(threads)
    return manifest_row(summary)


# ---------------------------------------------------------------------------------------------
# Executors.


def run_sweep(
    configs: Sequence[TrainingRunConfig],
    packed: PackedTokens,
    store: CheckpointStore,
    executor: ExecutorConfig | None = None,
    *,
    tracking: TrackingSpec | None = None,
    evaluator_factory: EvaluatorFactory | None = None,
) -> list[dict[str, Any]]:
    """Train every config (resuming or skipping finished runs); return manifest rows in order.

    Raises :class:`SweepFailedError` after the other runs finished if any run failed.
    """
    executor = executor or ExecutorConfig()
    executor.validate()
    if tracking is not None:
        _prepare_store(tracking)
        if tracking.parent_run_id:
            _adopt_finished_runs(configs, store, tracking)
    # Complete runs are answered here from their summaries: no worker starts (under Ray each
    # would cost a process and a torch import only to find the summary).
    done = {
        config.run_name: manifest_row({**summary, "stop_reason": "already_complete"})
        for config in configs
        if (summary := store.read_summary(config.run_name)) is not None
    }
    if done:
        logger.info("training sweep: %d of %d runs already complete, skipped", len(done),
                    len(configs))  # fmt: skip
    source = TokenSource.of(packed)
    tasks = [
        RunTask(
            config=config,
            tokens=source,
            store_root=str(store.root),
            tracking=tracking,
            evaluator_factory=evaluator_factory,
            threads=executor.threads_per_rank,
            ranks=executor.ranks_per_run,
            hostfile=executor.hostfile,
            workdir=os.getcwd(),
        )
        for config in configs
        if config.run_name not in done
    ]
    logger.info(
        "training sweep: %d runs into %s (executor %s, %s CPU / %s GPU per run, %d rank(s))",
        len(tasks),
        store.root,
        executor.kind,
        executor.num_cpus_per_run,
        executor.num_gpus_per_run,
        executor.ranks_per_run,
    )
    if tasks and not torch.cuda.is_available():
        remove_leaked_allreduce_buffers()  # memory that Ray's monitor would count as used
    if not tasks:
        results, failures = {}, {}
    elif executor.kind == "sequential":
        check_resources(executor, local_resources())
        results, failures = _run_sequential(tasks, executor)
    else:
        results, failures = _run_on_ray(tasks, executor)
    results = {**done, **results}
    if failures:
        raise SweepFailedError(failures, len(tasks))
    missing = [t.config.run_name for t in tasks if t.config.run_name not in results]
    if missing:  # defensive: every task either returned or failed
        raise SweepFailedError(dict.fromkeys(missing, "no result returned"), len(tasks))
    return [results[config.run_name] for config in configs]


def _prepare_store(tracking: TrackingSpec) -> None:
    """Create/upgrade the MLflow store once here, before any worker opens it."""
    import mlflow

    from ih_kedro.science.training.tracking import retry_locked

    client = mlflow.MlflowClient(tracking_uri=tracking.tracking_uri)
    retry_locked(lambda: client.search_experiments(max_results=1))


def _adopt_finished_runs(
    configs: Sequence[TrainingRunConfig], store: CheckpointStore, tracking: TrackingSpec
) -> None:
    """Move the MLflow runs of the already complete runs (the sweep will skip them) under this
    sweep's parent, before any training: a rerun that is itself interrupted, or whose sweep
    fails, still shows the whole sweep under one parent. Runs resumed from a checkpoint move when
    they resume (``MlflowTracker.run``).

    A parent found still ``RUNNING`` is dead (``kill -9``: no exit handler ran): it is marked
    ``KILLED`` (:func:`reparent_runs`), and so are its training runs still ``RUNNING``, which
    died with it (a run killed before its first checkpoint restarts as a new run).
    """
    import mlflow

    from ih_kedro.science.training.tracking import end_running_children, reparent_runs

    summaries = [store.read_summary(config.run_name) for config in configs]
    ids = [s["mlflow_run_id"] for s in summaries if s is not None and s.get("mlflow_run_id")]
    if ids:
        client = mlflow.MlflowClient(tracking_uri=tracking.tracking_uri)
        for dead_parent in reparent_runs(client, ids, str(tracking.parent_run_id)):
            end_running_children(client, dead_parent)


class _ProgressView:
    """Runs done / running / left, with each running run's step (a tqdm bar and log lines)."""

    def __init__(self, names: Sequence[str], every: float) -> None:
        from tqdm.auto import tqdm

        self.names = list(names)
        self.every = every
        self.done: set[str] = set()
        self.bar = tqdm(total=len(names), desc="sweep", unit="run")
        self.last = time.monotonic()
        self.counts: tuple[int, int] | None = None

    def finished(self, name: str) -> None:
        self.done.add(name)
        self.bar.update(1)

    def show(self, steps: Mapping[str, tuple[int, int]], force: bool = False) -> None:
        running = [n for n in self.names if n in steps and n not in self.done]
        left = len(self.names) - len(self.done) - len(running)
        if (len(running), left) != self.counts:  # redraw on change only (log files)
            self.counts = (len(running), left)
            self.bar.set_postfix(running=len(running), left=left)
        now = time.monotonic()
        if force or now - self.last >= self.every:
            self.last = now
            detail = ", ".join(f"{n} {steps[n][0]}/{steps[n][1]}" for n in running)
            logger.info(
                "sweep: %d done, %d running, %d left%s",
                len(self.done),
                len(running),
                left,
                f" | {detail}" if detail else "",
            )

    def close(self) -> None:
        self.bar.close()


def _run_sequential(
    tasks: Sequence[RunTask], executor: ExecutorConfig
) -> tuple[dict[str, dict], dict[str, str]]:
    board = ProgressBoard()
    view = _ProgressView([t.config.run_name for t in tasks], executor.progress_seconds)
    results: dict[str, dict] = {}
    failures: dict[str, str] = {}
    try:
        for task in tasks:
            name = task.config.run_name
            try:
                results[name] = execute_run(task, board)
            except Exception as error:  # reported with the others at the end
                logger.exception("%s failed", name)
                failures[name] = f"{type(error).__name__}: {error}"
            view.finished(name)
            view.show(board.snapshot(), force=True)
    finally:
        view.close()
    return results, failures


def _ray_entry(task: RunTask, board: Any) -> dict[str, Any]:
    """What a Ray task runs: the run, in a worker whose environment is made ours."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        for key in RENDEZVOUS_VARIABLES:  # never join a group named by an inherited env
            os.environ.pop(key, None)
    if task.workdir and Path(task.workdir).is_dir():
        os.chdir(task.workdir)  # relative artifact paths resolve as in the driver
    return execute_run(task, board)


def local_resources() -> dict[str, float]:
    """This machine's CPUs (those this process may use) and CUDA GPUs."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return {"CPU": float(cpus or 1), "GPU": float(gpus)}


def ray_init_kwargs(executor: ExecutorConfig) -> dict[str, Any]:
    """``ray.init`` arguments: a quiet local instance sized to this machine, or a cluster."""
    env_vars = {
        "TOKENIZERS_PARALLELISM": "false",
        "KEDRO_DISABLE_TELEMETRY": "1",
        "HF_HUB_OFFLINE": os.environ.get("HF_HUB_OFFLINE", "0"),
    }
    if os.environ.get("DS_ACCELERATOR"):
        env_vars["DS_ACCELERATOR"] = os.environ["DS_ACCELERATOR"]
    runtime_env = dict(executor.runtime_env or {})
    runtime_env["env_vars"] = {**env_vars, **dict(runtime_env.get("env_vars") or {})}
    kwargs: dict[str, Any] = {
        "include_dashboard": False,
        "logging_level": logging.WARNING,
        "log_to_driver": False,
        "runtime_env": runtime_env,
    }
    if executor.address:
        kwargs["address"] = executor.address
        return kwargs
    kwargs["num_cpus"] = int(local_resources()["CPU"])
    kwargs["num_gpus"] = int(local_resources()["GPU"])
    kwargs["object_store_memory"] = 256 * 1024**2  # only small objects travel through it
    return kwargs


@contextlib.contextmanager
def ray_instance(executor: ExecutorConfig) -> Iterator[bool]:
    """Use the connected Ray, or start (and at the end shut down) one; yields whether we did.

    A local instance's processes inherit this environment, so the rendezvous variables of this
    process's own one-rank group are hidden from it and the package's source folder is put on
    its ``PYTHONPATH`` (the same code runs in the workers).
    """
    import ray

    if ray.is_initialized():
        yield False
        return
    kwargs = ray_init_kwargs(executor)
    saved = {k: os.environ.pop(k) for k in RENDEZVOUS_VARIABLES if k in os.environ}
    old_path = os.environ.get("PYTHONPATH")
    src = str(Path(__file__).resolve().parents[3])
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (src, old_path) if p)
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    try:
        ray.init(**kwargs)
    finally:
        os.environ.update(saved)
        if old_path is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old_path
    try:
        yield True
    finally:
        ray.shutdown()


def check_resources(executor: ExecutorConfig, available: Mapping[str, float]) -> None:
    """Fail before training if no node of the Ray instance can ever hold one run.

    A task asking for more than the cluster has would wait forever (e.g. the paper
    configuration's one GPU per run on a CPU-only machine).
    """
    problems = []
    for key, resource in (("num_gpus_per_run", "GPU"), ("num_cpus_per_run", "CPU")):
        wanted = float(getattr(executor, key))
        have = float(available.get(resource, 0.0))
        if wanted > have:
            problems.append(
                f"training.executor.{key}: a run asks for {wanted:g} {resource}(s) but "
                f"{'the Ray instance' if executor.kind == 'ray' else 'this machine'} has {have:g}"
            )
    if problems:
        raise ValueError(
            "; ".join(problems) + ". Lower them (num_gpus_per_run: 0 trains on CPU) or connect "
            "to a cluster that has them (training.executor.address)"
        )


def _failure_reason(error: BaseException) -> str:
    import ray.exceptions as rex

    if isinstance(error, rex.RayTaskError):
        cause = getattr(error, "cause", None)
        if cause is not None and not isinstance(cause, rex.RayTaskError):
            return f"{type(cause).__name__}: {cause}"
        return str(error).strip().splitlines()[-1]
    if isinstance(error, rex.WorkerCrashedError | rex.NodeDiedError | rex.OutOfMemoryError):
        return f"its worker process died ({type(error).__name__}): {str(error).strip()[:300]}"
    return f"{type(error).__name__}: {str(error).strip()[:300]}"


def _run_on_ray(
    tasks: Sequence[RunTask], executor: ExecutorConfig
) -> tuple[dict[str, dict], dict[str, str]]:
    import ray

    results: dict[str, dict] = {}
    failures: dict[str, str] = {}
    if not ray.is_initialized() and not executor.address:  # before starting an instance
        check_resources(executor, local_resources())
    with ray_instance(executor):
        check_resources(executor, ray.cluster_resources())
        board = ray.remote(num_cpus=0)(ProgressBoard).remote()
        remote = ray.remote(_ray_entry)
        tokens_ref = None
        pending: dict[Any, RunTask] = {}
        queue = list(tasks)
        limit = executor.max_concurrent_runs or len(tasks)
        view = _ProgressView([t.config.run_name for t in tasks], executor.progress_seconds)

        def submit(task: RunTask) -> None:
            nonlocal tokens_ref
            if task.tokens.array is not None and task.tokens.path is None:
                if tokens_ref is None:  # in-memory tokens travel once, by reference
                    tokens_ref = ray.put(np.asarray(task.tokens.array))
                source = TokenSource(**{**task.tokens.__dict__, "array": tokens_ref})
                task = RunTask(**{**task.__dict__, "tokens": source})
            ref = remote.options(
                num_cpus=executor.num_cpus_per_run,
                num_gpus=executor.num_gpus_per_run,
                max_retries=0,
                retry_exceptions=False,
                name=task.config.run_name,
            ).remote(task, board)
            pending[ref] = task

        try:
            while queue and len(pending) < limit:
                submit(queue.pop(0))
            while pending:
                done, _ = ray.wait(list(pending), num_returns=1, timeout=1.0)
                for ref in done:
                    task = pending.pop(ref)
                    name = task.config.run_name
                    try:
                        results[name] = ray.get(ref)
                    except Exception as error:  # reported with the others at the end
                        failures[name] = _failure_reason(error)
                        logger.error("%s failed: %s", name, failures[name])
                    view.finished(name)
                    if queue:
                        submit(queue.pop(0))
                view.show(ray.get(board.snapshot.remote()), force=bool(done))
        finally:
            view.close()
            for ref in pending:
                ray.cancel(ref, force=True)
    return results, failures
