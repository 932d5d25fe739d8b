"""Process-wide runtime set-up shared by training and telemetry (no Kedro here)."""

from __future__ import annotations

import os


def configure_runtime() -> str:
    """Pick DeepSpeed's accelerator and quiet noisy libraries; return a one-line description.

    On a machine without CUDA, ``DS_ACCELERATOR=cpu`` makes DeepSpeed use its CPU accelerator
    instead of probing for a GPU. An explicit ``DS_ACCELERATOR`` from the user always wins.
    """
    import torch

    os.environ.setdefault("KEDRO_DISABLE_TELEMETRY", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if not torch.cuda.is_available():
        os.environ.setdefault("DS_ACCELERATOR", "cpu")
    accelerator = os.environ.get("DS_ACCELERATOR", "auto")
    return (
        f"torch {torch.__version__}, cuda={torch.cuda.is_available()}, "
        f"DS_ACCELERATOR={accelerator}, threads={torch.get_num_threads()}"
    )
