"""Experiment tracking behind a small protocol, with an MLflow implementation (nested runs).

The training loop only talks to a :class:`Tracker`; :class:`MlflowTracker` records every
training run as an MLflow run nested under the active run (kedro-mlflow opens that parent for
``kedro run``). :class:`NullTracker` records nothing.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol, TypeVar, runtime_checkable

logger = logging.getLogger(__name__)

T = TypeVar("T")


@runtime_checkable
class Tracker(Protocol):
    """Where a training run's parameters, metrics and files go."""

    def run(
        self, name: str, params: Mapping[str, Any], run_id: str | None = None
    ) -> contextlib.AbstractContextManager[str | None]:
        """Open (or, given ``run_id``, reopen) the run; the context yields its id."""
        ...

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        """Log scalar metrics at a training step."""
        ...

    def log_artifact(self, path: str) -> None:
        """Attach a file to the open run."""
        ...


class NullTracker:
    """A tracker that records nothing (``run`` yields ``None``)."""

    @contextlib.contextmanager
    def run(
        self, name: str, params: Mapping[str, Any], run_id: str | None = None
    ) -> Iterator[str | None]:
        yield None

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        return None

    def log_artifact(self, path: str) -> None:
        return None


def flatten_params(params: Mapping[str, Any], prefix: str = "", sep: str = ".") -> dict[str, str]:
    """Flatten nested mappings into ``{"a.b": "value"}`` strings, as MLflow params want."""
    flat: dict[str, str] = {}
    for key, value in params.items():
        name = f"{prefix}{sep}{key}" if prefix else str(key)
        if isinstance(value, Mapping):
            flat.update(flatten_params(value, name, sep))
        else:
            flat[name] = str(value)[:6000]
    return flat


LOCKED_MARKERS = ("database is locked", "database table is locked")


class _StoreCalls:
    """The main thread's store calls in progress, and an exit a signal asked for meanwhile."""

    depth = 0
    held_exit: int | None = None


_main_thread_calls = _StoreCalls()


def exit_between_store_calls(code: int) -> None:
    """Raise ``SystemExit(code)`` now or, inside a :func:`retry_locked` call on the main thread,
    as soon as that call returns (a signal handler's exit: ``ih_kedro.hooks`` on SIGTERM).

    Raised in the middle of an SQLite write, the exit can leave the write's transaction open.
    Its lock then fails every later write of the process ("database is locked" after SQLite's
    busy timeout), and the exit handlers could not mark the interrupted runs ``KILLED`` (seen
    with SIGTERMs sent at random moments of a metric-logging loop). A store call lasts
    milliseconds, so the exit is hardly later.
    """
    if _main_thread_calls.depth:
        _main_thread_calls.held_exit = code
        return
    raise SystemExit(code)


@contextlib.contextmanager
def _store_call() -> Iterator[None]:
    """Hold :func:`exit_between_store_calls` off until the block ends (main thread only: the
    thread signal handlers run in)."""
    calls = _main_thread_calls
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    calls.depth += 1
    try:
        yield
    finally:
        calls.depth -= 1
        if not calls.depth and calls.held_exit is not None:
            code, calls.held_exit = calls.held_exit, None
            raise SystemExit(code)


def retry_locked(call: Callable[[], T], *, attempts: int = 12, first_wait: float = 0.05) -> T:
    """Run ``call()``, retrying with exponential back-off while SQLite reports a lock.

    Several training runs (Ray workers) write into one embedded SQLite store; SQLite serialises
    writers and a writer that waits past its busy timeout gets ``database is locked``. A failed
    write is rolled back, so retrying it neither loses nor duplicates rows. Other errors, and
    the last lock error after ``attempts`` tries (~3 min), propagate. A signal's exit waits
    until each try ends (:func:`exit_between_store_calls`).
    """
    wait = first_wait
    for attempt in range(attempts):
        try:
            with _store_call():
                return call()
        except Exception as error:  # MlflowException or sqlalchemy OperationalError
            if attempt == attempts - 1 or not any(m in str(error) for m in LOCKED_MARKERS):
                raise
            time.sleep(wait * (1.0 + random.random()))
            wait = min(wait * 2.0, 20.0)
    raise AssertionError("unreachable")


def absolute_tracking_uri(uri: str) -> str:
    """``sqlite:///relative.db`` made absolute (workers need not share the driver's cwd)."""
    prefix = "sqlite:///"
    if uri.startswith(prefix) and not uri.startswith(prefix + "/"):
        return prefix + str(Path(uri[len(prefix) :]).resolve())
    if "://" not in uri and uri:
        return str(Path(uri).resolve())
    return uri


#: ``mlflow.experimentKind`` value for model-training experiments: the MLflow UI (3.x) then opens
#: the experiment on its runs, not on the GenAI overview (traces, judges).
EXPERIMENT_KIND = "custom_model_development"
EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
#: The tag the MLflow UI shows as a run's (or an experiment's) description.
NOTE_TAG = "mlflow.note.content"


def training_run_description(name: str, params: Mapping[str, Any]) -> str:
    """The description (``mlflow.note.content``) of one training run, from its parameters."""
    parts = [f"preset {params['preset']}" if isinstance(params.get("preset"), str) else None]
    for key, label in (("batch_size", "B"), ("context_length", "C"), ("seed", "seed")):
        if key in params:
            parts.append(f"{label} = {params[key]}")
    if params.get("data_variant"):
        parts.append(f"data: {params['data_variant']}")
    setting = ", ".join(p for p in parts if p)
    return (
        f"Training run {name} ({setting}), trained through DeepSpeed. Metrics by step: loss, "
        "learning rate, tokens seen, FLOPs, the online prefix-matching score; the telemetry "
        "stage adds every checkpoint's head scores (e.g. head.prefix_matching.L1H0)."
    )


def describe_experiment(client: Any, experiment_id: str, description: str | None = None) -> None:
    """Tag an experiment as model training (and give it a description) unless already set.

    ``client`` is an ``mlflow.MlflowClient``. Experiments created before these tags existed get
    them on their next run; a kind or description a user chose in the UI is kept.
    """
    tags = client.get_experiment(experiment_id).tags
    if EXPERIMENT_KIND_TAG not in tags:
        client.set_experiment_tag(experiment_id, EXPERIMENT_KIND_TAG, EXPERIMENT_KIND)
    if description and not tags.get(NOTE_TAG):
        client.set_experiment_tag(experiment_id, NOTE_TAG, description)


class MlflowTracker:
    """Record each training run as an MLflow run nested under a parent run.

    The store is explicit: ``tracking_uri`` if given, else ``MLFLOW_TRACKING_URI``, else
    whatever MLflow is already pointed at (kedro-mlflow sets it from ``conf/*/mlflow.yml``).
    The parent is ``parent_run_id`` if given (a Ray worker gets the Kedro run's id this way),
    else the process's active run. ``experiment_name`` is used only when there is no parent (a
    notebook). Everything goes through an ``MlflowClient`` bound to the run id, never through
    MLflow's process-wide active-run stack, and every write retries on a locked SQLite store
    (:func:`retry_locked`), so concurrent workers can log into one store.
    """

    def __init__(
        self,
        tracking_uri: str | None = None,
        experiment_name: str | None = None,
        parent_run_id: str | None = None,
    ):
        import mlflow

        self._mlflow = mlflow
        uri = tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or mlflow.get_tracking_uri()
        self.tracking_uri = uri
        self.client = mlflow.MlflowClient(tracking_uri=uri)
        self.experiment_name = experiment_name
        self.parent_run_id = parent_run_id
        self._run_id: str | None = None
        # Per metric, the last step the reopened run already holds (see ``run``).
        self._logged_through: dict[str, int] = {}

    def _parent(self) -> tuple[str | None, str | None]:
        """``(parent run id, its experiment id)``; ``(None, None)`` without a parent."""
        parent_id = self.parent_run_id
        if parent_id is None:
            active = self._mlflow.active_run()
            parent_id = active.info.run_id if active is not None else None
        if parent_id is None:
            return None, None
        parent = retry_locked(lambda: self.client.get_run(parent_id))
        return parent_id, parent.info.experiment_id

    def _experiment_id(self) -> str:
        name = self.experiment_name
        if not name:
            from mlflow.tracking.fluent import _get_experiment_id

            return _get_experiment_id()
        found = retry_locked(lambda: self.client.get_experiment_by_name(name))
        if found is not None:
            return found.experiment_id
        experiment_id = retry_locked(lambda: self.client.create_experiment(name))
        describe_experiment(self.client, experiment_id)
        return experiment_id

    @contextlib.contextmanager
    def run(self, name: str, params: Mapping[str, Any], run_id: str | None = None) -> Iterator[str]:
        """Start (or resume ``run_id``) a run nested under the parent, tagged ``run_name``.

        A resumed run is re-parented to the current parent (a rerun after a crash collects the
        whole sweep under the run that finishes it; see :func:`reparent_runs`). The run ends
        ``FINISHED``; ``KILLED`` if the body is interrupted (Ctrl-C, or SIGTERM, which the Kedro
        hooks turn into ``SystemExit``); ``FAILED`` if it raises anything else.
        """
        from mlflow.entities import Param

        client = self.client
        parent_id, parent_experiment = self._parent()
        if run_id is None:
            tags = {
                "run_name": name,
                "mlflow.runName": name,
                NOTE_TAG: training_run_description(name, params),
            }
            if "preset" in params:
                tags["preset"] = str(params["preset"])
            if parent_id is not None:
                tags["mlflow.parentRunId"] = parent_id
            experiment_id = parent_experiment or self._experiment_id()
            run = retry_locked(lambda: client.create_run(experiment_id, tags=tags, run_name=name))
            run_id = run.info.run_id
            flat = flatten_params(params)
            items = [Param(k, v) for k, v in flat.items()]
            for start in range(0, len(items), 100):
                chunk = items[start : start + 100]
                retry_locked(lambda chunk=chunk: client.log_batch(run_id, params=chunk))
            self._logged_through = {}
        else:
            logger.info("resuming MLflow run %s for %s", run_id, name)
            resumed_id = run_id
            retry_locked(lambda: client.update_run(resumed_id, status="RUNNING"))
            self._logged_through = self._last_logged_steps(resumed_id)
            if parent_id is not None:
                reparent_runs(client, [resumed_id], parent_id)
        self._run_id = run_id
        status = "FAILED"
        try:
            yield run_id
            status = "FINISHED"
        except (KeyboardInterrupt, SystemExit):
            status = "KILLED"
            raise
        finally:
            finished_id = run_id
            retry_locked(lambda: client.set_terminated(finished_id, status=status))
            self._run_id = None

    def _last_logged_steps(self, run_id: str) -> dict[str, int]:
        """The last step of every metric of a reopened run.

        A run resumed from its checkpoint at step ``k`` replays steps ``k+1 ...`` that the
        interrupted process may have logged already; the replay is bitwise identical, so those
        steps are not logged again (each step appears once in the run's history).
        """
        client = self.client
        keys = retry_locked(lambda: client.get_run(run_id)).data.metrics
        return {
            key: max(
                m.step for m in retry_locked(lambda k=key: client.get_metric_history(run_id, k))
            )
            for key in keys
        }

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        from mlflow.entities import Metric

        if self._run_id is None:
            raise RuntimeError("MlflowTracker.log_metrics outside tracker.run(...)")
        now = int(time.time() * 1000)
        batch = [
            Metric(k, float(v), now, int(step))
            for k, v in metrics.items()
            if int(step) > self._logged_through.get(k, -1)  # not already in a reopened run
        ]
        if not batch:
            return
        run_id = self._run_id
        retry_locked(lambda: self.client.log_batch(run_id, metrics=batch))

    def log_artifact(self, path: str) -> None:
        if self._run_id is None:
            raise RuntimeError("MlflowTracker.log_artifact outside tracker.run(...)")
        run_id = self._run_id
        retry_locked(lambda: self.client.log_artifact(run_id, path))


def reparent_runs(client: Any, run_ids: Iterable[str], parent_run_id: str) -> list[str]:
    """Set ``mlflow.parentRunId`` of ``run_ids`` to ``parent_run_id``; return the old parents
    that were still ``RUNNING`` and are now marked ``KILLED``.

    A Kedro run killed mid-sweep stays ``RUNNING`` forever in MLflow (nothing ended it); the
    rerun that resumes or skips its training runs moves them under the new Kedro run, so one
    sweep sits under one parent, and ends the dead parent as ``KILLED``. A parent is only
    marked when a later sweep takes over one of its training runs (resumes or skips it).
    """
    killed: list[str] = []
    for run_id in run_ids:
        run = retry_locked(lambda run_id=run_id: client.get_run(run_id))
        old = run.data.tags.get("mlflow.parentRunId")
        if old == parent_run_id:
            continue
        retry_locked(
            lambda run_id=run_id: client.set_tag(run_id, "mlflow.parentRunId", parent_run_id)
        )
        if old and old not in killed:
            old_run = retry_locked(lambda old=old: client.get_run(old))
            if old_run.info.status == "RUNNING":
                retry_locked(lambda old=old: client.set_terminated(old, status="KILLED"))
                killed.append(old)
                logger.info("MLflow: marked the dead parent run %s KILLED", old)
    return killed


def end_running_children(client: Any, parent_run_id: str, status: str = "KILLED") -> list[str]:
    """End every nested run of ``parent_run_id`` that is still ``RUNNING`` with ``status``;
    return their ids.

    What an interrupted sweep leaves behind: a Ray worker cancelled with ``force=True`` (or a
    rank job's process) dies without ending its training run, so the run would stay
    ``RUNNING`` in the UI forever. Called when the Kedro run is interrupted, before its parent run
    is ended ``KILLED`` (``ih_kedro.hooks.InterruptedRunHooks``).
    """
    parent = retry_locked(lambda: client.get_run(parent_run_id))
    query = f"tags.mlflow.parentRunId = '{parent_run_id}' and attributes.status = 'RUNNING'"
    children = retry_locked(
        lambda: client.search_runs([parent.info.experiment_id], query, max_results=10_000)
    )
    ended = []
    for child in children:
        child_id = child.info.run_id
        retry_locked(lambda child_id=child_id: client.set_terminated(child_id, status=status))
        ended.append(child_id)
    if ended:
        logger.warning("MLflow: %d training run(s) in flight marked %s", len(ended), status)
    return ended
