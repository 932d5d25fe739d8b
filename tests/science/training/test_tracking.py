"""Experiment tracking: the null tracker, the helpers, and MlflowTracker on a real SQLite store.

The MLflow tests share one throwaway SQLite store per module (creating its tables takes ~2 s);
each test works in its own experiment or runs, and runs with the store's folder as working
directory so MLflow's default artifact location (``./mlruns``) lands there too.
"""

from __future__ import annotations

import json
import os
import signal
import time
import uuid
from pathlib import Path
from types import SimpleNamespace

import mlflow
import pytest

from ih_kedro.science.training import tracking
from ih_kedro.science.training.tracking import (
    EXPERIMENT_KIND,
    EXPERIMENT_KIND_TAG,
    NOTE_TAG,
    MlflowTracker,
    NullTracker,
    Tracker,
    absolute_tracking_uri,
    describe_experiment,
    exit_between_store_calls,
    flatten_params,
    reparent_runs,
    retry_locked,
    training_run_description,
)

PARAMS = {
    "preset": "attn-only-2l-d64",
    "batch_size": 4,
    "context_length": 16,
    "seed": 0,
    "optimizer": {"lr": 0.001, "betas": [0.9, 0.95]},
}
FLAT_PARAMS = {
    "preset": "attn-only-2l-d64",
    "batch_size": "4",
    "context_length": "16",
    "seed": "0",
    "optimizer.lr": "0.001",
    "optimizer.betas": "[0.9, 0.95]",
}


@pytest.fixture(scope="module")
def store_uri(tmp_path_factory: pytest.TempPathFactory) -> str:
    folder = tmp_path_factory.mktemp("tracking")
    uri = f"sqlite:///{folder / 'mlflow.db'}"
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)
        mlflow.MlflowClient(tracking_uri=uri).search_experiments()  # creates the tables
    return uri


@pytest.fixture()
def uri(store_uri: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.chdir(Path(store_uri.removeprefix("sqlite:///")).parent)
    return store_uri


@pytest.fixture()
def client(uri: str) -> mlflow.MlflowClient:
    return mlflow.MlflowClient(tracking_uri=uri)


@pytest.fixture()
def experiment(client: mlflow.MlflowClient) -> str:
    return client.create_experiment(f"exp-{uuid.uuid4().hex[:8]}")


@pytest.fixture()
def waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The back-off waits of ``retry_locked``, recorded instead of slept (jitter fixed at 0.5)."""
    slept: list[float] = []
    monkeypatch.setattr(tracking, "time", SimpleNamespace(sleep=slept.append, time=time.time))
    monkeypatch.setattr(tracking, "random", SimpleNamespace(random=lambda: 0.5))
    return slept


def _history(client: mlflow.MlflowClient, run_id: str, key: str) -> list[tuple[int, float]]:
    return sorted((m.step, m.value) for m in client.get_metric_history(run_id, key))


def test_the_null_tracker_records_nothing() -> None:
    tracker = NullTracker()
    with tracker.run("tiny", {"preset": "x"}) as run_id:
        assert run_id is None
        assert tracker.log_metrics({"loss": 1.0}, 3) is None
        assert tracker.log_artifact("/no/such/file") is None
    with tracker.run("tiny", {}, run_id="abc") as run_id:
        assert run_id is None


def test_both_trackers_satisfy_the_protocol(uri: str) -> None:
    assert isinstance(NullTracker(), Tracker)
    assert isinstance(MlflowTracker(uri), Tracker)
    assert not isinstance(SimpleNamespace(run=None, log_metrics=None), Tracker)


def test_flatten_params_joins_nested_keys_and_stringifies() -> None:
    assert flatten_params(PARAMS) == FLAT_PARAMS
    assert flatten_params({"a": {"b": {"c": None}}, 1: True}) == {"a.b.c": "None", "1": "True"}
    assert flatten_params({"a": {"b": 1}}, prefix="run", sep="/") == {"run/a/b": "1"}
    assert flatten_params({"text": "x" * 7000})["text"] == "x" * 6000  # MLflow's limit


def test_retry_locked_backs_off_while_the_store_is_locked(waits: list[float]) -> None:
    errors = [
        RuntimeError("database is locked"),
        RuntimeError("(sqlite3.OperationalError) database table is locked"),
    ]
    calls = []

    def call() -> int:
        calls.append(1)
        if errors:
            raise errors.pop(0)
        return 42

    assert retry_locked(call) == 42
    assert len(calls) == 3
    assert waits == pytest.approx([0.05 * 1.5, 0.1 * 1.5])


def test_retry_locked_raises_other_errors_at_once(waits: list[float]) -> None:
    calls = []

    def call() -> None:
        calls.append(1)
        raise ValueError("disk I/O error")

    with pytest.raises(ValueError, match="disk I/O error"):
        retry_locked(call)
    assert len(calls) == 1 and waits == []


def test_retry_locked_gives_up_after_its_attempts_with_capped_waits(waits: list[float]) -> None:
    calls = []

    def call() -> None:
        calls.append(1)
        raise RuntimeError(f"database is locked (try {len(calls)})")

    with pytest.raises(RuntimeError, match=r"database is locked \(try 4\)"):
        retry_locked(call, attempts=4, first_wait=8.0)
    assert len(calls) == 4
    assert waits == [8.0 * 1.5, 16.0 * 1.5, 20.0 * 1.5]  # doubling, capped at 20 s


def test_a_signals_exit_waits_until_the_store_call_returns() -> None:
    """SIGTERM's exit (the Kedro hooks' handler) landing inside a store call is held until the
    call has returned, so it never leaves an SQLite transaction, and with it the store's lock,
    open; outside a call it is immediate, and a held exit is raised once."""
    handler = signal.signal(
        signal.SIGTERM, lambda signum, _: exit_between_store_calls(128 + signum)
    )
    try:
        steps = []

        def call() -> int:
            os.kill(os.getpid(), signal.SIGTERM)
            deadline = time.monotonic() + 0.2
            while time.monotonic() < deadline:  # the handler runs in here
                pass
            steps.append("returned")
            return 1

        with pytest.raises(SystemExit) as exited:
            retry_locked(call)
        assert exited.value.code == 143 and steps == ["returned"]
        assert retry_locked(lambda: 5) == 5  # the exit was raised once, not held over
        with pytest.raises(SystemExit) as exited:
            exit_between_store_calls(130)
        assert exited.value.code == 130
    finally:
        signal.signal(signal.SIGTERM, handler)


def test_absolute_tracking_uri(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    here = tmp_path.resolve()
    assert absolute_tracking_uri("sqlite:///mlflow.db") == f"sqlite:///{here / 'mlflow.db'}"
    assert absolute_tracking_uri("sqlite:///data/m.db") == f"sqlite:///{here / 'data' / 'm.db'}"
    assert absolute_tracking_uri("sqlite:////srv/m.db") == "sqlite:////srv/m.db"
    assert absolute_tracking_uri("mlruns") == str(here / "mlruns")
    assert absolute_tracking_uri("http://mlflow:5000") == "http://mlflow:5000"
    assert absolute_tracking_uri("file:///srv/mlruns") == "file:///srv/mlruns"
    assert absolute_tracking_uri("") == ""


def test_training_run_description_names_the_setting() -> None:
    tail = (
        ", trained through DeepSpeed. Metrics by step: loss, learning rate, tokens seen, FLOPs, "
        "the online prefix-matching score; the telemetry stage adds every checkpoint's head "
        "scores (e.g. head.prefix_matching.L1H0)."
    )
    params = {**PARAMS, "data_variant": "copy_spans"}
    assert training_run_description("tiny_B4", params) == (
        "Training run tiny_B4 (preset attn-only-2l-d64, B = 4, C = 16, seed = 0, "
        "data: copy_spans)" + tail
    )
    # An inline preset (a mapping) and an empty data variant are left out.
    inline = {"preset": {"family": "gpt2"}, "batch_size": 8, "data_variant": ""}
    assert training_run_description("r", inline) == "Training run r (B = 8)" + tail
    assert training_run_description("r", {}) == "Training run r ()" + tail


def test_describe_experiment_tags_once_and_keeps_a_users_choice(
    client: mlflow.MlflowClient, experiment: str
) -> None:
    describe_experiment(client, experiment)
    tags = client.get_experiment(experiment).tags
    assert tags[EXPERIMENT_KIND_TAG] == EXPERIMENT_KIND == "custom_model_development"
    assert NOTE_TAG not in tags
    describe_experiment(client, experiment, "The law_fit sweep.")
    assert client.get_experiment(experiment).tags[NOTE_TAG] == "The law_fit sweep."
    client.set_experiment_tag(experiment, EXPERIMENT_KIND_TAG, "genai_development")
    client.set_experiment_tag(experiment, NOTE_TAG, "mine")
    describe_experiment(client, experiment, "Another description.")
    tags = client.get_experiment(experiment).tags
    assert (tags[EXPERIMENT_KIND_TAG], tags[NOTE_TAG]) == ("genai_development", "mine")


def test_a_run_without_parent_goes_to_its_named_experiment(
    uri: str, client: mlflow.MlflowClient, tmp_path: Path
) -> None:
    name = f"notebook-{uuid.uuid4().hex[:8]}"
    tracker = MlflowTracker(uri, experiment_name=name)
    summary = tmp_path / "summary.json"
    summary.write_text(json.dumps({"steps_trained": 2}))
    with tracker.run("tiny_B4", PARAMS) as run_id:
        assert client.get_run(run_id).info.status == "RUNNING"
        tracker.log_metrics({"loss": 2.5, "learning_rate": 0.001}, step=0)
        tracker.log_metrics({"loss": 2.0}, step=2)
        tracker.log_artifact(str(summary))
    experiment = client.get_experiment_by_name(name)
    assert experiment.tags[EXPERIMENT_KIND_TAG] == EXPERIMENT_KIND
    run = client.get_run(run_id)
    assert run.info.experiment_id == experiment.experiment_id
    assert run.info.status == "FINISHED"
    assert run.data.params == FLAT_PARAMS
    tags = run.data.tags
    assert (tags["run_name"], tags["mlflow.runName"], tags["preset"]) == (
        "tiny_B4",
        "tiny_B4",
        "attn-only-2l-d64",
    )
    assert tags[NOTE_TAG] == training_run_description("tiny_B4", PARAMS)
    assert "mlflow.parentRunId" not in tags
    assert _history(client, run_id, "loss") == [(0, 2.5), (2, 2.0)]
    assert _history(client, run_id, "learning_rate") == [(0, 0.001)]
    assert [f.path for f in client.list_artifacts(run_id)] == ["summary.json"]
    copy = client.download_artifacts(run_id, "summary.json", str(tmp_path / "copy"))
    assert json.loads(Path(copy).read_text()) == {"steps_trained": 2}
    # A second tracker finds the experiment by name instead of creating another.
    with MlflowTracker(uri, experiment_name=name).run("again", {}) as second:
        pass
    assert client.get_run(second).info.experiment_id == experiment.experiment_id


def test_a_run_nests_under_the_given_parent(
    uri: str, client: mlflow.MlflowClient, experiment: str
) -> None:
    parent = client.create_run(experiment).info.run_id
    unused = f"unused-{uuid.uuid4().hex[:8]}"
    tracker = MlflowTracker(uri, experiment_name=unused, parent_run_id=parent)
    with tracker.run("child", {"seed": 1}) as run_id:
        pass
    run = client.get_run(run_id)
    assert run.data.tags["mlflow.parentRunId"] == parent
    assert run.info.experiment_id == experiment  # the parent's, not experiment_name's
    assert "preset" not in run.data.tags
    assert client.get_experiment_by_name(unused) is None
    assert client.get_run(parent).info.status == "RUNNING"


def test_the_store_and_parent_default_to_the_environment_and_the_active_run(
    uri: str, client: mlflow.MlflowClient, experiment: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)  # restored after the test
    assert MlflowTracker().tracking_uri == uri
    server = "http://mlflow.invalid:5000"  # a client for it never connects until used
    assert MlflowTracker(server).tracking_uri == server
    previous = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(uri)
    try:
        with mlflow.start_run(experiment_id=experiment) as parent:
            with MlflowTracker().run("under-kedro", {}) as run_id:
                pass
    finally:
        mlflow.set_tracking_uri(previous)
    run = client.get_run(run_id)
    assert run.data.tags["mlflow.parentRunId"] == parent.info.run_id
    assert run.info.experiment_id == experiment


def test_a_failing_run_ends_failed_and_closes_the_tracker(
    uri: str, client: mlflow.MlflowClient, experiment: str
) -> None:
    parent = client.create_run(experiment).info.run_id
    tracker = MlflowTracker(uri, parent_run_id=parent)
    with pytest.raises(RuntimeError, match="diverged"), tracker.run("bad", {}) as run_id:
        tracker.log_metrics({"loss": 9.0}, 1)
        raise RuntimeError("diverged")
    assert client.get_run(run_id).info.status == "FAILED"
    assert _history(client, run_id, "loss") == [(1, 9.0)]
    with pytest.raises(RuntimeError) as error:
        tracker.log_metrics({"loss": 1.0}, 2)
    assert str(error.value) == "MlflowTracker.log_metrics outside tracker.run(...)"
    with pytest.raises(RuntimeError) as error:
        tracker.log_artifact(__file__)
    assert str(error.value) == "MlflowTracker.log_artifact outside tracker.run(...)"


def test_a_resumed_run_logs_each_step_once_under_the_new_parent(
    uri: str, client: mlflow.MlflowClient, experiment: str
) -> None:
    dead_parent = client.create_run(experiment).info.run_id  # a killed Kedro run: RUNNING
    first = MlflowTracker(uri, parent_run_id=dead_parent)
    with first.run("tiny", PARAMS) as run_id:
        for step in range(4):
            first.log_metrics({"loss": 10.0 + step}, step)
        first.log_metrics({"learning_rate": 0.5}, 0)
    new_parent = client.create_run(experiment).info.run_id
    tracker = MlflowTracker(uri, parent_run_id=new_parent)
    with tracker.run("tiny", PARAMS, run_id=run_id) as resumed:
        assert resumed == run_id
        assert client.get_run(run_id).info.status == "RUNNING"
        for step in range(2, 6):  # replays steps 2 and 3 from the checkpoint at step 1
            tracker.log_metrics({"loss": 100.0 + step}, step)
        tracker.log_metrics({"learning_rate": 0.25}, 1)
    assert _history(client, run_id, "loss") == [
        (0, 10.0),
        (1, 11.0),
        (2, 12.0),
        (3, 13.0),
        (4, 104.0),
        (5, 105.0),
    ]
    assert _history(client, run_id, "learning_rate") == [(0, 0.5), (1, 0.25)]
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED"
    assert run.data.tags["mlflow.parentRunId"] == new_parent
    assert run.data.params == FLAT_PARAMS
    assert client.get_run(dead_parent).info.status == "KILLED"
    assert client.get_run(new_parent).info.status == "RUNNING"
    # A fresh run of the same tracker forgets the resumed run's logged steps.
    with tracker.run("fresh", {}) as fresh:
        tracker.log_metrics({"loss": 1.0}, 0)
    assert _history(client, fresh, "loss") == [(0, 1.0)]


def test_many_params_are_logged_in_batches(
    uri: str, client: mlflow.MlflowClient, experiment: str
) -> None:
    parent = client.create_run(experiment).info.run_id
    params = {f"p{i:03d}": i for i in range(250)}  # MLflow takes at most 100 per batch
    with MlflowTracker(uri, parent_run_id=parent).run("wide", params) as run_id:
        pass
    assert client.get_run(run_id).data.params == {k: str(v) for k, v in params.items()}


def test_a_locked_metric_write_is_retried_and_lands_once(
    uri: str, client: mlflow.MlflowClient, experiment: str, waits: list[float]
) -> None:
    parent = client.create_run(experiment).info.run_id
    tracker = MlflowTracker(uri, parent_run_id=parent)
    log_batch = tracker.client.log_batch
    failures = [RuntimeError("(sqlite3.OperationalError) database is locked")]

    def flaky_log_batch(*args, **kwargs):
        if kwargs.get("metrics") and failures:
            raise failures.pop()
        return log_batch(*args, **kwargs)

    tracker.client.log_batch = flaky_log_batch
    with tracker.run("locked", {}) as run_id:
        tracker.log_metrics({"loss": 3.0}, 7)
    assert _history(client, run_id, "loss") == [(7, 3.0)]
    assert waits == [0.05 * 1.5]


def test_reparent_runs_moves_children_and_kills_dead_parents_once(
    client: mlflow.MlflowClient, experiment: str
) -> None:
    def run(parent: str | None = None) -> str:
        tags = {"mlflow.parentRunId": parent} if parent else {}
        return client.create_run(experiment, tags=tags).info.run_id

    dead, finished, new = run(), run(), run()
    client.set_terminated(finished, status="FINISHED")
    children = [run(dead), run(dead), run(finished), run(new), run()]
    assert reparent_runs(client, children, new) == [dead]
    assert [client.get_run(c).data.tags["mlflow.parentRunId"] for c in children] == [new] * 5
    statuses = [client.get_run(r).info.status for r in (dead, finished, new)]
    assert statuses == ["KILLED", "FINISHED", "RUNNING"]
    assert reparent_runs(client, children, new) == []  # nothing left to move


def test_the_session_store_is_untouched_by_this_module(store_uri: str) -> None:
    assert os.environ["MLFLOW_TRACKING_URI"] != store_uri
    assert mlflow.get_tracking_uri() != store_uri
