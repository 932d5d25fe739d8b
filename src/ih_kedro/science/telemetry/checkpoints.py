"""Find and load the checkpoints of a run (ours, or any folder of HF checkpoint folders)."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, PreTrainedModel

import ih_kedro.science.training.models  # noqa: F401 - registers the attention-only model with Auto*

logger = logging.getLogger(__name__)

_STEP_PATTERN = re.compile(r"^(?:step|checkpoint|global_step)[_-]?(\d+)$")


def _step_folders(folder: Path) -> list[tuple[int, Path]]:
    found = []
    for child in folder.iterdir() if folder.is_dir() else ():
        match = _STEP_PATTERN.match(child.name)
        if match and child.is_dir() and (child / "config.json").is_file():
            found.append((int(match.group(1)), child))
    return found


def list_checkpoints(run_dir: str | Path) -> list[tuple[int, Path, float]]:
    """Checkpoints of a run, sorted by step: ``[(step, path, tokens_seen), ...]``.

    Looks in ``<run_dir>/checkpoints/step_*`` (our ``CheckpointStore`` layout) and, failing
    that, directly in ``run_dir`` for HF folders named ``step_*``, ``step1000`` (saved Pythia
    revisions) or ``checkpoint-*``; each needs a ``config.json``. ``tokens_seen`` comes from
    ``trainer_state.json`` (our runs) and is NaN when there is none.
    """
    root = Path(run_dir)
    if not root.is_dir():
        raise ValueError(f"run_dir: {root} is not a directory")
    found = _step_folders(root / "checkpoints") or _step_folders(root)
    out = []
    for folder_step, path in sorted(found):
        step = folder_step
        tokens_seen = float("nan")
        state_file = path / "trainer_state.json"
        if state_file.is_file():
            state = json.loads(state_file.read_text())
            step = int(state.get("step", step))
            tokens_seen = float(state.get("tokens_seen", float("nan")))
        out.append((step, path, tokens_seen))
    return sorted(out, key=lambda row: row[0])


def load_checkpoint(
    path: str | Path, device: str | torch.device = "cpu", dtype: torch.dtype | None = None
) -> PreTrainedModel:
    """Load an HF checkpoint folder in eval mode (any causal LM, ours included)."""
    kwargs = {"dtype": dtype} if dtype is not None else {}
    model = AutoModelForCausalLM.from_pretrained(str(path), **kwargs)
    return model.to(device).eval()
