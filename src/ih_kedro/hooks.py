"""Kedro hooks: the runtime environment every pipeline expects."""

from __future__ import annotations

import logging

from kedro.framework.hooks import hook_impl

from ih_kedro.science.runtime import configure_runtime

logger = logging.getLogger(__name__)


class RuntimeEnvironmentHooks:
    """Set accelerator and threading environment once, before any node runs."""

    @hook_impl
    def after_context_created(self, context) -> None:  # noqa: ANN001 - Kedro's signature
        description = configure_runtime()
        logger.info("runtime: %s", description)
