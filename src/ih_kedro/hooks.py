"""Kedro hooks: the runtime environment every pipeline expects."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

from kedro.framework.hooks import hook_impl

from ih_kedro.science.runtime import configure_runtime

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


def _n_layers(preset: Any) -> int:
    """Layers of a preset (a name in the presets file or an inline mapping)."""
    from ih_kedro.science.models import load_model_presets

    config = load_model_presets().get(preset) if isinstance(preset, str) else preset
    if not isinstance(config, Mapping):
        return 0  # an unknown preset: validate_run_config names it before training
    return int(config.get("n_layer", config.get("num_hidden_layers", 0)) or 0)


def validate_experiment_designs(parameters: Mapping[str, Any], node_names: list[str]) -> None:
    """Check the telemetry/statistics layer options of every experiment the pipeline runs
    against the smallest model of its training grid (``min_layer`` beyond the model fails
    here, before any training, naming the parameter)."""
    from ih_kedro.science.telemetry.emergence import validate_min_layers

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
