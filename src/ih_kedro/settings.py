"""Project settings. https://docs.kedro.org/en/stable/kedro_project_setup/settings.html"""

import os

# Nothing phones home, and DeepSpeed does not wait on a GPU that is not there.
os.environ.setdefault("KEDRO_DISABLE_TELEMETRY", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from kedro.config import OmegaConfigLoader  # noqa: E402

from ih_kedro.hooks import MlflowPresentationHooks, RuntimeEnvironmentHooks  # noqa: E402

HOOKS = (RuntimeEnvironmentHooks(), MlflowPresentationHooks())

CONFIG_LOADER_CLASS = OmegaConfigLoader
CONFIG_LOADER_ARGS = {
    "base_env": "base",
    "default_run_env": "local",
}
