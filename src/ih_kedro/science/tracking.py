"""Experiment tracking behind a small protocol, with an MLflow implementation (nested runs).

The training loop only talks to a :class:`Tracker`; :class:`MlflowTracker` records every
training run as an MLflow run nested under the active run (kedro-mlflow opens that parent for
``kedro run``). :class:`NullTracker` records nothing.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator, Mapping
from typing import Any, Protocol, runtime_checkable

logger = logging.getLogger(__name__)


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


class MlflowTracker:
    """Record each training run as an MLflow run nested under the active run.

    The store is explicit: ``tracking_uri`` if given, else ``MLFLOW_TRACKING_URI``, else
    whatever MLflow is already pointed at (kedro-mlflow sets it from ``conf/*/mlflow.yml``).
    ``experiment_name`` is used only when no run is active (a notebook).
    """

    def __init__(self, tracking_uri: str | None = None, experiment_name: str | None = None):
        import mlflow

        self._mlflow = mlflow
        uri = tracking_uri or os.environ.get("MLFLOW_TRACKING_URI")
        if uri:
            mlflow.set_tracking_uri(uri)
        self.experiment_name = experiment_name
        # Per metric, the last step the reopened run already holds (see ``run``).
        self._logged_through: dict[str, int] = {}

    @contextlib.contextmanager
    def run(self, name: str, params: Mapping[str, Any], run_id: str | None = None) -> Iterator[str]:
        """Start (or resume ``run_id``) a nested run tagged with ``run_name`` and ``preset``."""
        mlflow = self._mlflow
        parent = mlflow.active_run()
        if parent is None and self.experiment_name and run_id is None:
            mlflow.set_experiment(self.experiment_name)
        tags = {"run_name": name}
        if "preset" in params:
            tags["preset"] = str(params["preset"])
        with mlflow.start_run(
            run_id=run_id,
            run_name=None if run_id else name,
            nested=parent is not None,
            experiment_id=parent.info.experiment_id if parent is not None and not run_id else None,
            tags=tags if run_id is None else None,
        ) as active:
            if run_id is None:
                mlflow.log_params(flatten_params(params))
                self._logged_through = {}
            else:
                logger.info("resuming MLflow run %s for %s", run_id, name)
                self._logged_through = self._last_logged_steps(run_id)
            yield active.info.run_id

    def _last_logged_steps(self, run_id: str) -> dict[str, int]:
        """The last step of every metric of a reopened run.

        A run resumed from its checkpoint at step ``k`` replays steps ``k+1 ...`` that the
        interrupted process may have logged already; the replay is bitwise identical, so those
        steps are not logged again (each step appears once in the run's history).
        """
        client = self._mlflow.tracking.MlflowClient()
        keys = client.get_run(run_id).data.metrics
        return {key: max(m.step for m in client.get_metric_history(run_id, key)) for key in keys}

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        new = {
            k: float(v)
            for k, v in metrics.items()
            if int(step) > self._logged_through.get(k, -1)  # not already in a reopened run
        }
        if new:
            self._mlflow.log_metrics(new, step=int(step))

    def log_artifact(self, path: str) -> None:
        self._mlflow.log_artifact(path)
