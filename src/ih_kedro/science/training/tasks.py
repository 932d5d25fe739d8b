"""One run of a sweep as a picklable task, and how runs report their progress.

A :class:`RunTask` carries everything a run needs to a Ray worker or to the ranks of a
DeepSpeed job: its config, a handle on the packed corpus (:class:`TokenSource`: the memmap's
path, never the array, when there is one), the checkpoint store's folder, where to log
(:class:`TrackingSpec`) and how to build its online evaluator.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ih_kedro.science.data.packed import PackedTokens
from ih_kedro.science.training.config import TrainingRunConfig
from ih_kedro.science.training.run import MANIFEST_COLUMNS, Evaluator

RENDEZVOUS_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")

EvaluatorFactory = Callable[[PackedTokens, int], Evaluator]
"""``factory(packed, context_length) -> evaluate``; must pickle (a module-level function or a
``functools.partial`` of one) to reach Ray workers."""


@dataclass(frozen=True)
class TrackingSpec:
    """Where a run logs: the MLflow store (absolute URI) and the parent run's id."""

    tracking_uri: str
    parent_run_id: str | None = None


@dataclass
class TokenSource:
    """A picklable handle on the packed corpus: its memmap file, or (tests) the array itself."""

    vocab_size: int
    eos_token_id: int
    checksum: str = ""
    meta: dict[str, Any] = field(default_factory=dict)
    path: str | None = None
    dtype: str = "uint16"
    n_tokens: int = 0
    array: Any = None  # in-memory tokens, or a Ray ObjectRef to them

    @classmethod
    def of(cls, packed: PackedTokens) -> TokenSource:
        tokens = packed.tokens
        source = cls(packed.vocab_size, packed.eos_token_id, packed.checksum, dict(packed.meta))
        source.dtype = np.dtype(tokens.dtype).str
        source.n_tokens = len(packed)
        filename = getattr(tokens, "filename", None)
        whole_file = (
            isinstance(tokens, np.memmap)
            and filename is not None
            and tokens.offset == 0
            and os.path.getsize(filename) == tokens.nbytes
        )
        if whole_file:
            source.path = str(Path(filename).resolve())
        else:
            source.array = np.asarray(tokens)
        return source

    def to_file(self, folder: Path) -> TokenSource:
        """The same source backed by a file in ``folder`` (for a multi-process job)."""
        if self.path is not None:
            return self
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"tokens-{self.n_tokens}-{self.checksum or 'mem'}.bin"
        np.asarray(self._array(), dtype=np.dtype(self.dtype)).tofile(path)
        out = TokenSource(self.vocab_size, self.eos_token_id, self.checksum, dict(self.meta))
        out.path, out.dtype, out.n_tokens = str(path), self.dtype, self.n_tokens
        return out

    def _array(self) -> Any:
        """The in-memory tokens, fetched from Ray's object store when they travelled by reference
        (a Ray task's multi-rank job writes them to a file for its ranks)."""
        if type(self.array).__name__ == "ObjectRef":
            import ray

            return ray.get(self.array)
        return self.array

    def open(self) -> PackedTokens:
        if self.path is not None:
            tokens = np.memmap(self.path, dtype=np.dtype(self.dtype), mode="r")
            tokens = tokens[: self.n_tokens]  # (n_tokens,)
        else:
            tokens = self._array()
        return PackedTokens(tokens, self.vocab_size, self.eos_token_id, self.checksum, self.meta)


@dataclass
class RunTask:
    """Everything one run needs, picklable (what a Ray task or a rank job receives)."""

    config: TrainingRunConfig
    tokens: TokenSource
    store_root: str
    tracking: TrackingSpec | None
    evaluator_factory: EvaluatorFactory | None
    threads: int = 1
    ranks: int = 1
    hostfile: str | None = None
    workdir: str | None = None


class ProgressBoard:
    """Per-run step progress, written by the runs and read by the sweep (a Ray actor there)."""

    def __init__(self) -> None:
        self.steps: dict[str, tuple[int, int]] = {}

    def update(self, name: str, step: int, total: int) -> None:
        self.steps[name] = (int(step), int(total))

    def snapshot(self) -> dict[str, tuple[int, int]]:
        return dict(self.steps)


def report_progress(board: Any, name: str, step: int, total: int) -> None:
    """Tell ``board`` (a :class:`ProgressBoard`, its Ray actor, or ``None``) a run's step."""
    if board is None:
        return
    update = board.update
    if hasattr(update, "remote"):
        update.remote(name, step, total)
    else:
        update(name, step, total)


def step_reporter(board: Any, name: str, total: int, every: float = 1.0) -> Callable[[int], None]:
    """Return a ``step_hook`` that reports a run's step at most every ``every`` seconds (and
    always its last step)."""
    last = [0.0]

    def hook(step: int) -> None:
        now = time.monotonic()
        if now - last[0] >= every or step >= total:
            last[0] = now
            report_progress(board, name, step, total)

    return hook


def manifest_row(summary: Mapping[str, Any]) -> dict[str, Any]:
    """Return the ``sweep_manifest`` columns of a run's summary (``None`` where absent)."""
    return {column: summary.get(column) for column in MANIFEST_COLUMNS}
