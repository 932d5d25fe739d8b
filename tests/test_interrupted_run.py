"""A Kedro run stopped by SIGTERM or Ctrl-C ends its MLflow run as KILLED, not FINISHED."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import mlflow
import pytest

# A process that does what `kedro run` does with MLflow: kedro-mlflow opens the run, then the
# hooks run; then the pipeline is interrupted (or finishes, and kedro-mlflow ends the run).
SCRIPT = textwrap.dedent(
    """
    import os, signal, sys, time
    import mlflow
    from ih_kedro.hooks import InterruptedRunHooks
    how = sys.argv[1]
    mlflow.set_tracking_uri(os.environ["STORE"])
    mlflow.start_run(run_name="kedro run")
    print(mlflow.active_run().info.run_id, flush=True)
    hooks = InterruptedRunHooks()
    hooks.before_pipeline_run({}, None, None)
    if how == "fork":  # a forked worker (a multiprocessing pool's) keeps SIGTERM's default
        child = os.fork()
        if child == 0:
            time.sleep(60)
            os._exit(0)
        time.sleep(0.5)
        os.kill(child, signal.SIGTERM)
        _, status = os.waitpid(child, 0)
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGTERM, status
        hooks.after_pipeline_run({}, None, None, None)
        mlflow.end_run()
    elif how == "sigterm":
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(60)
    elif how == "ctrl-c":
        raise KeyboardInterrupt
    else:
        hooks.after_pipeline_run({}, None, None, None)
        mlflow.end_run()
    """
)


@pytest.mark.parametrize(
    ("how", "returncode", "status"),
    [("sigterm", 128 + signal.SIGTERM, "KILLED"), ("ctrl-c", -signal.SIGINT, "KILLED"),
     ("finished", 0, "FINISHED"), ("fork", 0, "FINISHED")],
)  # fmt: skip
def test_interrupted_kedro_run_is_marked_killed(tmp_path, how, returncode, status):
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, how],
        env={**os.environ, "STORE": store},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == returncode, result.stderr[-2000:]
    run_id = result.stdout.strip().splitlines()[-1]
    assert mlflow.MlflowClient(store).get_run(run_id).info.status == status


# A real sweep interrupted by SIGTERM mid-training, then rerun: `kedro run`'s MLflow handling
# (the parent opened as kedro-mlflow does, the hooks) around run_sweep, into a real SQLite store.
SWEEP = textwrap.dedent(
    """
    import os, signal, sys, threading, time
    import mlflow
    from ih_kedro.hooks import InterruptedRunHooks
    from ih_kedro.science.training.checkpoints import CheckpointStore
    from ih_kedro.science.training.sweep import ExecutorConfig, run_sweep
    from ih_kedro.science.training.tasks import TrackingSpec
    from tests.science.training.test_run import make_config, make_packed

    kind, phase, root = sys.argv[1:4]
    uri = os.environ["STORE"]
    mlflow.set_tracking_uri(uri)
    mlflow.start_run(run_name=f"kedro run ({phase})")
    parent = mlflow.active_run().info.run_id
    print(parent, flush=True)
    hooks = InterruptedRunHooks()
    hooks.before_pipeline_run({}, None, None)
    store = CheckpointStore(root)

    def slow_evaluator(packed, context_length):  # the first attempt trains slowly enough
        def evaluate(model):                     # to be interrupted mid-run
            time.sleep(0.1)
            return {"probe": 0.0}
        return evaluate

    def interrupt_once_the_second_run_has_a_checkpoint():
        while store.latest_deepspeed_tag("tiny_1") is None:
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGTERM)

    if phase == "interrupted":
        threading.Thread(target=interrupt_once_the_second_run_has_a_checkpoint, daemon=True).start()
    configs = [make_config(f"tiny_{i}", seed=i, max_steps=40, early_stop=False) for i in (0, 1)]
    run_sweep(configs, make_packed(), store, ExecutorConfig(kind=kind, max_concurrent_runs=1),
              tracking=TrackingSpec(uri, parent),
              evaluator_factory=slow_evaluator if phase == "interrupted" else None)
    hooks.after_pipeline_run({}, None, None, None)
    mlflow.end_run()
    """
)


def _sweep(kind: str, phase: str, tmp_path) -> tuple[subprocess.CompletedProcess, str]:
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    result = subprocess.run(
        [sys.executable, "-c", SWEEP, kind, phase, str(tmp_path / "checkpoints")],
        cwd=Path(__file__).resolve().parents[1],
        env={**os.environ, "STORE": store},
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    return result, result.stdout.strip().splitlines()[0] if result.stdout.strip() else ""


@pytest.mark.ci
@pytest.mark.parametrize("kind", ["ray", "sequential"])
def test_sigterm_mid_sweep_kills_every_run_in_flight_and_a_rerun_has_one_parent(tmp_path, kind):
    """SIGTERM while the second training run trains (the first finished): the Kedro run and the
    run in flight end KILLED, none stays RUNNING (a Ray worker dies without ending its run; the
    exit hook ends it). The rerun resumes the killed run and skips the finished one, and both
    move under the rerun's parent: one sweep, one finished parent."""
    client = mlflow.MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    result, killed_parent = _sweep(kind, "interrupted", tmp_path)
    # Under Ray the process ends in SIGABRT after the exit handlers ran: Ray's driver installs a
    # failure-signal handler for SIGTERM that chains to ours, then aborts at teardown (measured).
    expected = {128 + signal.SIGTERM} | ({-signal.SIGABRT} if kind == "ray" else set())
    assert result.returncode in expected, result.stderr[-3000:]

    def children(parent: str) -> dict[str, str]:
        experiment = client.get_run(parent).info.experiment_id
        runs = client.search_runs([experiment], f"tags.mlflow.parentRunId = '{parent}'")
        return {r.data.tags["run_name"]: r.info.status for r in runs}

    # Under Ray, whichever comes first ends the run in flight: the exit hook (the worker was
    # force-killed and left its run RUNNING), or the worker itself (Ray workers turn SIGTERM into
    # SystemExit, and one from Ray's shutdown can arrive before the force-kill: a loaded CI run
    # once found nothing RUNNING at exit). In-process, the run ends itself.
    assert client.get_run(killed_parent).info.status == "KILLED", result.stderr[-3000:]
    assert children(killed_parent) == {"tiny_0": "FINISHED", "tiny_1": "KILLED"}

    result, parent = _sweep(kind, "rerun", tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert client.get_run(parent).info.status == "FINISHED"
    assert children(parent) == {"tiny_0": "FINISHED", "tiny_1": "FINISHED"}
    assert children(killed_parent) == {}
    assert client.get_run(killed_parent).info.status == "KILLED"


def test_a_failed_pipeline_ends_its_dead_training_runs_failed(tmp_path):
    """A sweep that fails (SweepFailedError) after a worker died: the dead worker's training run
    is ended FAILED, not left RUNNING under the FAILED parent; finished runs are untouched."""
    from ih_kedro.hooks import InterruptedRunHooks

    mlflow.set_tracking_uri(f"sqlite:///{tmp_path / 'mlflow.db'}")  # restored by conftest
    client = mlflow.MlflowClient()
    with mlflow.start_run(run_name="kedro run") as parent:
        hooks = InterruptedRunHooks()
        hooks.before_pipeline_run({}, None, None)
        experiment = parent.info.experiment_id
        tags = {"mlflow.parentRunId": parent.info.run_id}
        dead = client.create_run(experiment, tags=tags, run_name="dead").info.run_id
        done = client.create_run(experiment, tags=tags, run_name="done").info.run_id
        client.set_terminated(done, status="FINISHED")
        hooks.on_pipeline_error(RuntimeError("sweep failed"), {}, None, None)
    assert client.get_run(dead).info.status == "FAILED"
    assert client.get_run(done).info.status == "FINISHED"


def test_a_rerun_after_kill_9_adopts_finished_runs_and_ends_the_dead_ones(tmp_path):
    """``kill -9`` runs no exit handler: the parent and its runs in flight stay RUNNING. The
    rerun's sweep, before training, moves the finished runs under its parent, marks the dead
    parent KILLED and its runs still RUNNING too (a run resumed from a checkpoint moves when it
    resumes: test_sigterm_mid_sweep_kills_every_run_in_flight_and_a_rerun_has_one_parent)."""
    from ih_kedro.science.training.sweep import _adopt_finished_runs
    from ih_kedro.science.training.tasks import TrackingSpec

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = mlflow.MlflowClient(uri)
    experiment = client.create_experiment("kill-9")
    dead = client.create_run(experiment, run_name="killed -9").info.run_id
    tags = {"mlflow.parentRunId": dead}
    finished = client.create_run(experiment, tags=tags, run_name="a").info.run_id
    client.set_terminated(finished, status="FINISHED")
    in_flight = client.create_run(experiment, tags=tags, run_name="b").info.run_id
    rerun = client.create_run(experiment, run_name="rerun").info.run_id
    summaries = {"a": {"mlflow_run_id": finished}, "b": None}  # b had no checkpoint
    store = SimpleNamespace(read_summary=summaries.get)
    configs = [SimpleNamespace(run_name=name) for name in summaries]
    _adopt_finished_runs(configs, store, TrackingSpec(uri, rerun))
    assert client.get_run(finished).data.tags["mlflow.parentRunId"] == rerun
    assert client.get_run(finished).info.status == "FINISHED"
    assert client.get_run(dead).info.status == "KILLED"
    assert client.get_run(in_flight).info.status == "KILLED"
