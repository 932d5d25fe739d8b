"""One GPU acceptance command: the full stack, the loss paths' throughput, a 2-rank job.

    python benchmarks/gpu_acceptance.py --out out/            # on a GPU machine (<= 8 min)
    python benchmarks/gpu_acceptance.py --cpu-tiny --out out/ # tiny presets on any CPU (CI)

Writes ``gpu_acceptance.json`` and ``gpu_acceptance.csv`` under ``--out`` and prints a table.

``throughput``
    Tokens/s, MFU and peak memory of ``gpt2-2l-d768`` (law_fit's paper preset) and
    ``llama-0.13b`` (Bi-Induct's smallest) at their paper step (B 64 x C 1024 = 2^16 tokens,
    bf16, ZeRO-2, vocabulary 50,257) for each loss path (``training.loss_implementation``:
    ``full``, ``chunked``, and ``liger`` where Liger-Kernel is installed), through ``train_run``
    (the DeepSpeed engine) on random tokens; each cell in its own process, so a cell that runs
    out of memory is a row, not a crash. MFU against the card's dense bf16 peak (989 TFLOP/s
    for an H100 / H200 SXM); FLOPs per token as ``paper_projection.py`` counts them.
``full_stack``
    ``kedro run --pipeline=law_fit`` at the embedded default on this machine's GPU, Ray packing
    runs onto it through a fractional ``executor.num_gpus_per_run``, MLflow tracking into
    ``--out``: wall time and the fitted a, b beside the CPU result (``--cpu-a``, ``--cpu-b``:
    the 2-core AMD EPYC Zen 4 fit of benchmarks/README.md's "Training on one GPU").
``two_ranks``
    With two or more GPUs: the gpt2 cell as one DeepSpeed job of 2 ranks (``ranks_per_run``).

``--cpu-tiny`` runs the throughput part only, with ``gpt2-tiny`` and ``llama-tiny`` at
B 4 x C 32 over 1,024 ids in fp32 in this process (seconds), and records the other parts as
skipped, so the script's code paths cannot rot where no GPU is.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ih_kedro.science.data.packed import PackedTokens
from ih_kedro.science.training.checkpoints import CheckpointStore
from ih_kedro.science.training.config import TrainingRunConfig
from ih_kedro.science.training.models import build_model
from ih_kedro.science.training.run import train_run

sys.path.insert(0, str(Path(__file__).resolve().parent))
from chunked_loss_memory import PeakSampler  # noqa: E402 - benchmarks/, beside this file
from paper_projection import flops_per_token  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PEAK_BF16_TFLOPS = {"H100": 989.0, "H200": 989.0}  # dense bf16, SXM cards
PAPER_DEEPSPEED = {
    "zero_optimization": {"stage": 2, "overlap_comm": True, "contiguous_gradients": True},
    "bf16": {"enabled": True},
    "gradient_clipping": 1.0,
}


@dataclass
class Cell:
    """One throughput measurement: a preset at (B, C) with one loss path."""

    preset: str
    batch_size: int
    context_length: int
    vocab: int
    loss: str
    steps: int
    micro_batch_tokens: int | None
    deepspeed: dict[str, Any]
    ranks: int = 1


def gpu_cells(steps: int) -> list[Cell]:
    """The paper cells: each preset at 2^16 tokens per step, each available loss path."""
    losses = ["full", "chunked"] + (["liger"] if _liger_available() else [])
    return [
        Cell(preset, 64, 1024, 50257, loss, steps, 65536, PAPER_DEEPSPEED)
        for preset in ("gpt2-2l-d768", "llama-0.13b")
        for loss in losses
    ]


def tiny_cells() -> list[Cell]:
    """The CI cells: tiny presets, fp32 ZeRO-0, a few steps."""
    zero = {"zero_optimization": {"stage": 0}}
    return [
        Cell(preset, 4, 32, 1024, loss, 4, None, zero)
        for preset in ("gpt2-tiny", "llama-tiny")
        for loss in ("full", "chunked")
    ]


def _liger_available() -> bool:
    try:
        import liger_kernel  # noqa: F401
    except ImportError:
        return False
    return torch.cuda.is_available()


class _Tracker:
    """Keeps the logged metrics; the rest of the tracker API does nothing."""

    def __init__(self) -> None:
        self.metrics: list[dict[str, float]] = []

    def run(self, name: str, params: dict, run_id: str | None = None) -> Any:
        import contextlib

        return contextlib.nullcontext(None)

    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        self.metrics.append(dict(metrics))

    def log_artifact(self, path: str) -> None:
        return None


def _peak_tflops() -> float | None:
    if not torch.cuda.is_available():
        return None
    name = torch.cuda.get_device_name()
    return next((v for k, v in PEAK_BF16_TFLOPS.items() if k in name), None)


def measure(cell: Cell) -> dict[str, Any]:
    """Train the cell's steps; its steady tokens/s, MFU and peak memory (GiB)."""
    config = TrainingRunConfig(
        run_name=f"{cell.preset}_{cell.loss}",
        preset=cell.preset,
        batch_size=cell.batch_size,
        context_length=cell.context_length,
        data_variant="natural",
        max_steps=cell.steps,
        warmup_steps=0,
        log_every=max(1, cell.steps // 4),
        checkpoint_every=10**9,
        checkpoint_dense_until=0,
        early_stop=False,
        micro_batch_tokens=cell.micro_batch_tokens,
        loss_implementation=cell.loss,
        deepspeed=cell.deepspeed,
    )
    n_tokens = (cell.steps + 2) * cell.batch_size * (cell.context_length + 1) * 2
    tokens = np.random.default_rng(0).integers(1, cell.vocab, n_tokens, dtype=np.uint32)
    packed = PackedTokens(tokens=tokens, vocab_size=cell.vocab, eos_token_id=0, checksum="r")
    model = build_model(cell.preset, cell.vocab, cell.context_length, seed=0)
    per_token = flops_per_token(model, cell.context_length, cell.vocab)
    del model
    tracker = _Tracker()
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    with tempfile.TemporaryDirectory() as root, PeakSampler() as sampler:
        summary = train_run(config, packed, CheckpointStore(root), tracker)
    windows = [m["tokens_per_second"] for m in tracker.metrics if "tokens_per_second" in m]
    steady = float(np.median(windows[1:] if len(windows) > 1 else windows))
    peak = torch.cuda.max_memory_allocated() if torch.cuda.is_available() else sampler.peak
    peak_tflops = _peak_tflops()
    return {
        **{k: v for k, v in asdict(cell).items() if k != "deepspeed"},
        "status": "ok",
        "tokens_per_second": round(steady, 1),
        "tflops": round(steady * per_token / 1e12, 3),
        "mfu": round(steady * per_token / (peak_tflops * 1e12), 4) if peak_tflops else None,
        "peak_memory_gib": round(peak / 2**30, 3),
        "memory_kind": "cuda allocated" if torch.cuda.is_available() else "process RSS",
        "final_loss": round(float(summary["final_loss"]), 4),
    }


def measure_in_child(cell: Cell, timeout: float) -> dict[str, Any]:
    """``measure`` in a fresh process: an out-of-memory cell becomes a row with its error."""
    command = [sys.executable, __file__, "--cell", json.dumps(asdict(cell))]
    try:
        done = subprocess.run(command, check=False, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {**asdict(cell), "status": f"timed out after {timeout:.0f} s"}
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {**asdict(cell), "status": f"failed: {last[:200]}"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def full_stack(out: Path, gpus_per_run: float, cpu_a: float, cpu_b: float) -> dict[str, Any]:
    """``kedro run --pipeline=law_fit`` with fractional GPUs per Ray task; wall and a, b."""
    params = (
        f"law_fit.training.executor.num_gpus_per_run={gpus_per_run},"
        "law_fit.training.executor.num_cpus_per_run=1"
    )
    command = ["kedro", "run", "--pipeline=law_fit", f"--params={params}"]
    env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{out.resolve()}/mlflow.db"}
    start = time.perf_counter()
    done = subprocess.run(command, check=False, cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    (out / "full_stack.log").write_text(done.stdout + done.stderr)
    row: dict[str, Any] = {"command": " ".join(command), "wall_seconds": round(wall, 1)}
    if done.returncode != 0:
        return {**row, "status": f"failed (exit {done.returncode}; full_stack.log)"}
    summary_path = ROOT / "data/08_reporting/law_fit/law_fit_summary.json"
    summary = json.loads(summary_path.read_text())
    return {
        **row,
        "status": "ok",
        "a": summary.get("a"),
        "b": summary.get("b"),
        "cpu_a": cpu_a,
        "cpu_b": cpu_b,
    }


def run_all(args: argparse.Namespace) -> dict[str, Any]:
    """Every part this machine can run; the others recorded as skipped with the reason."""
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    device = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
    record: dict[str, Any] = {"device": device, "gpus": torch.cuda.device_count()}
    if args.cpu_tiny:
        record["throughput"] = [measure(cell) for cell in tiny_cells()]
        record["full_stack"] = {"status": "skipped (--cpu-tiny)"}
        record["two_ranks"] = {"status": "skipped (--cpu-tiny)"}
        return record
    if not torch.cuda.is_available():
        raise SystemExit("no CUDA device: run with --cpu-tiny, or on a GPU machine")
    record["throughput"] = [measure_in_child(c, args.cell_timeout) for c in gpu_cells(args.steps)]
    if torch.cuda.device_count() >= 2:
        pair = Cell("gpt2-2l-d768", 64, 1024, 50257, "chunked", args.steps, 65536,
                    PAPER_DEEPSPEED, ranks=2)  # fmt: skip
        record["two_ranks"] = _two_ranks(pair)
    else:
        record["two_ranks"] = {"status": "skipped (one GPU)"}
    if args.skip_full_stack:
        record["full_stack"] = {"status": "skipped (--skip-full-stack)"}
    else:
        record["full_stack"] = full_stack(out, args.gpus_per_run, args.cpu_a, args.cpu_b)
    return record


def _two_ranks(cell: Cell) -> dict[str, Any]:
    """The cell as one 2-rank DeepSpeed job through the sweep's launcher: steps and wall."""
    from ih_kedro.science.training.sweep import ExecutorConfig, run_sweep

    config = TrainingRunConfig(
        run_name="two_ranks", preset=cell.preset, batch_size=cell.batch_size,
        context_length=cell.context_length, data_variant="natural", max_steps=cell.steps,
        warmup_steps=0, checkpoint_every=10**9, checkpoint_dense_until=0, early_stop=False,
        micro_batch_tokens=cell.micro_batch_tokens, loss_implementation=cell.loss,
        deepspeed=cell.deepspeed,
    )  # fmt: skip
    n_tokens = (cell.steps + 2) * cell.batch_size * (cell.context_length + 1) * 2
    tokens = np.random.default_rng(0).integers(1, cell.vocab, n_tokens, dtype=np.uint32)
    packed = PackedTokens(tokens=tokens, vocab_size=cell.vocab, eos_token_id=0, checksum="r")
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as root:
        (row,) = run_sweep([config], packed, CheckpointStore(root),
                           ExecutorConfig(kind="sequential", ranks_per_run=2, num_gpus_per_run=2))  # fmt: skip
    wall = time.perf_counter() - start
    tokens_seen = int(row["tokens_seen"])
    return {"status": "ok", "steps": int(row["steps_trained"]), "wall_seconds": round(wall, 1),
            "tokens_per_second_with_start": round(tokens_seen / wall, 1)}  # fmt: skip


def write(record: dict[str, Any], out: Path) -> None:
    """``gpu_acceptance.json`` (everything) and ``gpu_acceptance.csv`` (the throughput rows)."""
    (out / "gpu_acceptance.json").write_text(json.dumps(record, indent=1))
    rows = record["throughput"]
    columns = sorted({k for row in rows for k in row})
    with (out / "gpu_acceptance.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)


def table(record: dict[str, Any]) -> str:
    """The printed summary: one line per throughput cell, then the other parts."""
    lines = [f"device: {record['device']}",
             "| preset | B x C | loss | status | tokens/s | MFU | peak memory (GiB) |",
             "|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in record["throughput"]:
        mfu = f"{r['mfu']:.1%}" if r.get("mfu") is not None else "n/a"
        lines.append(
            f"| {r['preset']} | {r['batch_size']} x {r['context_length']} | {r['loss']} | "
            f"{r['status']} | {r.get('tokens_per_second', '–')} | {mfu} | "
            f"{r.get('peak_memory_gib', '–')} |"
        )
    lines.append(f"full stack: {json.dumps(record['full_stack'])}")
    lines.append(f"two ranks: {json.dumps(record['two_ranks'])}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="gpu_acceptance")
    parser.add_argument("--cpu-tiny", action="store_true", help="tiny presets on the CPU (CI)")
    parser.add_argument("--steps", type=int, default=20, help="steps per throughput cell")
    parser.add_argument("--cell-timeout", type=float, default=120.0)
    parser.add_argument("--gpus-per-run", type=float, default=0.25)
    parser.add_argument("--skip-full-stack", action="store_true")
    parser.add_argument("--cpu-a", type=float, default=0.85)
    parser.add_argument("--cpu-b", type=float, default=-0.07)
    parser.add_argument("--cell", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.cell:  # a child process: one cell, one JSON line
        print(json.dumps(measure(Cell(**json.loads(args.cell)))))
        return
    record = run_all(args)
    write(record, Path(args.out))
    print(table(record))


if __name__ == "__main__":
    main()
