"""Sweep executors: Ray vs sequential equality, faults and resume, concurrent MLflow writers."""

from __future__ import annotations

import functools
import json
import math
import os
import signal
import sys
from pathlib import Path

import mlflow
import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from ih_kedro.science.telemetry.online import make_online_evaluator
from ih_kedro.science.training import sweep
from ih_kedro.science.training.checkpoints import CheckpointStore
from ih_kedro.science.training.sweep import (
    ExecutorConfig,
    SweepFailedError,
    ray_instance,
    run_sweep,
)
from ih_kedro.science.training.tasks import TrackingSpec
from ih_kedro.science.training.tracking import MlflowTracker

from .test_run import make_config, make_packed

ray = pytest.importorskip("ray")

COMPARED = [
    "run_name",
    "batch_size",
    "steps_trained",
    "tokens_seen",
    "stop_reason",
    "online_emergence_step",
    "n_parameters",
]
ONLINE = {"n_probes": 8, "token_pool_size": 40, "probe_seed": 0}


@pytest.fixture(scope="module")
def local_ray():
    """One local Ray instance (2 CPUs) for the module; the executor reuses a connected Ray."""
    # Functions of this test module reach the workers by value (tests/ is not on their path).
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    with ray_instance(ExecutorConfig()) as started:
        assert started
        yield
    assert not ray.is_initialized()


def grid(**overrides) -> list:
    # threshold 0.05: the tiny model's layer-1 prefix matching crosses it within the budget, so
    # online emergence and the early stop are exercised (min_extra_steps 4 past the crossing).
    options = {
        "max_steps": 24,
        "eval_every": 4,
        "checkpoint_every": 6,
        "early_stop_threshold": 0.05,
        "early_stop_min_extra_steps": 4,
        **overrides,
    }
    return [make_config(f"tiny_B{b}", batch_size=b, **options) for b in (4, 8)]


def final_weights(store: CheckpointStore, name: str) -> dict:
    step = store.checkpoint_steps(name)[-1]
    return load_file(store.checkpoint_dir(name, step) / "model.safetensors")


def test_executor_config_names_bad_parameters():
    assert ExecutorConfig.from_params(None) == ExecutorConfig()
    with pytest.raises(ValueError, match=r"training\.executor\.kind"):
        ExecutorConfig.from_params({"kind": "dask"})
    with pytest.raises(ValueError, match=r"training\.executor\.num_cpus_per_run"):
        ExecutorConfig.from_params({"num_cpus_per_run": 0})
    with pytest.raises(ValueError, match=r"training\.executor\.ranks_per_run"):
        ExecutorConfig.from_params({"ranks_per_run": 0})
    with pytest.raises(ValueError, match=r"training\.executor\.num_gpu_per_run: unknown"):
        ExecutorConfig.from_params({"num_gpu_per_run": 1})
    assert ExecutorConfig(num_cpus_per_run=4, ranks_per_run=2).threads_per_rank == 2


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks a machine without GPUs")
@pytest.mark.parametrize("kind", ["sequential", "ray"])
def test_a_run_that_cannot_fit_fails_before_training(tmp_path, kind):
    store = CheckpointStore(tmp_path)
    executor = ExecutorConfig(kind=kind, num_gpus_per_run=1)
    connected = ray.is_initialized()
    with pytest.raises(ValueError, match=r"training\.executor\.num_gpus_per_run: .* 1 GPU"):
        run_sweep(grid(), make_packed(), store, executor)
    assert store.runs() == [] and ray.is_initialized() == connected  # no instance started


def test_ray_and_sequential_sweeps_are_identical(tmp_path, local_ray):
    packed = make_packed()
    factory = functools.partial(make_online_evaluator, options=ONLINE)
    sequential = CheckpointStore(tmp_path / "sequential")
    on_ray = CheckpointStore(tmp_path / "ray")
    rows_seq = run_sweep(
        grid(), packed, sequential, ExecutorConfig(kind="sequential"), evaluator_factory=factory
    )
    rows_ray = run_sweep(grid(), packed, on_ray, ExecutorConfig(), evaluator_factory=factory)
    seq = [{k: r[k] for k in COMPARED} for r in rows_seq]
    par = [{k: r[k] for k in COMPARED} for r in rows_ray]
    assert [r["run_name"] for r in par] == ["tiny_B4", "tiny_B8"]  # the grid's order
    emerged = [r["online_emergence_step"] for r in seq]
    assert all(not math.isnan(step) for step in emerged), seq  # the policy fired
    assert [r["stop_reason"] for r in seq] == ["emerged", "emerged"]
    assert str(seq) == str(par)  # str: NaN != NaN in a dict comparison
    for name in ("tiny_B4", "tiny_B8"):
        assert sequential.checkpoint_steps(name) == on_ray.checkpoint_steps(name)
        a, b = final_weights(sequential, name), final_weights(on_ray, name)
        assert a.keys() == b.keys()
        assert all(np.array_equal(a[k].numpy(), b[k].numpy()) for k in a)  # bitwise


def _failing_factory(fail: dict, packed, context_length):  # noqa: ANN001
    """The online evaluator, except that on its 3rd call (step 12) a chosen run's task raises
    or its worker process is killed with SIGKILL, after the step-6 checkpoint was saved."""
    evaluate = make_online_evaluator(packed, context_length, ONLINE)
    calls = [0]

    def wrapped(model):  # noqa: ANN001, ANN202
        calls[0] += 1
        if calls[0] == 3 and context_length in fail:
            if fail[context_length] == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            raise FloatingPointError("evaluation diverged")
        return evaluate(model)

    return wrapped


def test_failed_runs_are_reported_kept_and_resumed_under_one_parent(tmp_path, local_ray):
    packed = make_packed()
    # Three runs told apart by context length: C=16 trains normally, C=12 raises, C=8's worker
    # is killed. No early stop, so every run trains its whole budget of 18 steps.
    configs = [
        make_config(
            f"tiny_C{c}",
            context_length=c,
            max_steps=18,
            checkpoint_every=6,
            eval_every=4,
            early_stop=False,
        )
        for c in (16, 12, 8)
    ]
    client = mlflow.MlflowClient()
    experiment = client.create_experiment(f"sweep-faults-{os.getpid()}-{tmp_path.name}")
    uri = mlflow.get_tracking_uri()
    dead_parent = client.create_run(experiment, run_name="killed kedro run").info.run_id
    store = CheckpointStore(tmp_path / "store")
    failing = functools.partial(_failing_factory, {12: "raise", 8: "kill"})
    with pytest.raises(SweepFailedError) as caught:
        run_sweep(
            configs,
            packed,
            store,
            ExecutorConfig(),
            tracking=TrackingSpec(uri, dead_parent),
            evaluator_factory=failing,
        )
    failures = caught.value.failures
    assert set(failures) == {"tiny_C12", "tiny_C8"}
    assert failures["tiny_C12"] == "FloatingPointError: evaluation diverged"
    assert "worker process died" in failures["tiny_C8"]
    assert "tiny_C12" in str(caught.value) and "tiny_C8" in str(caught.value)
    assert store.read_summary("tiny_C16")["steps_trained"] == 18  # the good run is kept
    for name in ("tiny_C12", "tiny_C8"):
        assert store.read_summary(name) is None
        assert store.latest_deepspeed_tag(name) == "step_0000006"  # last checkpoint
    before = {
        r.data.tags["run_name"]: r.info.run_id
        for r in client.search_runs([experiment], f"tags.mlflow.parentRunId = '{dead_parent}'")
    }
    assert set(before) == {"tiny_C16", "tiny_C12", "tiny_C8"}

    # The rerun (a new Kedro run) resumes the two failed runs and skips the finished one.
    new_parent = client.create_run(experiment, run_name="rerun").info.run_id
    factory = functools.partial(make_online_evaluator, options=ONLINE)
    rows = run_sweep(
        configs,
        packed,
        store,
        ExecutorConfig(),
        tracking=TrackingSpec(uri, new_parent),
        evaluator_factory=factory,
    )
    assert [r["stop_reason"] for r in rows] == ["already_complete", "budget", "budget"]
    assert [r["steps_trained"] for r in rows] == [18, 18, 18]
    # Resumed, not restarted: the same MLflow runs, now all under the new parent.
    assert {r["run_name"]: r["mlflow_run_id"] for r in rows} == before
    children = client.search_runs([experiment], f"tags.mlflow.parentRunId = '{new_parent}'")
    assert sorted(r.data.tags["run_name"] for r in children) == sorted(before)
    assert {r.info.status for r in children} == {"FINISHED"}
    assert client.get_run(dead_parent).info.status == "KILLED"
    # Loss every 2 steps; steps 8-12 were trained twice (before the kill and after the resume
    # from step 6) and logged the same values both times.
    history = client.get_metric_history(before["tiny_C8"], "loss")
    assert sorted({m.step for m in history}) == list(range(2, 19, 2))
    by_step: dict[int, set] = {}
    for m in history:
        by_step.setdefault(m.step, set()).add(m.value)
    assert all(len(values) == 1 for values in by_step.values())

    # The resumed run ends bitwise-equal to an uninterrupted one.
    straight = CheckpointStore(tmp_path / "straight")
    run_sweep(
        configs[2:], packed, straight, ExecutorConfig(kind="sequential"), evaluator_factory=factory
    )
    a, b = final_weights(straight, "tiny_C8"), final_weights(store, "tiny_C8")
    assert all(np.array_equal(a[k].numpy(), b[k].numpy()) for k in a)


def _log_many(uri: str, parent: str, name: str, n: int) -> str:
    tracker = MlflowTracker(uri, parent_run_id=parent)
    with tracker.run(name, {"preset": "none"}) as run_id:
        for step in range(n):
            tracker.log_metrics({"a": step, "b": 2 * step, "c": 3 * step}, step)
    return run_id


def test_two_workers_log_into_one_sqlite_store_without_losing_rows(tmp_path, local_ray):
    uri = f"sqlite:///{tmp_path / 'concurrent.db'}"
    client = mlflow.MlflowClient(tracking_uri=uri)
    experiment = client.create_experiment("concurrent")
    parent = client.create_run(experiment, run_name="parent").info.run_id
    n = 150
    task = ray.remote(num_cpus=1)(_log_many)
    run_ids = ray.get([task.remote(uri, parent, f"w{i}", n) for i in range(2)])
    assert len(set(run_ids)) == 2
    for run_id in run_ids:
        run = client.get_run(run_id)
        assert run.data.tags["mlflow.parentRunId"] == parent
        assert run.info.status == "FINISHED"
        for key, factor in (("a", 1), ("b", 2), ("c", 3)):
            history = client.get_metric_history(run_id, key)
            assert sorted((m.step, m.value) for m in history) == [
                (s, float(factor * s)) for s in range(n)
            ]


def test_sweep_runs_under_a_kedro_style_active_parent(tmp_path):
    """In-process (sequential), the parent defaults to the active MLflow run."""
    packed = make_packed()
    store = CheckpointStore(tmp_path / "store")
    experiment = mlflow.MlflowClient().create_experiment(f"active-parent-{tmp_path.name}")
    with mlflow.start_run(run_name="parent", experiment_id=experiment) as parent:
        rows = run_sweep(
            [make_config("solo", max_steps=4)],
            packed,
            store,
            ExecutorConfig(kind="sequential"),
            tracking=TrackingSpec(mlflow.get_tracking_uri(), None),
        )
    run = mlflow.MlflowClient().get_run(rows[0]["mlflow_run_id"])
    assert run.data.tags["mlflow.parentRunId"] == parent.info.run_id
    assert run.info.experiment_id == parent.info.experiment_id
    assert Path(rows[0]["run_dir"]) == store.run_dir("solo")


def test_complete_runs_are_answered_from_their_summaries_without_a_worker(tmp_path, monkeypatch):
    """A rerun (an adaptive look) trains only the runs without a summary; the complete ones
    come back from their summaries, in config order, and no executor starts when all are."""
    packed = make_packed()
    configs = [make_config(f"tiny_{i}", seed=i, max_steps=4, checkpoint_every=4,
                           early_stop=False) for i in (0, 1)]  # fmt: skip
    store = CheckpointStore(tmp_path / "store")
    (first,) = run_sweep(configs[:1], packed, store, ExecutorConfig(kind="sequential"))
    trained = []
    execute = sweep.execute_run

    def counting(task, board=None):
        trained.append(task.config.run_name)
        return execute(task, board)

    monkeypatch.setattr(sweep, "execute_run", counting)
    rows = run_sweep(configs, packed, store, ExecutorConfig(kind="sequential"))
    assert trained == ["tiny_1"]
    assert [r["run_name"] for r in rows] == ["tiny_0", "tiny_1"]
    expected = {**first, "stop_reason": "already_complete"}  # NaN where the run never crossed
    assert json.dumps(rows[0], sort_keys=True, default=str) == json.dumps(
        expected, sort_keys=True, default=str
    )
    assert rows[1]["stop_reason"] == "budget" and rows[1]["steps_trained"] == 4

    def no_ray(*args):
        pytest.fail("a Ray instance was started for complete runs")

    monkeypatch.setattr(sweep, "_run_on_ray", no_ray)
    again = run_sweep(configs, packed, store, ExecutorConfig())
    assert [r["stop_reason"] for r in again] == ["already_complete"] * 2
    assert trained == ["tiny_1"]


@pytest.mark.skipif(not Path("/dev/shm").is_dir(), reason="no /dev/shm on this system")
def test_a_cpu_sweep_first_frees_allreduce_buffers_that_ended_jobs_leaked(tmp_path):
    """DeepSpeed's leaked CPU all-reduce buffers count as used memory under Ray's monitor, so a
    sweep frees this user's unmapped ones before it trains."""
    leaked = Path("/dev/shm") / f"deepspeed_allreduce_buffer_{os.getuid()}_test-{os.getpid()}_0_0"
    leaked.write_bytes(b"\0" * 1024)
    try:
        config = make_config("solo", max_steps=2, checkpoint_every=2, early_stop=False)
        (row,) = run_sweep([config], make_packed(), CheckpointStore(tmp_path / "store"),
                           ExecutorConfig(kind="sequential"))  # fmt: skip
        assert row["steps_trained"] == 2
        assert not leaked.exists()
    finally:
        leaked.unlink(missing_ok=True)
