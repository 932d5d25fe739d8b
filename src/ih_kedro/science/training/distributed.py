"""The process group and the DeepSpeed engine of a training run.

Without the ``deepspeed`` launcher a process initialises a one-rank group itself (once per
process; every run of a sweep reuses it); under the launcher the environment names the ranks.
The engine wraps the run's own torch AdamW and LR schedule.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import torch

from ih_kedro.science.training.config import TrainingRunConfig
from ih_kedro.science.training.runtime import configure_runtime
from ih_kedro.science.training.schedules import lr_factor

logger = logging.getLogger(__name__)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def init_distributed() -> tuple[int, int]:
    """Initialise the process group once per process; return ``(rank, world_size)``.

    Under the ``deepspeed`` launcher the environment names the ranks. Without it (a plain
    ``kedro run``, a notebook, a test) this process becomes a one-rank group on 127.0.0.1 with a
    free port. The backend is the accelerator's (gloo on CPU, nccl on CUDA).

    A world of one always takes a fresh port: nobody else joins it, and a ``MASTER_PORT``
    inherited from a parent process that trained (a notebook or test runner that started
    ``kedro run``) belongs to the parent's still-open group, so binding it would fail.
    """
    configure_runtime()
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    if os.environ.get("WORLD_SIZE", "1") == "1":
        os.environ.setdefault("RANK", "0")
        os.environ["WORLD_SIZE"] = "1"
        os.environ.setdefault("LOCAL_RANK", "0")
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ["MASTER_PORT"] = str(_free_port())
    import deepspeed
    from deepspeed.accelerator import get_accelerator

    logging.getLogger("DeepSpeed").setLevel(logging.WARNING)
    with _no_shm_allreduce_op_on_cpu(get_accelerator().device_name()):
        deepspeed.init_distributed(
            dist_backend=get_accelerator().communication_backend_name(), verbose=False
        )
    return dist.get_rank(), dist.get_world_size()


@contextlib.contextmanager
def _no_shm_allreduce_op_on_cpu(device_name: str) -> Iterator[None]:
    """Skip DeepSpeed's CPU shared-memory all-reduce op: training never uses it.

    DeepSpeed builds that op whenever a CPU process group starts. Only its tensor-parallel
    inference layers call it (``inference_all_reduce``); ZeRO's data-parallel training reduces
    through ``torch.distributed`` (gloo). Building it costs every rank a C++ JIT build under a
    file lock in ``~/.cache/torch_extensions``, and each rank of a multi-rank job creates a
    66 MB ``/dev/shm/deepspeed_allreduce_buffer_…`` file that DeepSpeed never unlinks (its
    ``shared_close`` has no caller): 129 leaked 2-rank jobs once filled 17 GB of a 24 GB
    machine's memory, and Ray's memory monitor then killed a sweep's tasks.
    """
    if device_name != "cpu":
        yield
        return
    import importlib

    # The module itself: ``deepspeed.comm.torch`` as an attribute is the torch package.
    ds_torch = importlib.import_module("deepspeed.comm.torch")
    build = ds_torch.build_shm_op
    ds_torch.build_shm_op = lambda: None
    try:
        yield
    finally:
        ds_torch.build_shm_op = build


ALLREDUCE_BUFFER_PREFIX = "deepspeed_allreduce_buffer_"


def remove_leaked_allreduce_buffers(
    shm_dir: Path = Path("/dev/shm"), proc_dir: Path = Path("/proc")
) -> int:
    """Delete this user's DeepSpeed all-reduce buffers that no live process maps; return bytes.

    They are what multi-rank CPU jobs leaked before :func:`_no_shm_allreduce_op_on_cpu` (or
    jobs of other DeepSpeed code): ``/dev/shm`` is memory, and Ray's memory monitor counts it
    as used. A buffer is named ``deepspeed_allreduce_buffer_<uid>_<addr>_<port>_<rank>`` and
    stays mapped by its rank until that process ends, so an unmapped one is garbage.
    """
    own = f"{ALLREDUCE_BUFFER_PREFIX}{os.getuid()}_"
    buffers = sorted(shm_dir.glob(own + "*")) if shm_dir.is_dir() else []
    if not buffers:
        return 0
    mapped: set[str] = set()
    for maps in proc_dir.glob("[0-9]*/maps"):
        with contextlib.suppress(OSError):  # a process that ended, or another user's
            mapped.update(line.split(maxsplit=5)[-1].removesuffix(" (deleted)")
                          for line in maps.read_text().splitlines() if str(shm_dir) in line)  # fmt: skip
    freed = 0
    for buffer in buffers:
        if str(buffer) in mapped:
            continue
        with contextlib.suppress(OSError):  # removed meanwhile
            size = buffer.stat().st_size
            buffer.unlink()
            freed += size
    if freed:
        logger.warning(
            "freed %.1f GB of %s: DeepSpeed all-reduce buffers that ended jobs left in memory",
            freed / 1e9,
            shm_dir,
        )
    return freed


def deepspeed_config_for_run(
    ds_config: Mapping[str, Any],
    batch_size: int,
    world_size: int,
    micro_batch_rows: int | None = None,
) -> dict[str, Any]:
    """The DeepSpeed config of one run: the run's ``B`` split over ranks, and each rank's share
    in micro-batches of ``micro_batch_rows`` (default: all of it, no accumulation)."""
    if batch_size % world_size:
        raise ValueError(
            f"training.batch_sizes: batch size {batch_size} is not divisible by the "
            f"{world_size} data-parallel ranks"
        )
    rows = batch_size // world_size
    micro = rows if micro_batch_rows is None else int(micro_batch_rows)
    if micro <= 0 or rows % micro:
        raise ValueError(
            f"training.micro_batch_tokens: {micro} rows per micro-batch do not divide the "
            f"{rows} rows of a rank's batch"
        )
    config = json.loads(json.dumps(dict(ds_config)))  # deep copy of plain data
    config.pop("train_batch_size", None)
    config["train_micro_batch_size_per_gpu"] = micro
    config["gradient_accumulation_steps"] = rows // micro
    config.setdefault("steps_per_print", 10**12)
    config.setdefault("wall_clock_breakdown", False)
    return config


def build_engine(
    model: torch.nn.Module, config: TrainingRunConfig, total_steps: int, world_size: int
) -> tuple[Any, torch.optim.Optimizer, Any]:
    """Wrap ``model`` in a DeepSpeed engine with our AdamW and LR schedule.

    Returns ``(engine, optimizer, lr_scheduler)``; DeepSpeed steps the scheduler.
    """
    import deepspeed

    decay = [p for p in model.parameters() if p.requires_grad and p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.requires_grad and p.dim() < 2]
    optimizer = torch.optim.AdamW(
        [
            {"params": decay, "weight_decay": config.weight_decay},
            {"params": no_decay, "weight_decay": 0.0},
        ],
        lr=config.learning_rate,
        betas=tuple(config.betas),
        eps=config.eps,
    )
    warmup_steps, horizon_steps = config.lr_schedule_steps(total_steps)

    def factor(step: int) -> float:
        return lr_factor(step, warmup_steps, config.schedule, horizon_steps, config.min_lr_ratio)

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
    ds_config = deepspeed_config_for_run(
        config.deepspeed, config.batch_size, world_size, config.micro_batch_rows(world_size)
    )
    engine, optimizer, _, scheduler = deepspeed.initialize(
        model=model,
        optimizer=optimizer,
        lr_scheduler=scheduler,
        config=ds_config,
        dist_init_required=False,
    )
    skip_allreduce_in_world_of_one(engine, world_size)
    return engine, optimizer, scheduler


def skip_allreduce_in_world_of_one(engine: Any, world_size: int) -> None:
    """Turn off the engine's gradient all-reduce when there is one rank and no ZeRO partitioning.

    Averaging gradients over a world of one flattens, "reduces" and copies back every gradient
    each step (~1 ms, ~4% of a step of the tiny CPU models); the result is the same gradients.
    With two or more ranks the all-reduce stays on. Under ZeRO stage 1 or 2 it stays on in a
    world of one too: there the "reduction" is what hands the gradients to the ZeRO optimizer's
    partitions, and without it the first ``step()`` finds none (a ``KeyError`` in DeepSpeed's
    overflow check: the paper configuration, ZeRO-2 with one rank per run, failed so).
    """
    if world_size == 1 and engine.zero_optimization_stage() == 0:
        engine.enable_backward_allreduce = False
