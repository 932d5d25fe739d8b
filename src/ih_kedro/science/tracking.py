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

    @contextlib.contextmanager
    def run(self, name: str, params: Mapping[str, Any], run_id: str | None = None) -> Iterator[str]:
        """Start (or resume ``run_id``) a nested run tagged with ``run_name``, ``preset`` and a
        description (``mlflow.note.content``)."""
        mlflow = self._mlflow
        parent = mlflow.active_run()
        if parent is None and self.experiment_name and run_id is None:
            experiment = mlflow.set_experiment(self.experiment_name)
            describe_experiment(mlflow.MlflowClient(), experiment.experiment_id)
        tags = {"run_name": name, NOTE_TAG: training_run_description(name, params)}
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
            else:
                logger.info("resuming MLflow run %s for %s", run_id, name)
            yield active.info.run_id

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        self._mlflow.log_metrics({k: float(v) for k, v in metrics.items()}, step=int(step))

    def log_artifact(self, path: str) -> None:
        self._mlflow.log_artifact(path)
