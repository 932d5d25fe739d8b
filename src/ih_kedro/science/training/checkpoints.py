"""The folder of a sweep's training runs: HF checkpoints, DeepSpeed state, run summaries."""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

logger = logging.getLogger(__name__)

STEP_DIR = re.compile(r"^step_(\d+)$")
# Written into a DeepSpeed tag once every rank has saved its part of it: the only sign a tag is
# whole. DeepSpeed's own ``latest`` is not one: rank 0 writes it after its own files, with no
# barrier before it, while another rank may still be writing its ZeRO optimizer shard.
COMPLETE_MARKER = "ih_kedro_complete"


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

    def mark_deepspeed_complete(self, run_name: str, tag: str) -> None:
        """Record that every rank has written its part of DeepSpeed tag ``tag``.

        Call on one rank after ``engine.save_checkpoint`` returned: it ends with a barrier of
        all ranks, so every rank's files are written by then.
        """
        (self.deepspeed_dir(run_name) / tag / COMPLETE_MARKER).write_text(tag)

    def latest_deepspeed_tag(self, run_name: str) -> str | None:
        """Tag of the DeepSpeed checkpoint to resume from, or ``None``.

        Only a tag marked complete (:meth:`mark_deepspeed_complete`) counts: a run killed while
        DeepSpeed wrote a tag leaves it without some rank's files, and resuming from it fails
        inside DeepSpeed (measured: SIGTERM during a 1-rank save; a 2-rank job resumed from a
        tag that ``latest`` named but that lacked rank 1's optimizer shard). Older tags are
        pruned only after the new one is marked, so the highest marked tag is the last whole
        checkpoint. Tags written before markers existed do not count: such a run restarts from
        step 0, with a warning.
        """
        folder = self.deepspeed_dir(run_name)
        if not folder.is_dir():
            return None
        tags = sorted(p.name for p in folder.iterdir() if p.is_dir() and STEP_DIR.match(p.name))
        complete = [tag for tag in tags if (folder / tag / COMPLETE_MARKER).is_file()]
        if tags and not complete:
            logger.warning(
                "%s: no DeepSpeed checkpoint in %s is marked complete (%s); the run starts "
                "from step 0",
                run_name,
                folder,
                ", ".join(tags),
            )
        return complete[-1] if complete else None

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
