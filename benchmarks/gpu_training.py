"""The training code path on a GPU: the embedded law_fit grid and paper-sized cells on CUDA.

Every run goes through the functions ``kedro run`` reaches below the training node
(:func:`~ih_kedro.science.training.sweep.run_sweep` -> ``train_run`` -> ``deepspeed.initialize``,
with the online evaluator of :mod:`ih_kedro.science.telemetry.online`), with the sequential
executor (one GPU needs no Ray) and without MLflow, so it runs where only torch, DeepSpeed and
transformers are installed. Nothing here picks a device: DeepSpeed's accelerator is CUDA when
torch sees a GPU and the CPU otherwise, exactly as in a sweep.

Two parts, each writing one CSV row per run as it finishes (a killed job keeps what it had):

``law_fit``
    The embedded default grid (``conf/base/parameters_law_fit.yml``: 9 cells x 2 seeds of the
    attention-only 2-layer model on the packed KJV corpus, fp32 as on CPU), seed 0 of every
    cell first (``--tokens``: the packed corpus ``kedro run --pipeline=data_engineering`` writes
    to ``data/05_model_input/train_tokens``; copy that folder to a GPU machine without Kedro).
    Per run: the online emergence step S*, steps, tokens/s. Run it on a CPU too
    (``--shard i/n`` splits the runs between processes) and hold the two tables side by side:
    same configs, same batches, only the device's arithmetic differs.

``paper``
    Tokens/s, model FLOPs utilisation and peak memory of the paper preset (``conf/paper``:
    GPT-2 2 layers d768, vocabulary 50,257, bf16, ZeRO-2, clipping 1.0) on random tokens, one
    (B, C) cell per child process, so a cell that runs out of memory is recorded, not fatal.

    python benchmarks/gpu_training.py law_fit --tokens data/05_model_input/train_tokens --out out/
    python benchmarks/gpu_training.py paper --out out/ --cells 32x128 128x512 --steps 30
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import functools
import json
import logging
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml
from paper_projection import flops_per_token, paper_vocab_size  # benchmarks/, beside this file

from ih_kedro.science.data.packed import PackedTokens
from ih_kedro.science.data.tokenization import read_packed_tokens
from ih_kedro.science.telemetry.online import make_online_evaluator
from ih_kedro.science.training.checkpoints import CheckpointStore
from ih_kedro.science.training.grid import expand_grid, sweep_probe_length
from ih_kedro.science.training.models import build_model
from ih_kedro.science.training.run import train_run
from ih_kedro.science.training.sweep import ExecutorConfig, run_sweep

ROOT = Path(__file__).resolve().parents[1]
H200_PEAK_BF16_TFLOPS = 989.0  # dense bf16 peak of an H100/H200 SXM (the MFU denominator)
logger = logging.getLogger("gpu_training")


def device_name() -> str:
    """The GPU's name, or the CPU's model name."""
    if torch.cuda.is_available():
        return torch.cuda.get_device_name(0)
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "cpu"


def append_row(path: Path, row: Mapping[str, Any]) -> None:
    """Append ``row`` to the CSV at ``path`` (header on first write)."""
    new = not path.exists()
    with path.open("a", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(row))
        if new:
            writer.writeheader()
        writer.writerow(row)


# ---------------------------------------------------------------------------------------------
# law_fit: the embedded default grid.


def law_fit_params() -> dict[str, Any]:
    """The default ``law_fit.training`` parameters, with one probe length fixed for the grid."""
    params = yaml.safe_load((ROOT / "conf/base/parameters_law_fit.yml").read_text())
    training = params["law_fit"]["training"]
    training["online_emergence"]["probe_length"] = sweep_probe_length(training)
    training["mlflow"] = False
    gpus = 1 if torch.cuda.is_available() else 0
    training["executor"] = {"kind": "sequential", "num_cpus_per_run": 1, "num_gpus_per_run": gpus}
    return training


def run_law_fit(args: argparse.Namespace) -> None:
    training = law_fit_params()
    configs = sorted(expand_grid(training), key=lambda c: (c.seed, c.batch_size, c.context_length))
    index, count = (int(part) for part in args.shard.split("/"))
    configs = configs[index::count]
    packed = read_packed_tokens(args.tokens)
    factory = functools.partial(make_online_evaluator, options=training["online_emergence"])
    executor = ExecutorConfig.from_params(training["executor"])
    out = Path(args.out) / f"law_fit_{args.label}.csv"
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as root:
        store = CheckpointStore(Path(root) / "checkpoints")
        for config in configs:
            if time.perf_counter() - started > args.deadline_s:
                logger.warning("deadline reached: %s and later runs not started", config.run_name)
                break
            (row,) = run_sweep([config], packed, store, executor, evaluator_factory=factory)
            append_row(
                out,
                {
                    "device": device_name(),
                    "torch": torch.__version__,
                    "run_name": row["run_name"],
                    "batch_size": row["batch_size"],
                    "context_length": row["context_length"],
                    "seed": row["seed"],
                    "online_emergence_step": row["online_emergence_step"],
                    "steps_trained": row["steps_trained"],
                    "stop_reason": row["stop_reason"],
                    "wall_seconds": round(float(row["wall_seconds"]), 2),
                    "tokens_per_second": round(row["tokens_seen"] / row["wall_seconds"], 1),
                },
            )
            logger.info("%s: S* %s in %.1f s", row["run_name"], row["online_emergence_step"],
                        row["wall_seconds"])  # fmt: skip


# ---------------------------------------------------------------------------------------------
# paper: throughput of the paper preset.


class RecordingTracker:
    """A tracker that keeps the logged metrics in memory (no MLflow)."""

    def __init__(self) -> None:
        self.metrics: list[tuple[int, dict[str, float]]] = []

    @contextlib.contextmanager
    def run(self, name: str, params: Mapping[str, Any], run_id: str | None = None) -> Iterator:
        yield None

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        self.metrics.append((step, dict(metrics)))

    def log_artifact(self, path: str) -> None:
        return None


def paper_config(batch_size: int, context_length: int, steps: int):
    """The paper grid's run at (B, C), seed 0, trained ``steps`` steps without checkpoints."""
    params = yaml.safe_load((ROOT / "conf/paper/parameters_law_fit.yml").read_text())
    training = params["law_fit"]["training"]
    training.update(
        batch_sizes=[batch_size],
        context_lengths=[context_length],
        seeds=[0],
        max_steps=steps,
        max_tokens=None,
        warmup_steps=0,
        warmup_fraction=None,  # conf/paper gives the warm-up as a fraction
        checkpoint_unit="steps",
        checkpoint_dense_until=1,
        checkpoint_every=10**9,
        log_every=5,
    )
    training["online_emergence"]["enabled"] = False
    (config,) = expand_grid(training)
    return config


def paper_cell(batch_size: int, context_length: int, steps: int) -> dict[str, Any]:
    """Train one paper cell on random tokens; its steady tokens/s, MFU and peak memory."""
    config = paper_config(batch_size, context_length, steps)
    n_tokens = (steps + 2) * batch_size * (context_length + 1) * 2
    vocab = paper_vocab_size()
    tokens = np.random.default_rng(0).integers(1, vocab, n_tokens, dtype=np.uint32)
    packed = PackedTokens(tokens=tokens, vocab_size=vocab, eos_token_id=0, checksum="r")
    # As benchmarks/paper_projection.py counts them (the MFU's numerator).
    per_token = flops_per_token(build_model(config.preset, vocab, config.positions, seed=0),
                                context_length, vocab)  # fmt: skip
    tracker = RecordingTracker()
    with tempfile.TemporaryDirectory() as root:
        summary = train_run(config, packed, CheckpointStore(root), tracker)
    windows = [m["tokens_per_second"] for _, m in tracker.metrics if "tokens_per_second" in m]
    steady = float(np.median(windows[1:])) if len(windows) > 1 else float("nan")
    peak_memory = torch.cuda.max_memory_allocated() if torch.cuda.is_available() else 0
    return {
        "batch_size": batch_size,
        "context_length": context_length,
        "steps": int(summary["steps_trained"]),
        "tokens_per_second": round(steady, 1),
        "flops_per_token": per_token,
        "tflops": round(steady * per_token / 1e12, 2),
        "mfu_of_989": round(steady * per_token / (H200_PEAK_BF16_TFLOPS * 1e12), 4),
        "peak_memory_gib": round(peak_memory / 2**30, 2),
        "final_loss": round(float(summary["final_loss"]), 4),
    }


def run_paper(args: argparse.Namespace) -> None:
    out = Path(args.out) / f"paper_{args.label}.csv"
    for cell in args.cells:
        batch_size, context_length = (int(v) for v in cell.split("x"))
        command = [sys.executable, __file__, "paper-cell", cell, "--steps", str(args.steps)]
        started = time.perf_counter()
        row: dict[str, Any] = {"device": device_name(), "cell": cell}
        try:
            result = subprocess.run(
                command, check=False, capture_output=True, text=True, timeout=args.cell_timeout
            )
        except subprocess.TimeoutExpired:
            result = None
        lines = [] if result is None else result.stdout.splitlines()
        results = [line for line in lines if line.startswith("{")]
        if result is not None and result.returncode == 0 and results:
            row.update(json.loads(results[-1]))
            row["error"] = ""
        else:
            output = [] if result is None else (result.stderr + result.stdout).splitlines()
            errors = (
                [line for line in output if "Error" in line]
                or output[-3:]
                or [f"no result within --cell-timeout {args.cell_timeout:g} s"]
            )
            row.update(batch_size=batch_size, context_length=context_length, error=errors[-1][:300])
        row["process_seconds"] = round(time.perf_counter() - started, 1)
        append_row(out, row)
        logger.info("%s: %s", cell, row)


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="part", required=True)
    law = sub.add_parser("law_fit", help="the embedded default grid")
    law.add_argument("--tokens", default=str(ROOT / "data/05_model_input/train_tokens"))
    law.add_argument("--out", default=".")
    law.add_argument("--label", default="gpu" if torch.cuda.is_available() else "cpu")
    law.add_argument("--shard", default="0/1", help="i/n: every n-th run from the i-th")
    law.add_argument("--deadline-s", type=float, default=float("inf"),
                     help="start no run after this many seconds")  # fmt: skip
    paper = sub.add_parser("paper", help="throughput of paper-sized cells")
    paper.add_argument("--out", default=".")
    paper.add_argument("--label", default="gpu" if torch.cuda.is_available() else "cpu")
    paper.add_argument("--cells", nargs="+", default=["32x128", "128x512", "256x1024"])
    paper.add_argument("--steps", type=int, default=30)
    paper.add_argument("--cell-timeout", type=float, default=300)
    cell = sub.add_parser("paper-cell", help="one paper cell (run by `paper` in a child)")
    cell.add_argument("cell")
    cell.add_argument("--steps", type=int, default=30)
    args = parser.parse_args()
    if args.part == "law_fit":
        run_law_fit(args)
    elif args.part == "paper":
        run_paper(args)
    else:
        batch_size, context_length = (int(v) for v in args.cell.split("x"))
        print(json.dumps(paper_cell(batch_size, context_length, args.steps)))


if __name__ == "__main__":
    main()
