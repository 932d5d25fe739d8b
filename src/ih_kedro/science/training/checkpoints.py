"""The folder of a sweep's training runs: HF checkpoints, DeepSpeed state, run summaries."""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

STEP_DIR = re.compile(r"^step_(\d+)$")


class CheckpointStore:
    """A folder of training runs, laid out as in docs/architecture.md::

    <root>/<run_name>/checkpoints/step_0000100/   HF save_pretrained + trainer_state.json
    <root>/<run_name>/deepspeed/                  DeepSpeed state of the latest checkpoint
    <root>/<run_name>/run_summary.json            written when the run finished
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).resolve()
        self.root.mkdir(parents=True, exist_ok=True)

    def __repr__(self) -> str:
        return f"CheckpointStore({str(self.root)!r})"

    def run_dir(self, run_name: str) -> Path:
        return self.root / run_name

    def checkpoints_dir(self, run_name: str) -> Path:
        return self.run_dir(run_name) / "checkpoints"

    def deepspeed_dir(self, run_name: str) -> Path:
        return self.run_dir(run_name) / "deepspeed"

    def summary_path(self, run_name: str) -> Path:
        return self.run_dir(run_name) / "run_summary.json"

    def checkpoint_dir(self, run_name: str, step: int) -> Path:
        return self.checkpoints_dir(run_name) / f"step_{step:07d}"

    def runs(self) -> list[str]:
        """Names of the runs with at least one folder in the store, sorted."""
        return sorted(p.name for p in self.root.iterdir() if p.is_dir())

    def checkpoint_steps(self, run_name: str) -> list[int]:
        """Steps of the complete HF checkpoints of a run, sorted."""
        folder = self.checkpoints_dir(run_name)
        if not folder.is_dir():
            return []
        steps = []
        for child in folder.iterdir():
            match = STEP_DIR.match(child.name)
            if match and (child / "trainer_state.json").is_file():
                steps.append(int(match.group(1)))
        return sorted(steps)

    def read_summary(self, run_name: str) -> dict[str, Any] | None:
        """The finished run's summary, or ``None`` if the run has not finished."""
        path = self.summary_path(run_name)
        return json.loads(path.read_text()) if path.is_file() else None

    def write_summary(self, run_name: str, summary: Mapping[str, Any]) -> Path:
        path = self.summary_path(run_name)
        _atomic_write_text(path, json.dumps(dict(summary), indent=2, default=_json_default))
        return path

    def save_hf_checkpoint(
        self, run_name: str, step: int, model: torch.nn.Module, trainer_state: Mapping[str, Any]
    ) -> Path:
        """Write ``save_pretrained`` + ``trainer_state.json`` atomically (temp folder, rename)."""
        final = self.checkpoint_dir(run_name, step)
        tmp = final.with_name(final.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        from transformers.utils import logging as hf_logging

        bars = hf_logging.is_progress_bar_enabled()
        hf_logging.disable_progress_bar()  # a shard bar per checkpoint drowns the run's bar
        try:
            model.save_pretrained(tmp)
        finally:
            if bars:
                hf_logging.enable_progress_bar()
        (tmp / "trainer_state.json").write_text(json.dumps(dict(trainer_state), indent=2))
        if final.exists():  # left by a run killed after this write; identical content
            shutil.rmtree(final)
        tmp.rename(final)
        return final

    def latest_deepspeed_tag(self, run_name: str) -> str | None:
        """Tag of the DeepSpeed checkpoint to resume from, or ``None``.

        DeepSpeed writes ``latest`` after the tag's files, and older tags are deleted only after
        that, so ``latest`` names a complete checkpoint; a torn ``latest`` falls back to the
        highest remaining tag. Either way a tag counts only when it holds its model states
        (``*model_states.pt``): a run killed while DeepSpeed was creating a tag leaves its folder
        without them, and resuming from it would fail inside DeepSpeed (measured: SIGTERM during
        a checkpoint's write).
        """
        folder = self.deepspeed_dir(run_name)
        if not folder.is_dir():
            return None

        def complete(tag: str) -> bool:
            return (folder / tag).is_dir() and any((folder / tag).glob("*model_states.pt"))

        latest = folder / "latest"
        if latest.is_file():
            tag = latest.read_text().strip()
            if tag and complete(tag):
                return tag
        tags = sorted(p.name for p in folder.iterdir() if p.is_dir() and STEP_DIR.match(p.name))
        complete_tags = [tag for tag in tags if complete(tag)]
        return complete_tags[-1] if complete_tags else None

    def prune_deepspeed(self, run_name: str, keep: str) -> None:
        """Delete every DeepSpeed tag except ``keep`` (the latest)."""
        folder = self.deepspeed_dir(run_name)
        for child in folder.iterdir():
            if child.is_dir() and child.name != keep and STEP_DIR.match(child.name):
                shutil.rmtree(child, ignore_errors=True)


def _atomic_write_text(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, tuple):
        return list(value)
    raise TypeError(f"not JSON serialisable: {type(value)}")
