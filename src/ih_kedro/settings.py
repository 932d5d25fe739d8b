"""Project settings. https://docs.kedro.org/en/stable/kedro_project_setup/settings.html"""

import os

# Nothing phones home, and DeepSpeed does not wait on a GPU that is not there.
os.environ.setdefault("KEDRO_DISABLE_TELEMETRY", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from kedro.config import OmegaConfigLoader  # noqa: E402

from ih_kedro.hooks import (  # noqa: E402
    DesignValidationHooks,
    InterruptedRunHooks,
    MlflowPresentationHooks,
    ParameterOverrideHooks,
    RuntimeEnvironmentHooks,
)

HOOKS = (
    ParameterOverrideHooks(),
    RuntimeEnvironmentHooks(),
    DesignValidationHooks(),
    MlflowPresentationHooks(),
    InterruptedRunHooks(),
)

CONFIG_LOADER_CLASS = OmegaConfigLoader
CONFIG_LOADER_ARGS = {
    "base_env": "base",
    "default_run_env": "local",
    # Parameters of an env (conf/local, conf/paper) and `--params` overrides are merged key by
    # key into conf/base. Kedro's default ("destructive") replaces whole top-level keys, and it
    # applies --params to the env's files too, so with any parameter file in the env,
    # `--params=telemetry.external_checkpoints=/p` replaced the whole `telemetry` mapping.
    "merge_strategy": {"parameters": "soft"},
}
