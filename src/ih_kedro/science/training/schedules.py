"""When a run checkpoints, how its learning rate moves, and when it stops after emergence."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


def checkpoint_schedule(
    total_steps: int,
    every: int,
    dense_until: int = 0,
    unit: str = "steps",
    tokens_per_step: int = 1,
) -> list[int]:
    """Return the sorted optimizer steps at which to checkpoint a run of ``total_steps``.

    Log-spaced early, regular later (Pythia): step 0, powers of two up to ``dense_until``,
    multiples of ``every``, and the final step. With ``unit="tokens"``, ``every`` and
    ``dense_until`` are token counts: each multiple ``k·every`` becomes the first step that
    reaches it given ``tokens_per_step`` (so checkpoints do not drift when ``every`` is not a
    multiple of ``tokens_per_step``), and ``dense_until`` likewise.
    """
    if unit not in ("steps", "tokens"):
        raise ValueError(f"training.checkpoint_unit: 'steps' or 'tokens', got {unit!r}")
    if every <= 0:
        raise ValueError(f"training.checkpoint_every: must be positive, got {every}")
    steps = {0, total_steps}
    if unit == "tokens":
        dense_until = math.ceil(dense_until / tokens_per_step)
        if every <= tokens_per_step:  # a multiple of ``every`` falls within every step
            steps.update(range(1, total_steps + 1))
        else:
            n_multiples = total_steps * tokens_per_step // every
            steps.update(-(-k * every // tokens_per_step) for k in range(1, n_multiples + 1))
    else:
        steps.update(range(every, total_steps + 1, every))
    power = 1
    while power <= min(dense_until, total_steps):
        steps.add(power)
        power *= 2
    return sorted(steps)


def lr_factor(
    step: int, warmup_steps: int, schedule: str, decay_steps: int, min_lr_ratio: float
) -> float:
    """LR multiplier for the update after ``step`` completed steps (linear warm-up, then
    constant or cosine to ``min_lr_ratio`` at ``decay_steps``)."""
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    if schedule == "constant":
        return 1.0
    span = max(1, decay_steps - warmup_steps)
    progress = min(1.0, (step - warmup_steps) / span)
    return min_lr_ratio + (1.0 - min_lr_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))


@dataclass
class EarlyStopOnEmergence:
    """Stop a run a margin after an online metric first crosses a threshold.

    With the first crossing at step ``S`` the run stops at
    ``max(ceil(margin_factor·S), S + min_extra_steps)`` (steps), so the post-emergence plateau
    is recorded too. ``first_crossing`` survives resumes through :meth:`state_dict`.
    """

    metric: str
    threshold: float
    margin_factor: float = 1.5
    min_extra_steps: int = 100
    first_crossing: int | None = None

    def update(self, step: int, metrics: Mapping[str, float]) -> None:
        """Record an evaluation at ``step``; the first value above threshold sets ``S``."""
        value = metrics.get(self.metric)
        if self.first_crossing is None and value is not None and value > self.threshold:
            self.first_crossing = int(step)

    @property
    def stop_step(self) -> int | None:
        """The step to stop at, or ``None`` before the first crossing."""
        if self.first_crossing is None:
            return None
        crossing = self.first_crossing
        return max(math.ceil(self.margin_factor * crossing), crossing + self.min_extra_steps)

    def should_stop(self, step: int) -> bool:
        return self.stop_step is not None and step >= self.stop_step

    def state_dict(self) -> dict[str, Any]:
        return {"first_crossing": self.first_crossing}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.first_crossing = state.get("first_crossing")
