"""Kedro hooks: the runtime environment every pipeline expects, and how MLflow presents a run."""

from __future__ import annotations

import atexit
import copy
import difflib
import logging
import os
import signal
import sys
import threading
from collections.abc import Mapping
from typing import Any

import click
from kedro.framework.hooks import hook_impl

from ih_kedro.science.training.runtime import configure_runtime
from ih_kedro.science.training.tracking import (
    NOTE_TAG,
    describe_experiment,
    end_running_children,
    exit_between_store_calls,
    retry_locked,
)

logger = logging.getLogger(__name__)


class RuntimeEnvironmentHooks:
    """Set accelerator and threading environment once, before any node runs."""

    @hook_impl
    def after_context_created(self, context) -> None:  # noqa: ANN001 - Kedro's signature
        world_size = os.environ.get("WORLD_SIZE", "1")
        if world_size.isdigit() and int(world_size) > 1:
            raise RuntimeError(
                f"kedro run was started as one of {world_size} ranks (WORLD_SIZE={world_size}, "
                "e.g. under the deepspeed launcher): every rank would run the whole pipeline. "
                "Run `kedro run` once and set training.executor.ranks_per_run instead; each "
                "training run then becomes one DeepSpeed job (README, 'Sweeps on Ray and "
                "multi-rank runs')."
            )
        description = configure_runtime()
        logger.info("runtime: %s", description)


class UnknownParameterError(click.ClickException, ValueError):
    """A ``--params``/``--config`` override that names no parameter of the project's conf.

    A ``ClickException``: ``kedro run`` prints "Error: <message>" and exits 1, without the
    traceback of the hook that raised it.
    """


def parameter_paths(parameters: Mapping[str, Any], prefix: str = "") -> list[str]:
    """Every dotted path of ``parameters``, mappings and leaves alike (``law_fit``,
    ``law_fit.training``, ``law_fit.training.seeds``, ...)."""
    paths = []
    for key, value in parameters.items():
        path = f"{prefix}{key}"
        paths.append(path)
        if isinstance(value, Mapping):
            paths.extend(parameter_paths(value, f"{path}."))
    return paths


def unknown_overrides(
    parameters: Mapping[str, Any], overrides: Mapping[str, Any], prefix: str = ""
) -> list[str]:
    """The dotted paths of ``overrides`` that name no key of ``parameters``.

    A mapping that is empty or null in ``parameters`` (``executor.options: {}``) is free-form:
    any key under it is accepted.
    """
    unknown = []
    for key, value in overrides.items():
        path = f"{prefix}{key}"
        if key not in parameters:
            unknown.append(path)
            continue
        known = parameters[key]
        if isinstance(value, Mapping) and isinstance(known, Mapping) and known:
            unknown.extend(unknown_overrides(known, value, f"{path}."))
    return unknown


def unknown_override_message(unknown: list[str], parameters: Mapping[str, Any]) -> str:
    """Which overrides name no parameter, each with the nearest existing key."""
    paths = parameter_paths(parameters)
    lines = []
    for path in unknown:
        nearest = difflib.get_close_matches(path, paths, n=1, cutoff=0.6)
        hint = f"did you mean `{nearest[0]}`?" if nearest else "no parameter has a similar name"
        lines.append(f"`{path}`: no such parameter; {hint}")
    return (
        "Parameter override names no parameter (from --params or --config), so nothing was "
        "run:\n  " + "\n  ".join(lines) + "\nParameters are the keys of conf/base/parameters_*.yml "
        "(and of the --env's files); a new one goes into such a file first."
    )


def check_parameter_overrides(config_loader: Any) -> None:
    """Raise :class:`UnknownParameterError` if a runtime override names no parameter of the
    conf (base and the run's env), comparing against the parameters loaded without them."""
    overrides = dict(getattr(config_loader, "runtime_params", None) or {})
    if not overrides:
        return
    plain = copy.copy(config_loader)
    plain.runtime_params = {}
    try:
        parameters = plain["parameters"]
    except Exception:  # noqa: BLE001 - no parameter files: every override is unknown
        parameters = {}
    unknown = unknown_overrides(parameters, overrides)
    if unknown:
        raise UnknownParameterError(unknown_override_message(unknown, parameters))


class ParameterOverrideHooks:
    """Refuse an override that names no parameter, before any node runs.

    Kedro merges ``--params``/``--config`` overrides into the parameters whatever their keys, so a
    misspelt or mis-nested key (``law_fit.training.seed``) would add a parameter nobody reads and
    train the default grid silently.
    """

    @hook_impl
    def after_context_created(self, context) -> None:  # noqa: ANN001 - Kedro's signature
        check_parameter_overrides(context.config_loader)


def _n_layers(preset: Any) -> int:
    """Layers of a preset (a name in the presets file or an inline mapping)."""
    from ih_kedro.science.training.models import load_model_presets

    config = load_model_presets().get(preset) if isinstance(preset, str) else preset
    if not isinstance(config, Mapping):
        return 0  # an unknown preset: validate_run_config names it before training
    return int(config.get("n_layer", config.get("num_hidden_layers", 0)) or 0)


def validate_experiment_designs(parameters: Mapping[str, Any], node_names: list[str]) -> None:
    """Check the telemetry/statistics layer options of every experiment the pipeline runs
    against the smallest model of its training grid (``min_layer`` beyond the model fails
    here, before any training, naming the parameter)."""
    from ih_kedro.science.telemetry.emergence_table import validate_min_layers

    blocks: list[tuple[str, Mapping[str, Any]]] = []
    if "train_sweep" in node_names:  # the un-namespaced stage pipelines
        blocks.append(("", parameters))
    for name, block in parameters.items():
        if isinstance(block, Mapping) and any(n.startswith(f"{name}.") for n in node_names):
            blocks.append((f"{name}.", block))
    for where, block in blocks:
        training = block.get("training")
        if not isinstance(training, Mapping):
            continue
        presets = training.get("presets") or []
        layers = [n for n in (_n_layers(p) for p in presets) if n > 0]
        if layers:
            validate_min_layers(min(layers), block.get("telemetry"), block.get("statistics"),
                                where)  # fmt: skip


class DesignValidationHooks:
    """Fail impossible experiment designs before the first node runs."""

    @hook_impl
    def before_pipeline_run(self, run_params, pipeline, catalog) -> None:  # noqa: ANN001
        try:
            parameters = catalog.load("parameters")
        except Exception:  # noqa: BLE001 - a catalog without parameters has nothing to check
            return
        validate_experiment_designs(parameters, [node.name for node in pipeline.nodes])


EXPERIMENT_DESCRIPTION = (
    "ih-kedro: when and why induction heads form. Each parent run is one `kedro run` (its "
    "parameters, the emergence law's numbers as metrics, the figures and the fit table as "
    "artifacts); the nested runs under it are its training runs (loss, learning rate, online "
    "prefix-matching score, per-checkpoint head scores)."
)


def kedro_run_description(pipeline_names: list[str] | None, env: str | None) -> str:
    """The description (``mlflow.note.content``) of the parent run of one ``kedro run``."""
    name = ",".join(pipeline_names or ["__default__"])
    return (
        f"`kedro run --pipeline={name}` (conf env: {env or 'local'}). Nested runs: one per "
        "training run of the sweep (expand the parent in the runs table). Metrics here: the "
        "fitted emergence law S* = T / (B^a C^b) (law.a.estimate, law.b.estimate, ...). "
        "Artifacts: <experiment>/figures/*.png and <experiment>/law_fit_table.csv."
    )


def _exit_on_sigterm(signum: int, frame: Any) -> None:  # noqa: ARG001 - signal's signature
    """SIGTERM as a clean exit (status 143): ``finally`` blocks and exit handlers run. Never in
    the middle of an MLflow store call, whose open transaction would lock the store."""
    exit_between_store_calls(128 + signum)


def _default_sigterm_in_child() -> None:
    """A forked child (a multiprocessing pool worker: datatrove's dedup) gets SIGTERM's default.

    ``Pool.terminate`` stops its workers with SIGTERM. With the Kedro process's handler inherited,
    a worker blocked in a C call (waiting on the pool's queue lock) whose SIGTERM lands on another
    of its threads only sets Python's signal flag and never exits: the pool waits forever.
    """
    if signal.getsignal(signal.SIGTERM) is _exit_on_sigterm:
        try:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
        except ValueError:  # not the main thread: nothing to undo there
            pass


os.register_at_fork(after_in_child=_default_sigterm_in_child)


class InterruptedRunHooks:
    """A Kedro run stopped by SIGTERM or Ctrl-C ends its MLflow run as ``KILLED``, and every
    training run nested under it that is still ``RUNNING`` too.

    Nothing else does: Kedro calls ``on_pipeline_error`` (kedro-mlflow's ``FAILED``) only for an
    ``Exception``, and MLflow's own exit handler ends a still-active run as ``FINISHED``, so a run
    a scheduler preempted looked finished in the UI. This hook's exit handler runs first (exit
    handlers run last-registered first) and ends the run as ``KILLED`` while the pipeline is still
    running; SIGTERM, by default an exit without exit handlers, becomes ``SystemExit(143)``.
    ``kill -9`` runs nothing: that parent stays ``RUNNING`` until a rerun takes its training runs
    over and marks it ``KILLED`` (``ih_kedro.science.training.tracking.reparent_runs``).
    """

    def __init__(self) -> None:
        self._running = False
        self._registered = False
        self._parent_id: str | None = None

    @hook_impl(trylast=True)
    def before_pipeline_run(self, run_params: dict, pipeline, catalog) -> None:  # noqa: ANN001, ARG002
        self._running = True
        mlflow = sys.modules.get("mlflow")
        active = mlflow.active_run() if mlflow is not None else None
        self._parent_id = active.info.run_id if active is not None else None
        if not self._registered:
            atexit.register(self._end_interrupted_run)
            self._registered = True
        is_main = threading.current_thread() is threading.main_thread()
        if is_main and signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
            signal.signal(signal.SIGTERM, _exit_on_sigterm)

    @hook_impl
    def after_pipeline_run(self, run_params: dict, run_result, pipeline, catalog) -> None:  # noqa: ANN001, ARG002
        self._running = False

    @hook_impl
    def on_pipeline_error(self, error, run_params, pipeline, catalog) -> None:  # noqa: ANN001, ARG002
        """kedro-mlflow ends the run as FAILED; a training run whose worker died (a Ray worker
        killed by the OS, a crashed rank job) would stay RUNNING under it: ended FAILED here."""
        self._running = False
        mlflow = sys.modules.get("mlflow")
        if mlflow is None or self._parent_id is None:
            return
        try:
            end_running_children(mlflow.MlflowClient(), self._parent_id, status="FAILED")
        except Exception:  # noqa: BLE001 - the pipeline's own error is the one to report
            logger.exception("could not end the nested runs of MLflow run %s", self._parent_id)

    def _end_interrupted_run(self) -> None:
        mlflow = sys.modules.get("mlflow")
        if not self._running or mlflow is None or mlflow.active_run() is None:
            return
        run_id = mlflow.active_run().info.run_id
        try:  # the training runs in flight first: their workers died without ending them
            end_running_children(mlflow.MlflowClient(), run_id)
        except Exception:  # noqa: BLE001 - the parent is ended whatever happens here
            logger.exception("could not end the nested runs of MLflow run %s", run_id)
        # Retried like every other write of the store: under CPU starvation this write once
        # waited past SQLite's busy timeout ("database is locked", a loaded test machine).
        retry_locked(lambda: mlflow.end_run(status="KILLED"))
        self._running = False
        logger.warning("kedro run interrupted: MLflow run %s marked KILLED", run_id)


class MlflowPresentationHooks:
    """Make the MLflow UI open on the training runs and say what each run is.

    Runs after kedro-mlflow's own ``before_pipeline_run`` (``trylast``), which opens the run.
    While a run is active, every figure a node saves and every fit table/summary is attached to
    it as an artifact under ``<namespace>/`` (``law_fit/figures/ps_trajectories_plot.png``,
    ``law_fit/law_fit_table.csv``), so the parent run shows the results next to its numbers.
    """

    @hook_impl(trylast=True)
    def before_pipeline_run(self, run_params: dict, pipeline, catalog) -> None:  # noqa: ANN001
        import mlflow

        self._catalog = catalog

        active = mlflow.active_run()
        if active is None:
            return
        describe_experiment(
            mlflow.MlflowClient(), active.info.experiment_id, EXPERIMENT_DESCRIPTION
        )
        if not active.data.tags.get(NOTE_TAG):
            mlflow.set_tag(
                NOTE_TAG,
                kedro_run_description(
                    run_params.get("pipeline_names")
                    or ([run_params["pipeline_name"]] if run_params.get("pipeline_name") else None),
                    run_params.get("env"),
                ),
            )

    _catalog: Any = None

    def _logs_itself(self, dataset_name: str) -> bool:
        """Whether the dataset is an ``MlflowArtifactDataset`` (it logs its own artifact; logging
        it here too would duplicate it)."""
        try:
            dataset = self._catalog.get(dataset_name) if self._catalog is not None else None
        except Exception:  # noqa: BLE001 - an unknown name is simply not self-logging
            return False
        # kedro-mlflow builds a subclass of the wrapped dataset (e.g. ``MlflowMatplotlibDataset``)
        # in its ``mlflow_artifact_dataset`` module.
        return type(dataset).__module__.startswith("kedro_mlflow.io.artifacts")

    @hook_impl
    def after_dataset_saved(self, dataset_name: str, data: Any, node) -> None:  # noqa: ANN001
        import mlflow

        if mlflow.active_run() is None:
            return
        if self._logs_itself(dataset_name):
            return
        artifact = report_artifact_path(dataset_name, data)
        if artifact is None:
            return
        if artifact.endswith(".png"):
            mlflow.log_figure(data, artifact)
        elif artifact.endswith(".csv"):
            mlflow.log_text(data.to_csv(index=False), artifact)
        else:
            mlflow.log_dict(data, artifact)
        logger.debug("MLflow: %s logged as artifact %s", dataset_name, artifact)


#: Reporting datasets attached to the parent run besides figures: name -> file suffix.
REPORT_TABLES = {"law_fit_table": ".csv", "law_fit_summary": ".json"}


def report_artifact_path(dataset_name: str, data: Any) -> str | None:
    """Where a saved dataset goes in the run's artifacts, or ``None`` if it is not a report.

    Figures (any matplotlib ``Figure``) go to ``<namespace>/figures/<name>.png``; the fit table
    and summary to ``<namespace>/<name>.csv|.json``; un-namespaced ones to the artifact root.
    """
    from matplotlib.figure import Figure

    namespace, _, name = dataset_name.rpartition(".")
    prefix = f"{namespace}/" if namespace else ""
    if isinstance(data, Figure):
        return f"{prefix}figures/{name}.png"
    if name in REPORT_TABLES:
        return f"{prefix}{name}{REPORT_TABLES[name]}"
    return None
