"""A multi-rank training run: one job of the ``deepspeed`` launcher, one process per rank.

:func:`run_rank_job` pickles the run's :class:`~ih_kedro.science.training.tasks.RunTask` into
the run's folder, starts ``deepspeed … --module ih_kedro.science.training.launcher <spec>``
and relays rank 0's progress (a small JSON file) until the job exits. Each rank runs
:func:`rank_main`; only rank 0 logs to MLflow and writes HF folders and the summary.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import pickle
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from ih_kedro.science.training.checkpoints import CheckpointStore
from ih_kedro.science.training.distributed import _free_port, init_distributed
from ih_kedro.science.training.run import train_run
from ih_kedro.science.training.tasks import (
    RENDEZVOUS_VARIABLES,
    RunTask,
    manifest_row,
    report_progress,
)

logger = logging.getLogger(__name__)

PROGRESS_FILE = "progress.json"
JOB_LOG = "deepspeed_job.log"
# ``[rank1]: FileNotFoundError: [Errno 2] …``: the line a rank's uncaught exception ends with.
_RANK_ERROR = re.compile(r"^\[rank(\d+)\]: ((?:\w+\.)*\w*(?:Error|Exception|Interrupt)\b.*)$", re.M)


def launcher_command(
    spec_path: Path, ranks: int, port: int, hostfile: str | None, gpu_ids: Sequence[int] = ()
) -> list[str]:
    """The ``deepspeed`` command that runs one training run as a job of ``ranks`` ranks.

    One machine: ``--num_gpus N`` (CPU ranks on a machine without GPUs, DS_ACCELERATOR=cpu),
    or ``--include localhost:<ids>`` for the GPUs a Ray task holds. Several machines: the
    ``hostfile`` names them and their slots (passwordless ssh, as DeepSpeed's launcher needs).
    """
    launcher = shutil.which("deepspeed", path=str(Path(sys.executable).parent)) or "deepspeed"
    command = [launcher, "--master_port", str(port)]
    if hostfile:
        command += ["--hostfile", hostfile]
    elif gpu_ids:
        command += ["--include", "localhost:" + ",".join(str(i) for i in gpu_ids)]
    else:
        command += ["--num_gpus", str(ranks)]
    return [
        *command,
        "--no_local_rank",
        "--module",
        "ih_kedro.science.training.launcher",
        str(spec_path),
    ]


def run_rank_job(task: RunTask, board: Any = None, poll_seconds: float = 1.0) -> dict[str, Any]:
    """Start the run's DeepSpeed job, relay rank 0's progress, return its manifest row."""
    config = task.config
    store = CheckpointStore(task.store_root)
    finished = store.read_summary(config.run_name)
    if finished is not None:
        return manifest_row({**finished, "stop_reason": "already_complete"})
    run_dir = store.run_dir(config.run_name)
    run_dir.mkdir(parents=True, exist_ok=True)
    job_task = RunTask(**{**task.__dict__, "tokens": task.tokens.to_file(run_dir)})
    spec_path = run_dir / "rank_job.pkl"
    spec_path.write_bytes(pickle.dumps(job_task))
    (run_dir / PROGRESS_FILE).unlink(missing_ok=True)
    gpu_ids: list[int] = []
    if torch.cuda.is_available() and not task.hostfile:
        with contextlib.suppress(Exception):
            import ray

            if ray.is_initialized():
                gpu_ids = [int(i) for i in ray.get_gpu_ids()]
    command = launcher_command(spec_path, task.ranks, _free_port(), task.hostfile, gpu_ids)
    env = {k: v for k, v in os.environ.items() if k not in RENDEZVOUS_VARIABLES}
    if gpu_ids:
        env.pop("CUDA_VISIBLE_DEVICES", None)  # the launcher sets it from --include
    if not torch.cuda.is_available():
        env.setdefault("DS_ACCELERATOR", "cpu")
    src = str(Path(__file__).resolve().parents[3])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
    env["OMP_NUM_THREADS"] = str(task.threads)
    log_path = run_dir / JOB_LOG
    logger.info("%s: deepspeed job of %d ranks: %s", config.run_name, task.ranks, command)
    log_start = log_path.stat().st_size if log_path.is_file() else 0  # earlier jobs' output
    with log_path.open("ab") as log:
        process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            while process.poll() is None:
                time.sleep(poll_seconds)
                progress = _read_progress(run_dir)
                if progress is not None:
                    report_progress(board, config.run_name, *progress)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    summary = store.read_summary(config.run_name)
    if process.returncode != 0 or summary is None:
        with log_path.open("rb") as log:
            log.seek(log_start)
            output = log.read().decode(errors="replace")
        errors = "".join(f"\n  {line}" for line in rank_errors(output))
        raise RuntimeError(
            f"the deepspeed job of {task.ranks} ranks exited with code {process.returncode} "
            f"(log: {log_path}); each rank's error:{errors or ' none found'}\n"
            f"last output:\n{output[-2000:]}"
        )
    return manifest_row(summary)


def rank_errors(output: str) -> list[str]:
    """The last exception line of each rank in a DeepSpeed job's output, by rank.

    When one rank crashes, the others fail in their next collective with a gloo or NCCL error
    ("Connection closed by peer"), and that is what the output's tail shows; the crashed rank's
    own error (the cause) is earlier. Lines look like ``[rank1]: FileNotFoundError: …``.
    """
    last: dict[int, str] = {}
    for match in _RANK_ERROR.finditer(output):
        last[int(match.group(1))] = f"rank {match.group(1)}: {match.group(2).strip()}"
    return [last[rank] for rank in sorted(last)]


def _read_progress(run_dir: Path) -> tuple[int, int] | None:
    """Rank 0's ``(step, total)`` from the run's progress file, or ``None`` if unreadable."""
    with contextlib.suppress(OSError, ValueError, KeyError):
        data = json.loads((run_dir / PROGRESS_FILE).read_text())
        return int(data["step"]), int(data["total"])
    return None


def rank_main(spec_path: str) -> None:
    """Entry point of one rank of a run's DeepSpeed job.

    Started as ``python -m ih_kedro.science.training.launcher <rank_job.pkl>``; trains the run.
    """
    task: RunTask = pickle.loads(Path(spec_path).read_bytes())
    torch.set_num_threads(task.threads)
    rank, _ = init_distributed()
    config = task.config
    store = CheckpointStore(task.store_root)
    run_dir = store.run_dir(config.run_name)
    total = config.total_steps

    def hook(step: int) -> None:
        if rank == 0 and (step % max(1, config.log_every) == 0 or step >= total):
            tmp = run_dir / (PROGRESS_FILE + ".tmp")
            tmp.write_text(json.dumps({"step": step, "total": total}))
            os.replace(tmp, run_dir / PROGRESS_FILE)

    packed = task.tokens.open()
    tracker = None
    if task.tracking is not None and rank == 0:
        from ih_kedro.science.training.tracking import MlflowTracker

        tracker = MlflowTracker(
            task.tracking.tracking_uri, parent_run_id=task.tracking.parent_run_id
        )
    evaluate = None
    if task.evaluator_factory is not None:
        evaluate = task.evaluator_factory(packed, config.context_length)
    train_run(config, packed, store, tracker, evaluate, step_hook=hook)


if __name__ == "__main__":  # one rank of a multi-rank run (see run_rank_job)
    if len(sys.argv) != 2:
        raise SystemExit("usage: python -m ih_kedro.science.training.launcher <rank_job.pkl>")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    rank_main(sys.argv[1])
