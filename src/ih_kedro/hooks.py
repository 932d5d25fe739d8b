"""Kedro hooks: the runtime environment every pipeline expects."""

from __future__ import annotations

import logging
import os

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
