"""Peak memory and tokens/s of one training step of ``gpt2-2l-d768`` at V 50,257, by loss path.

One step is a forward, the loss, a backward and an AdamW update of the paper preset
(``conf/paper``: 2 layers, 8 heads, d 768, GPT-2's 50,257 ids) on random tokens, in fp32 on
the CPU. The loss paths (``training.loss_implementation``, ``science/training/
chunked_cross_entropy.py``):

- ``full``: today's path until this benchmark, the ``(B·C, V)`` logits cast to fp32, then
  ``cross_entropy``;
- ``chunked``: at most one chunk of logits, gradients recomputed per chunk in the backward;
- ``chunked-forward``: at most one chunk of logits, gradients computed in the forward.

Each path runs in a fresh process (so one path's freed memory cannot hide another's peak); a
thread samples the resident set (``/proc/self/statm``) every millisecond during each measured
step. ``peak`` is the highest resident set during a step, ``step peak`` that minus the resident
set just before it (model, AdamW state and batch are resident before; the step's gradients and
activations are not). The paths alternate over ``--rounds`` rounds so machine load falls on all.

    .venv/bin/python benchmarks/chunked_loss_memory.py --batch 8 --context 1024 --out out/
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import torch

from ih_kedro.science.training.chunked_cross_entropy import (
    chunked_linear_cross_entropy,
    hidden_states_instead_of_logits,
)
from ih_kedro.science.training.models import build_model

PRESET = "gpt2-2l-d768"
VOCAB = 50257
PATHS = ("full", "chunked", "chunked-forward")
PAGE = os.sysconf("SC_PAGE_SIZE")


def resident_bytes() -> int:
    """This process's resident set, in bytes."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * PAGE


class PeakSampler:
    """Samples the resident set every ``interval`` seconds in a thread; ``peak`` in bytes."""

    def __init__(self, interval: float = 0.001) -> None:
        self.interval, self.peak = interval, resident_bytes()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, resident_bytes())
            time.sleep(self.interval)

    def __enter__(self) -> PeakSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, resident_bytes())


def loss_of(model: torch.nn.Module, tokens: torch.Tensor, path: str) -> torch.Tensor:
    """Mean next-token loss (nats) of ``tokens`` ``(B, C+1)`` by ``path``, as the step does."""
    inputs, targets = tokens[:, :-1], tokens[:, 1:]  # (B, C) each
    if path == "full":
        logits = model(input_ids=inputs).logits  # (B, C, V)
        return torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.size(-1)).float(), targets.reshape(-1)
        )
    with hidden_states_instead_of_logits(model) as captured:
        model(input_ids=inputs)
    head = captured["head"]
    return chunked_linear_cross_entropy(
        captured["hidden"],
        head.weight,
        targets,
        head.bias,
        grads_in_forward=path == "chunked-forward",
    )


def measure_one(path: str, batch: int, context: int, steps: int, activation: str | None) -> dict:
    """Train ``steps`` measured steps after one warm-up step; their peaks and times."""
    overrides = {"activation_function": activation} if activation else {}
    model = build_model(PRESET, VOCAB, context, seed=0, attn_implementation="sdpa", **overrides)
    optimizer = torch.optim.AdamW(model.parameters(), lr=2.5e-4, betas=(0.9, 0.999), eps=1e-8)
    gen = torch.Generator().manual_seed(0)
    batches = [torch.randint(0, VOCAB, (batch, context + 1), generator=gen) for _ in range(2)]

    def step(tokens: torch.Tensor) -> float:
        loss = loss_of(model, tokens, path)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return float(loss)

    step(batches[0])  # AdamW's state exists from here on
    rows = []
    for i in range(steps):
        before = resident_bytes()
        start = time.perf_counter()
        with PeakSampler() as sampler:
            loss = step(batches[(i + 1) % 2])
        seconds = time.perf_counter() - start
        rows.append({"seconds": seconds, "before": before, "peak": sampler.peak, "loss": loss})
    return {"path": path, "steps": rows}


def summarise(path: str, runs: list[dict], tokens_per_step: int) -> dict:
    """One row per path: medians over every measured step of every round (MiB, tokens/s)."""
    steps = [s for run in runs for s in run["steps"]]
    mib = 2**20
    return {
        "path": path,
        "measured_steps": len(steps),
        "tokens_per_second": round(
            tokens_per_step / statistics.median(s["seconds"] for s in steps)
        ),
        "seconds_per_step": round(statistics.median(s["seconds"] for s in steps), 2),
        "peak_mib": round(max(s["peak"] for s in steps) / mib),
        "step_peak_mib": round(max(s["peak"] - s["before"] for s in steps) / mib),
        "resident_before_mib": round(statistics.median(s["before"] for s in steps) / mib),
        "loss": round(steps[-1]["loss"], 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--context", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=2, help="measured steps per round")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--paths", nargs="+", default=list(PATHS), choices=PATHS)
    parser.add_argument("--out", default=None, help="folder for chunked_loss_memory.json")
    parser.add_argument(
        "--activation",
        default=None,
        help="the MLP's activation_function (default: the preset's, GPT-2's gelu_new)",
    )
    parser.add_argument("--one", choices=PATHS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.one:  # a child: one path, one JSON line
        result = measure_one(args.one, args.batch, args.context, args.steps, args.activation)
        print(json.dumps(result))
        return
    runs: dict[str, list[dict]] = {p: [] for p in args.paths}
    for _ in range(args.rounds):
        for path in args.paths:
            command = [sys.executable, __file__, "--one", path, "--batch", str(args.batch),
                       "--context", str(args.context), "--steps", str(args.steps),
                       "--threads", str(args.threads)]  # fmt: skip
            if args.activation:
                command += ["--activation", args.activation]
            out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
            runs[path].append(json.loads(out.strip().splitlines()[-1]))
    tokens_per_step = args.batch * args.context
    rows = [summarise(p, runs[p], tokens_per_step) for p in args.paths]
    base = rows[0]
    activation = args.activation or "gelu_new"
    print(f"B {args.batch} x C {args.context}, {PRESET} ({activation}), V {VOCAB}, fp32, "
          f"{args.threads} threads")  # fmt: skip
    print(
        "| loss path | step peak (MiB) | peak RSS (MiB) | tokens/s | step peak vs full | tokens/s vs full |"
    )  # noqa: E501
    print("|---|---|---|---|---|---|")
    for row in rows:
        ratio = base["step_peak_mib"] / row["step_peak_mib"]
        speed = row["tokens_per_second"] / base["tokens_per_second"]
        print(f"| {row['path']} | {row['step_peak_mib']:,} | {row['peak_mib']:,} | "
              f"{row['tokens_per_second']:,} | {ratio:.1f}x lower | {speed:.2f}x |")  # fmt: skip
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        record = {"batch": args.batch, "context": args.context, "threads": args.threads,
                  "activation": activation, "rows": rows, "runs": runs}  # fmt: skip
        name = f"chunked_loss_memory_B{args.batch}_C{args.context}_{activation}.json"
        (Path(args.out) / name).write_text(json.dumps(record, indent=1))


if __name__ == "__main__":
    main()
